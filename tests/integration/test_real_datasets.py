"""Every real financial dataset runs end to end with FedAvg on the tiny model (issue 3).

Each run is tiny: a few dates per split, one round of two steps; it checks that the loader, the
prompts, the partition, the task and the metrics fit together, not the numbers.
"""

from __future__ import annotations

import math

import pytest

from fedloom.runs.llm import run_method
from fedloom.runs.workspace import prepare_workspace
from tests.conftest import SHARED_DATA, small_config

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}"),
]

CASES = {
    "acl18": (
        {"data.max_dates_per_split": 6, "data.max_test_dates": 6, "prompt.max_tokens": 256, "prompt.decimals": 2},
        "mcc",
    ),
    "bigdata22": (
        {"data.max_dates_per_split": 6, "data.max_test_dates": 6, "prompt.max_tokens": 256, "prompt.decimals": 2},
        "mcc",
    ),
    "fnspid": (
        {
            "data.max_dates_per_split": 6,
            "data.max_test_dates": 6,
            "data.partition": "dirichlet",
            "data.num_clients": 3,
            "prompt.max_tokens": 256,
            "prompt.decimals": 2,
        },
        "ic",
    ),
    "csi300": (
        {
            "data.max_dates_per_split": 3,
            "data.max_test_dates": 3,
            "data.qlib_cn.max_instruments": 30,
            "data.qlib_cn.feature_set": "compact",
            "prompt.inputs": "structured",
            "prompt.max_tokens": 256,
            "prompt.decimals": 2,
        },
        "rank_ic",
    ),
    "csi800": (
        {
            "data.max_dates_per_split": 3,
            "data.max_test_dates": 3,
            "data.qlib_cn.max_instruments": 30,
            "data.qlib_cn.feature_set": "compact",
            "prompt.inputs": "structured",
            "prompt.max_tokens": 256,
            "prompt.decimals": 2,
            "data.partition": "iid",
            "data.num_clients": 3,
        },
        "rank_ic",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fedavg_runs_on(name, tmp_path):
    overrides, metric = CASES[name]
    cfg = small_config(**{"dataset": name, "rounds": 1, "data.data_dir": str(SHARED_DATA), **overrides})
    ws = prepare_workspace(cfg)
    assert not ws.table.synthetic and len(ws.learners) >= 2
    summary = run_method(cfg, ws, tmp_path / name)
    assert summary["selection"]["metric"] == f"personal/val/{metric}/macro"
    assert summary["communication"]["upload_bytes"] > 0
    values = [v for k, v in summary["metrics"].items() if k.startswith(f"personal/test/{metric}/")]
    assert values and any(v is not None and math.isfinite(v) for v in values)
    if name.startswith("csi"):  # the Qlib TopkDropout backtest on the pooled test scores
        p = summary["portfolio"]
        assert {"annualized_return", "information_ratio", "max_drawdown"} <= set(p) and p["trade_days"] > 0
        assert {"regime_std", "worst_regime_drop"} <= set(summary["regimes"])  # thresholds from train dates


TEXT = ["arc_challenge", "gsm8k", "jfleg", "multitask", "tweeteval"]


@pytest.mark.parametrize("name", TEXT)
def test_fedavg_runs_on_text(name, tmp_path):
    """Instruction tasks: teacher-forced training on the response tokens, greedy decoding for metrics."""
    cfg = small_config(
        **{
            "dataset": name,
            "rounds": 1,
            "data.data_dir": str(SHARED_DATA),
            "data.text.train_size": 12,
            "data.text.val_size": 2,
            "data.text.test_size": 3,
            "data.num_clients": 2,
            "prompt.max_tokens": 48,
            "generation.max_new_tokens": "{gsm8k: 6, arc_challenge: 2, tweeteval: 2, jfleg: 6}",
        }
    )
    ws = prepare_workspace(cfg)
    summary = run_method(cfg, ws, tmp_path / name)
    assert summary["selection"]["metric"] == "personal/val/score/macro"
    loss = summary["metrics"]["personal/test/loss/macro"]
    assert math.isfinite(loss) and loss > 0  # teacher-forced loss of the random tiny model: ~ log(vocab)
    assert 0.0 <= summary["metrics"]["personal/test/score/macro"] <= 1.0


def test_fedweave_run_audits_alignment_against_hidden_tasks(tmp_path):
    cfg = small_config(
        **{
            "dataset": "multitask",
            "method": "fedweave",
            "rounds": 2,
            "data.data_dir": str(SHARED_DATA),
            "data.text.train_size": 12,
            "data.text.val_size": 2,
            "data.text.test_size": 3,
            "data.num_clients": 3,
            "prompt.max_tokens": 40,
            "router_hidden": 16,
            "generation.max_new_tokens": "{gsm8k: 2, arc_challenge: 2, tweeteval: 2, jfleg: 2}",
        }
    )
    summary = run_method(cfg, prepare_workspace(cfg), tmp_path / "fw")
    quality = summary["alignment"]
    assert set(quality) == {f"{s}_{m}" for s in ("local", "global") for m in ("purity", "nmi", "ari")}
    assert all(0.0 <= quality[k] <= 1.0 for k in quality if not k.endswith("ari"))
    assert (tmp_path / "fw" / "task_expert.png").stat().st_size > 1000
