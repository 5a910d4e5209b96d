"""Structured references as a user runs them (issue 18): the same run directory as a federated method,
side by side in `fedloom table`, and Qlib's published CSI300 level reached on the full panel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedloom.metrics.cross_section import daily_rank_ic
from fedloom.references.base import Objective
from fedloom.references.registry import REFERENCES, SEQUENCE_REFERENCES
from fedloom.references.training import fit_and_score
from fedloom.runs.config import load_config
from fedloom.runs.reference import reference_table
from fedloom.runs.workspace import data_owners
from tests.conftest import SHARED_DATA

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}"),
]

DATA = ["--set", f"data.data_dir={SHARED_DATA}"]
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
TINY_SEQUENCES = [
    arg
    for name in (*SEQUENCE_REFERENCES, "master", "hist")
    for setting in ("max_epochs=3", "hidden_size=16")
    for arg in ("--set", f"references.{name}.{setting}")
]
SMALL_CSI300 = [
    "--dataset", "csi300", "--set", "data.qlib_cn.max_instruments=30", "--set", "data.max_dates_per_split=40",
    "--set", "data.qlib_cn.feature_set=compact",
    "--set", "references.threads=1",
    "--set", "references.lightgbm.num_boost_round=60", "--set", "references.xgboost.num_boost_round=60",
    "--set", "references.catboost.num_boost_round=60", "--set", "references.mlp.max_steps=200",
    "--set", "references.mlp.batch_rows=512", "--set", "references.ridge_probe.inputs=covariates", *DATA,
    *TINY_SEQUENCES,
    # Qlib's LightGBM lambda_l1 205.7 / lambda_l2 581 are sized for ~10^5 rows: on 1,200 nothing splits
    "--set", "references.lightgbm.lambda_l1=1", "--set", "references.lightgbm.lambda_l2=1",
]  # fmt: skip


def fedloom(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fedloom.cli", *args], capture_output=True, text=True, timeout=900)


def sets(*assignments: str) -> list[str]:
    return [arg for a in assignments for arg in ("--set", a)]


@pytest.mark.parametrize(
    ("names", "features"),
    [
        (sorted(name for name, r in REFERENCES.items() if r.reads == "rows"), []),
        (SEQUENCE_REFERENCES, sets("data.qlib_cn.features=alpha360")),  # 5 fields x the last 4 days
        (
            ["master"],
            sets("data.qlib_cn.step_len=8", "data.qlib_cn.market=true", "references.master.temporal_heads=2"),
        ),
        (["hist"], sets("data.qlib_cn.features=alpha360", "data.qlib_cn.concepts=true")),
    ],
    ids=["tabular", "sequence", "market", "concepts"],
)
def test_every_reference_writes_a_run_directory_the_table_reads(
    tmp_path: Path, names: list[str], features: list[str]
) -> None:
    """`fedloom compare` runs the references on one small CSI300 panel; each writes summary, metrics,
    daily series with the pooled cross-section and a portfolio; `fedloom table` shows them as rows."""
    proc = fedloom("compare", "--methods", ",".join(names), *SMALL_CSI300, *features, "--out", str(tmp_path / "refs"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in names:
        run = tmp_path / "refs" / name
        assert {"config.yaml", "env.json", "metrics.jsonl", "summary.json", "daily.csv", "portfolio.csv"} <= {
            p.name for p in run.iterdir()
        }
        summary = json.loads((run / "summary.json").read_text())
        assert summary["method"] == name and summary["reference"]["mode"] == "pooled"
        assert np.isfinite(summary["metrics"]["personal/test/rank_ic/macro"])
        assert np.isfinite(summary["cross_section"]["rank_ic"]) and "information_ratio" in summary["portfolio"]
        daily = (run / "daily.csv").read_text().splitlines()
        assert daily[0].split(",") == ["date", "ic", "rank_ic", "ic_pooled", "rank_ic_pooled"]
        assert len(daily) - 1 == 357  # every test date (training thinned to 40 dates a split)
    table = fedloom("table", str(tmp_path / "refs"), "--reference", names[0])
    assert table.returncode == 0, table.stderr[-2000:]
    assert "pooled RankIC" in table.stdout
    for name in names:
        assert f"| {name} " in table.stdout


def test_local_references_on_a_classification_table(tmp_path: Path) -> None:
    """ACL18 movement: one LightGBM per sector client; MCC and accuracy per client like an LLM run."""
    out = tmp_path / "acl18-lgb"
    proc = fedloom("run", "--method", "lightgbm", "--dataset", "acl18", "--set", "references.mode=local",
                   "--set", "data.max_dates_per_split=30", "--set", "references.threads=1",
                   "--set", "references.lightgbm.num_leaves=7", *DATA, "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["primary_metric"] == "mcc"
    assert set(summary["reference"]["fits"]) == set(summary["per_client"]) and len(summary["per_client"]) == 9
    assert all(0.0 <= v["test/accuracy"] <= 1.0 for v in summary["per_client"].values())


def test_a_reference_refuses_resume_and_text_data(tmp_path: Path) -> None:
    proc = fedloom("run", "--method", "linear", "--dataset", "gsm8k", *DATA, "--out", str(tmp_path / "g"))
    assert proc.returncode != 0 and "needs a financial table" in proc.stderr and "Traceback" not in proc.stderr
    done = tmp_path / "synthetic-linear"
    proc = fedloom("run", "--method", "linear", "--dataset", "synthetic", "--out", str(done))
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = fedloom("run", "--resume", str(done))
    assert proc.returncode != 0 and "structured reference" in proc.stderr and "Traceback" not in proc.stderr


def test_a_federated_mlp_runs_round_by_round_resumes_and_reports_its_bytes(tmp_path: Path) -> None:
    """references.mode=federated: FedAvg on the MLP's tensors, round by round like an LLM method — a
    checkpoint per round, --resume to more rounds, and the network's size on the wire every client-round;
    Local-only sends nothing."""
    from fedloom.runs.reference import federated_workspace

    out = tmp_path / "fed-mlp"
    common = ["--method", "mlp", "--dataset", "synthetic", *sets("references.mode=federated", "train.steps=3")]
    proc = fedloom("run", *common, "--rounds", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = fedloom("run", "--resume", str(out), *sets("rounds=3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reference"] == {"mode": "federated", "algorithm": "fedavg"} and summary["rounds"] == 3
    rounds = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1, 2, 3]
    cfg = load_config(out / "config.yaml")
    ws = federated_workspace(cfg)
    values = sum(t.numel() for t in ws.shared_init.values())
    width = {"float32": 4, "bfloat16": 2, "float16": 2}[cfg.federation.wire_dtype]
    for r in rounds:
        assert set(r["download_bytes"].values()) == {values * width}  # the whole network, every client
    assert (out / "daily.csv").is_file() and np.isfinite(summary["metrics"]["personal/test/ic/macro"])
    local = tmp_path / "fed-mlp-local"
    proc = fedloom("run", *common, *sets("references.algorithm=local"), "--rounds", "2", "--out", str(local))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((local / "summary.json").read_text())["communication"]["download_bytes"] == 0


def test_linear_and_lightgbm_reach_qlibs_published_rank_ic_on_the_full_csi300_panel() -> None:
    """Qlib's CSI300 Alpha158 benchmark reports RankIC 0.047 for Linear and LightGBM (2017–2020). On the
    bundled 2018–2025 window with the same recipe (157 features, RobustZScoreNorm, CSRankNorm label,
    early stopping on 2023), the pooled models must reach RankIC ≥ 0.040 over all 357 test days,
    one cross-section of every member per day, as Qlib measures it. The config is the issue's command,
    `--dataset csi300 --set data.max_dates_per_split=null`: the dataset's defaults are that recipe."""
    cfg = load_config(None, {"dataset": "csi300"}, [*DATA[1:], "data.max_dates_per_split=null"])
    assert cfg.data.qlib_cn == load_config(CONFIGS / "csi300-full.yaml", None, DATA[1:]).data.qlib_cn
    table = reference_table(cfg)
    clients = data_owners(cfg, table)
    test = np.concatenate([c.test for c in clients])
    assert len(np.unique(table.dates[test])) == 357
    x = table.frame[list(table.covariates)].to_numpy(np.float32)
    returns = table.frame["return"].to_numpy()
    for name in ("linear", "lightgbm"):
        scores, _ = fit_and_score(name, cfg.references, Objective("regression"), table.covariates, x, table.targets,
                                  table.dates, clients, cfg.seed)  # fmt: skip
        rank_ic = float(daily_rank_ic(scores[test], returns[test], table.dates[test]).mean())
        assert rank_ic >= 0.040, (name, rank_ic)
