"""The composition layer on hand-made inputs: round selection, summaries, reports, a method's declared
outputs, evaluation-time settings and the workspace's per-client labels."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from fedloom.algorithms.base import Heatmap, Record, RunReport
from fedloom.errors import ConfigError
from fedloom.results.compare_report import comparison_report
from fedloom.results.load import RunResult
from fedloom.runs.evaluate import evaluate_run, evaluation_settings
from fedloom.runs.outputs import write_run_report
from fedloom.runs.report import single_report
from fedloom.runs.rundir import RunDirectory
from fedloom.runs.summary import best_round, build_summary, recent_diagnostics, rounds_to_share
from fedloom.runtime.rounds import RoundRecord, SimulationResult
from tests.conftest import small_config


def _round(rnd: int, val: float | None, test: float = 0.0) -> RoundRecord:
    """A round whose personalized validation IC is ``val`` (None: not evaluated)."""
    if val is None:
        return RoundRecord(rnd, ["a", "b"])
    per = {"a": {"ic": test}, "b": {"ic": test + 0.2}}
    evaluation = {"personal": {"val": {"a": {"ic": val}, "b": {"ic": val}}, "test": per}}
    summary = {"personal/val/ic/macro": val, "personal/test/ic/macro": test + 0.1}
    return RoundRecord(rnd, ["a", "b"], train={"a": {"train_loss": 1.0}}, evaluation=evaluation, summary=summary,
                       download_bytes={"a": 10, "b": 10}, upload_bytes={"a": 5},
                       bytes_by_group={"upload": {"A": 3, "B": 2}})  # fmt: skip


def test_best_round_is_the_best_validation_score_with_ties_to_the_earliest():
    history = [_round(1, 0.1), _round(2, None), _round(3, 0.3), _round(4, 0.3), _round(5, 0.2)]
    assert best_round(history, "ic").round == 3
    # lower-is-better metrics pick the smallest value
    losses = [_round(r, v) for r, v in ((1, 0.5), (2, 0.2), (3, 0.4))]
    for r in losses:
        r.summary["personal/val/mse/macro"] = r.summary["personal/val/ic/macro"]
    assert best_round(losses, "mse").round == 2
    # no finite validation score: the last evaluated round
    assert best_round([_round(1, math.nan), _round(2, math.nan), _round(3, None)], "ic").round == 2


def test_summary_reads_the_chosen_round_and_sums_the_bytes_of_every_round():
    history = [_round(1, 0.1, test=0.5), _round(2, 0.4, test=-0.5)]
    result = SimulationResult(Record(), {}, history)
    cfg = small_config(method="rpa")
    s = build_summary(cfg, result, 1.5, "runs/x", "ic", True, {"a": {"heterogeneity": 0.7}})
    assert s["selection"] == {"metric": "personal/val/ic/macro", "best_round": 2, "rounds_to_95": 2.0}
    assert s["metrics"]["personal/test/ic/macro"] == pytest.approx(-0.4)
    assert s["final_metrics"] is history[-1].summary
    assert s["per_client"]["a"] == {"val/ic": 0.4, "test/ic": -0.5, "heterogeneity": 0.7}
    assert s["communication"] == {"download_bytes": 40, "upload_bytes": 10, "by_group": {"upload": {"A": 6, "B": 4}}}
    assert s["method"] == "rpa" and s["synthetic"] is True and s["wall_seconds"] == 1.5


def test_select_metric_chooses_the_round_by_another_validation_metric():
    """Issue 43: a table of MSE is chosen by MSE (lower is better), not by the task's primary IC."""
    history = [_round(1, 0.1), _round(2, 0.4), _round(3, 0.2)]
    for r, mse in zip(history, (3.0, 2.0, 1.0), strict=True):
        r.summary["personal/val/mse/macro"] = mse
    result = SimulationResult(Record(), {}, history)
    by_ic = build_summary(small_config(), result, 1.0, "runs/x", "ic", True, {})
    by_mse = build_summary(small_config(**{"federation.select_metric": "mse"}), result, 1.0, "runs/x", "ic", True, {})
    assert by_ic["selection"] == {"metric": "personal/val/ic/macro", "best_round": 2, "rounds_to_95": 2.0}
    assert by_mse["selection"] == {"metric": "personal/val/mse/macro", "best_round": 3, "rounds_to_95": 3.0}
    assert by_mse["primary_metric"] == "ic"  # the table's first column stays the task's
    with pytest.raises(ConfigError, match=r"'msee'.*ic, mse"):
        build_summary(small_config(**{"federation.select_metric": "msee"}), result, 1.0, "runs/x", "ic", True, {})


