"""`fedloom` as a user runs it: a full run directory from the command line, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fedloom.cli import main

pytestmark = pytest.mark.integration

SMALL = [
    "--set", "train.steps=2", "--set", "train.batch_size=4", "--set", "data.synthetic.sectors=3",
    "--set", "data.synthetic.stocks_per_sector=3", "--set", "data.synthetic.days=15",
    "--set", "data.feature_cache=false", "--set", "adapter.rank=4",
]  # fmt: skip


def test_run_writes_a_complete_run_directory(tmp_path: Path):
    out = tmp_path / "demo"
    cmd = [sys.executable, "-m", "fedloom.cli", "run", "--method", "fedavg", "--dataset", "synthetic",
           "--backbone", "tiny-random-llama", "--rounds", "2", "--seed", "0", "--out", str(out), *SMALL]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert {p.name for p in out.iterdir()} >= {
        "config.yaml",
        "env.json",
        "metrics.jsonl",
        "summary.json",
        "report.md",
    }

    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["method"] == "fedavg" and config["rounds"] == 2 and config["train"]["steps"] == 2

    env = json.loads((out / "env.json").read_text())
    assert {"python", "cpu", "torch_threads", "packages", "dtype"} <= set(env)
    assert env["packages"]["torch"].startswith("2.13")

    rounds = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1, 2]
    assert all(sum(r["download_bytes"].values()) > 0 and sum(r["upload_bytes"].values()) > 0 for r in rounds)
    assert all(r["train"] and all("train_loss" in m for m in r["train"].values()) for r in rounds)
    assert rounds[-1]["evaluation"]["personal"]["test"].keys() == {"energy", "financials", "technology"}

    summary = json.loads((out / "summary.json").read_text())
    assert {"method", "dataset", "rounds", "metrics", "per_client", "communication", "wall_seconds"} <= set(summary)
    assert summary["communication"]["upload_bytes"] == sum(sum(r["upload_bytes"].values()) for r in rounds)
    assert set(summary["per_client"]) == {"energy", "financials", "technology"}
    assert "personal/test/ic/macro" in summary["metrics"]
    assert summary["selection"]["metric"] == "personal/val/ic/macro" and summary["selection"]["best_round"] in (1, 2)
    assert summary["communication"]["by_group"]["upload"].keys() == {"A", "B", "scalars"}
    assert (out / "checkpoints" / "LATEST").read_text().split()[0] == "round-00002"

    report = (out / "report.md").read_text()
    assert "SYNTHETIC" in report and "| technology |" in report
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
    assert "technology" in proc.stdout  # the table printed at the end


def test_rpa_improved_routing_from_the_command_line(tmp_path: Path):
    """`--set methods.rpa.routing=improved` on a planted-group market: routes held (uniform) through the
    2-round warm-up, the warm start's clusters logged when it ends, routes moving after it, and the
    routes' purity against the planted groups in summary.json and routes.json. (Mechanics: the tiny random
    model does not learn the groups' rules, so no quality is asserted here; see benchmarks/RESULTS.md.)"""
    out = tmp_path / "rpa"
    cmd = [sys.executable, "-m", "fedloom.cli", "run", "--method", "rpa", "--backbone", "tiny-random-llama",
           "--rounds", "4", "--seed", "0", "--out", str(out), *SMALL, "--set", "data.synthetic.sectors=4",
           "--set", "data.synthetic.rule_groups=2", "--set", "methods.rpa.routing=improved",
           "--set", "methods.rpa.warm_start_rounds=2", "--set", "methods.rpa.prototypes=2"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rounds = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    for r in rounds[:2]:
        assert all(m["route_change"] == 0 and m["route_entropy"] == 1.0 for m in r["train"].values())
    assert "warm_start_clusters" not in rounds[0]["diagnostics"]
    assert set(rounds[1]["diagnostics"]["warm_start_clusters"]) == set(rounds[1]["train"])
    assert any(m["route_change"] > 0 for r in rounds[2:] for m in r["train"].values())
    config = yaml.safe_load((out / "config.yaml").read_text())["methods"]["rpa"]
    assert (config["score"], config["warm_start"], config["prototype_momentum"]) == ("prototype", "residuals", 0.9)
    summary = json.loads((out / "summary.json").read_text())
    routes = json.loads((out / "routes.json").read_text())
    assert summary["route_purity"] == routes["purity"] and 0.5 <= routes["purity"]["rule_group"] <= 1.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--method", "fedsgd"], "unknown method 'fedsgd'"),
        (["run", "--backbone", "gpt-5"], "unknown backbone 'gpt-5'"),
        (["run", "--dataset", "mnist"], "unknown dataset 'mnist'"),
        (["run", "--set", "roundz=3"], "config key 'roundz' does not exist"),
        (["compare", "--methods", "local,nope"], "unknown method 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["fedloom", *argv])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_malformed_yaml_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rounds: [1,\n")
    monkeypatch.setattr(sys, "argv", ["fedloom", "run", "--config", str(bad)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "malformed YAML" in err and len(err.splitlines()) == 1


def test_compare_shares_one_workspace(tmp_path, monkeypatch, capsys):
    out = tmp_path / "cmp"
    argv = ["fedloom", "compare", "--methods", "local,fedavg,rpa", "--backbone", "tiny-random-llama",
            "--rounds", "1", "--out", str(out), *SMALL, "--set", "data.synthetic.days=45"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)  # 45 days: 9 test days, two trading weeks for the bootstrap
    main()
    report = (out / "report.md").read_text()
    assert "| local |" in report and "| fedavg |" in report and "| rpa |" in report
    assert "Per-client gain in `test/ic` over fedavg" in report and "Spearman" in report
    assert "Paired block bootstrap vs fedavg (daily `ic`" in report and "| rpa |" in report.split("bootstrap")[1]
    assert (out / "fedavg" / "daily.csv").read_text().startswith("date,ic,rank_ic")
    assert (out / "fedavg" / "clients.csv").read_text().startswith("date,client,rows,ic,rank_ic,mse,mae")
    assert "| clients × weeks |" in report.split("bootstrap")[1]  # each client's series: clients resampled too
    routes = json.loads((out / "rpa" / "routes.json").read_text())
    assert set(routes["routes"]) == set(routes["group"]) == {"energy", "financials", "technology"}
    assert all(abs(sum(r) - 1) < 1e-4 and len(r) == 4 for r in routes["routes"].values())
    assert (out / "rpa" / "routes.png").stat().st_size > 1000
    rounds = [json.loads(line) for line in (out / "rpa" / "metrics.jsonl").read_text().splitlines()]
    assert {"route_entropy", "collapse_rate", "prototype_load", "load_imbalance", "prototype_update_norm"} <= set(
        rounds[-1]["diagnostics"]
    )
    expected = {"route_entropy", "route_change", "residual_strength", "routing_seconds", "calibration_seconds"}
    assert all(expected <= set(m)
               for m in rounds[-1]["train"].values())  # fmt: skip
    local = json.loads((out / "local" / "summary.json").read_text())
    assert local["communication"] == {"download_bytes": 0, "upload_bytes": 0, "by_group": {}}


def test_evaluate_reproduces_the_final_round_and_switches_evaluation_settings(tmp_path, monkeypatch, capsys):
    out = tmp_path / "rpa"
    run = ["fedloom", "run", "--method", "rpa", "--backbone", "tiny-random-llama", "--rounds", "2", "--out", str(out),
           *SMALL]  # fmt: skip
    monkeypatch.setattr(sys, "argv", run)
    main()
    final = json.loads((out / "summary.json").read_text())["final_metrics"]
    results = {}
    for name, sets in (("as-trained", []), ("keep", ["--set", "methods.rpa.eval_residual=keep"])):
        monkeypatch.setattr(sys, "argv", ["fedloom", "evaluate", str(out), *sets])
        main()
        results[name] = json.loads(next((out / "evaluations").glob(f"*{name}*.json")).read_text())
    again = results["as-trained"]["metrics"]
    assert again.keys() == final.keys()
    for key, value in final.items():  # the same models (float round-off); the adapter's contribution is a
        # std of the difference of two nearly equal predictions, so its round-off is amplified
        assert again[key] == pytest.approx(value, rel=1e-4 if key.startswith("adapter/") else 1e-6), key
    assert results["keep"]["overrides"] == ["methods.rpa.eval_residual=keep"] and results["keep"]["round"] == 2
    assert results["keep"]["metrics"]["personal/test/mse/macro"] != final["personal/test/mse/macro"]
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["fedloom", "evaluate", str(out), "--set", "train.lr=0.1"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "train.lr: only evaluation-time settings can change" in err


def test_methods_lists_every_method_and_reference_with_its_own_summary(monkeypatch, capsys):
    from fedloom.algorithms.registry import METHODS
    from fedloom.references.registry import REFERENCES

    monkeypatch.setattr(sys, "argv", ["fedloom", "methods"])
    main()
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == sorted(METHODS) + sorted(REFERENCES)
    summaries = [line.split(maxsplit=1)[1] for line in lines]
    assert len(set(summaries)) == len(lines) and any(s.startswith("FedBiOT: ") for s in summaries)


def test_clipped_runs_do_not_depend_on_the_hash_seed(tmp_path):
    """train.grad_clip sums the gradient norm in a fixed order: two processes with different hash seeds
    (and so different set orders) give the same run."""
    import os

    summaries = []
    for hash_seed in ("1", "2"):
        out = tmp_path / hash_seed
        cmd = [sys.executable, "-m", "fedloom.cli", "run", "--method", "fedavg", "--backbone", "tiny-random-llama",
               "--rounds", "2", "--out", str(out), "--set", "train.grad_clip=0.05", *SMALL]  # fmt: skip
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        summaries.append(json.loads((out / "summary.json").read_text()))
    assert summaries[0]["metrics"] == summaries[1]["metrics"]
    assert summaries[0]["final_metrics"] == summaries[1]["final_metrics"]


def test_params_prints_the_ranks_that_match_a_budget_as_a_suites_per_method_block():
    """`fedloom params` as a user runs it (seed 000 Table 2): counts per rank, the matched rank, and the
    `per_method` lines to paste into a suite; a typo in a method fails before anything loads."""
    base = [sys.executable, "-m", "fedloom.cli", "params", "--match", "fedavg", "--ranks", "2,8",
            "--set", "backbone=tiny-random-llama", "--set", "dataset=synthetic", *SMALL]  # fmt: skip
    proc = subprocess.run([*base, "--methods", "ditto,ffa-lora"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "per_method:" in proc.stdout and "  ditto: [adapter.rank=2]" in proc.stdout
    assert "ffa-lora: [adapter.rank=8]" in proc.stdout and "cannot come within 10%" in proc.stderr
    bad = subprocess.run([*base, "--methods", "fedavgg"], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "fedavgg" in bad.stderr and "Traceback" not in bad.stderr