@pytest.mark.parametrize(
    ("metric", "values", "expected"),
    [
        ("ic", (0.01, 0.096, 0.1, 0.05), 2.0),  # 0.096 >= 0.95 * 0.1
        ("ic", (0.01, 0.094, 0.1), 3.0),
        ("ic", (-0.2, -0.1, math.nan), math.nan),  # a best below zero has no 95 %
        ("mse", (2.0, 1.05, 1.0), 2.0),  # lower is better: 1.05 <= 1.0 / 0.95
        ("mse", (2.0, 1.06, 1.0), 3.0),
    ],
)
def test_rounds_to_95_percent_of_the_best_validation_score(metric, values, expected):
    history = [_round(r, 0.0) for r in range(1, len(values) + 1)]
    for r, v in zip(history, values, strict=True):
        r.summary[f"personal/val/{metric}/macro"] = v
    got = rounds_to_share([_round(0, None), *history], metric)
    assert got == expected or (math.isnan(expected) and math.isnan(got))


def test_recent_diagnostics_average_the_last_rounds_numbers_only():
    history = [_round(r, 0.1) for r in range(1, 26)]
    for r in history:
        r.diagnostics = {"route_entropy": float(r.round), "routes": {"a": [1.0]}, "flag": True}
    recent = recent_diagnostics(history)
    assert recent == {"route_entropy": pytest.approx(np.mean(range(6, 26)))}  # rounds 6..25, nothing else
    assert recent_diagnostics(history[:3], window=20) == {"route_entropy": 2.0}
    assert recent_diagnostics([_round(1, 0.1)]) == {}


def _summary(method: str, gains: dict[str, float], run_dir: str = "") -> dict:
    per = {c: {"test/ic": g, "heterogeneity": h} for (c, g), h in zip(gains.items(), (0.1, 0.5, 0.9), strict=True)}
    return {"method": method, "dataset": "synthetic", "synthetic": True, "backbone": "tiny", "rounds": 2, "seed": 0,
            "primary_metric": "ic", "selection": {"metric": "personal/val/ic/macro", "best_round": 2},
            "metrics": {"personal/test/ic/macro": float(np.mean(list(gains.values())))}, "per_client": per,
            "communication": {"download_bytes": 2_000_000, "upload_bytes": 1_000_000}, "wall_seconds": 3.0,
            "run_dir": run_dir}  # fmt: skip


def test_comparison_report_gives_each_clients_gain_over_fedavg_and_its_spearman_rho():
    base = _summary("fedavg", {"a": 0.0, "b": 0.1, "c": 0.2})
    other = _summary("rpa", {"a": 0.3, "b": 0.1, "c": 0.0})  # gains 0.3, 0.0, -0.2 against heterogeneity 0.1..0.9
    text = comparison_report(
        [RunResult(Path(s["run_dir"]), s["method"], 0, "synthetic", s, None) for s in (base, other)]
    )
    assert "SYNTHETIC" in text and "| rpa | 2 |" in text
    assert "| a | 0.1000 | 0.3000 |" in text and "| c | 0.9000 | -0.2000 |" in text
    rho = spearmanr([0.1, 0.5, 0.9], [0.3, 0.0, -0.2]).statistic
    assert f"Spearman ρ(heterogeneity, gain) = {rho:.4f} over 3 clients" in text
    # the report of one run names the round and its selection metric
    assert "at round 2, chosen by `personal/val/ic/macro`" in single_report(base)


def test_a_methods_declared_report_is_written_as_json_and_png(tmp_path):
    heatmap = Heatmap([[0.9, 0.1], [0.2, 0.8]], ["c1 (tech)", "c2"], "P", "prototype", "weight", "routes")
    report = RunReport(files={"routes": {"routes": {"c1": [0.9, 0.1]}}}, heatmaps={"routes": heatmap})
    write_run_report(RunDirectory(tmp_path), report, "rpa on synthetic")
    assert json.loads((tmp_path / "routes.json").read_text()) == {"routes": {"c1": [0.9, 0.1]}}
    png = (tmp_path / "routes.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000


def test_evaluation_settings_are_what_the_method_declares():
    assert evaluation_settings(small_config(method="rpa")) == ("methods.rpa.eval_residual", "data.data_dir")
    assert evaluation_settings(small_config(method="fedweave")) == ("methods.fedweave.inference", "data.data_dir")
    assert evaluation_settings(small_config(method="fedavg")) == ("data.data_dir",)


def test_evaluate_refuses_a_training_setting_before_loading_anything(tmp_path):
    from fedloom.runs.config import dump_config

    (tmp_path / "config.yaml").write_text(dump_config(small_config(method="rpa")))
    with pytest.raises(ConfigError, match=r"train\.lr: only evaluation-time settings can change"):
        evaluate_run(tmp_path, ["train.lr=0.5"])
    with pytest.raises(ConfigError, match="has no checkpoint"):  # an allowed change gets as far as the checkpoint
        evaluate_run(tmp_path, ["methods.rpa.eval_residual=keep"])


def test_defences_outside_the_fedavg_family_are_refused_by_the_schema():
    with pytest.raises(ConfigError, match="apply to the FedAvg family"):
        small_config(method="rpa", **{"privacy.clip": 1.0})
    assert small_config(method="fedprox", **{"robust.rule": "trimmed_mean"}).robust.rule == "trimmed_mean"


def test_workspace_labels_each_client_by_its_most_common_group():
    from fedloom.runs.workspace import client_groups, prepare_workspace

    ws = prepare_workspace(small_config())
    groups = client_groups(ws)
    assert groups == {c: c for c in ws.learners}  # sector partition: a client is its sector
    audit = ws.audit()
    assert audit.tasks is None and audit.client_groups == groups and audit.learners is ws.learners


def test_a_run_can_start_from_a_peft_adapter(tmp_path):
    """`adapter.init_from` (`fedloom run --init-adapter`) replaces the seeded init with the adapter's tensors."""
    import torch

    from fedloom.backbone.peft_io import export_peft
    from fedloom.runs.workspace import load_adapted, shared_init

    cfg = small_config()
    lm = load_adapted(cfg)
    trained = {k: torch.randn_like(v) for k, v in shared_init(cfg, lm).items()}
    export_peft(trained, lm.layout, tmp_path / "adapter", base_model=cfg.backbone)
    loaded = shared_init(small_config(**{"adapter.init_from": str(tmp_path / "adapter")}), lm)
    assert loaded.keys() == trained.keys()
    assert all(torch.equal(loaded[k], trained[k]) for k in trained)


def test_a_run_without_test_rows_finishes_and_skips_the_test_outputs(tmp_path):
    """A split whose test period is empty (issue 21) writes the run but no daily.csv."""
    import dataclasses

    import numpy as np

    from fedloom.runs.llm import run_method
    from fedloom.runs.workspace import prepare_workspace

    cfg = small_config(rounds=1)
    ws = prepare_workspace(cfg)
    for learner in ws.learners.values():
        learner.data = dataclasses.replace(learner.data, test=np.array([], dtype=np.int64))
    summary = run_method(cfg, ws, tmp_path)
    assert summary["selection"]["best_round"] == 1 and (tmp_path / "summary.json").is_file()
    assert not (tmp_path / "daily.csv").exists()


def test_rpa_reports_how_its_routes_match_the_planted_rule_groups(tmp_path):
    """The synthetic market's planted groups reach RPA's report as audit labels, never as inputs."""
    from fedloom.runs.llm import run_method
    from fedloom.runs.workspace import prepare_workspace

    cfg = small_config(method="rpa", rounds=1, **{"data.synthetic.rule_groups": 3})
    ws = prepare_workspace(cfg)
    assert "rule_group" not in ws.table.covariates
    summary = run_method(cfg, ws, tmp_path)
    routes = json.loads((tmp_path / "routes.json").read_text())
    assert routes["labels"]["rule_group"] == {"energy": "2", "financials": "1", "technology": "0"}
    from fedloom.metrics.clustering import purity_score

    clients = list(routes["routes"])
    dominant = np.array([int(np.argmax(routes["routes"][c])) for c in clients])
    labels = np.array([routes["labels"]["rule_group"][c] for c in clients])
    assert summary["route_purity"] == routes["purity"] == {"rule_group": purity_score(dominant, labels)}
