"""`fedloom suite` end to end on the tiny random Llama: the smoke suite runs, a rerun skips what is
finished, a failing job is recorded while the others finish, and `fedloom table` reads the suite."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs" / "suites" / "smoke.yaml"


def fedloom(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fedloom.cli", *args], capture_output=True, text=True, cwd=ROOT)


def events(suite_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (suite_dir / "suite.jsonl").read_text().splitlines()]


def test_the_smoke_suite_runs_then_a_rerun_skips_both_jobs(tmp_path: Path):
    out = tmp_path / "smoke"
    first = fedloom("suite", str(SMOKE), "--workers", "2", "--out", str(out))
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stderr.count("prepared") == 1  # both jobs share one workspace: prepared once, on every core
    assert [(e["job"], e["status"]) for e in sorted(events(out), key=lambda e: e["job"])] == [
        ("synthetic/fedavg/default/seed0", "finished"),
        ("synthetic/local/default/seed0", "finished"),
    ]
    assert json.loads((out / "synthetic/local/default/seed0/job.json").read_text())["row"] == "local"

    again = fedloom("suite", str(SMOKE), "--workers", "2", "--out", str(out))
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("skipped") == 2 and "started" not in again.stderr
    assert len(events(out)) == 2  # nothing ran again

    dry = fedloom("suite", str(SMOKE), "--out", str(out), "--dry-run")
    assert dry.returncode == 0 and dry.stdout.count("finished") == 2
    part = fedloom("suite", str(SMOKE), "--out", str(out), "--dry-run", "--only", "*/local/*")
    assert part.returncode == 0 and "local/default/seed0" in part.stdout and "fedavg" not in part.stdout

    table = fedloom("table", str(out), "--reference", "fedavg", "--csv", str(tmp_path / "t.csv"))
    assert table.returncode == 0, table.stderr[-3000:]
    assert "| fedavg | 1 (0) |" in table.stdout and "| local | 1 (0) |" in table.stdout  # one seed: seed 0
    assert (tmp_path / "t.csv").read_text().startswith("dataset,row,seeds,IC,IC std")


def test_a_failing_job_is_recorded_and_the_others_finish(tmp_path: Path):
    suite = tmp_path / "suite.yaml"
    # acl18 with an empty data folder fails when its data is loaded; the synthetic job does not read it
    suite.write_text(
        SMOKE.read_text().replace("methods: [fedavg, local]", "methods: [fedavg]\ndatasets: [synthetic, acl18]")
    )
    out = tmp_path / "out"
    empty = tmp_path / "no-data"
    empty.mkdir()
    proc = fedloom("suite", str(suite), "--workers", "2", "--out", str(out), "--data-dir", str(empty))
    assert proc.returncode == 1
    status = {e["job"]: e for e in events(out)}
    assert status["synthetic/fedavg/default/seed0"]["status"] == "finished"
    failed = status["acl18/fedavg/default/seed0"]
    assert failed["status"] == "failed" and "acl18" in failed["error"]
    assert Path(failed["log"]).is_file() and (out / "synthetic/fedavg/default/seed0/summary.json").is_file()
    assert "1 failed" in proc.stderr
    assert proc.stderr.count("prepared") == 2 and proc.stderr.count("did not finish") == 1  # acl18's prepare


@pytest.mark.slow
def ignore_sigint() -> None:
    """What a shell does to a command started in the background (``fedloom suite … &``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm-in-background"])
def test_ctrl_c_stops_the_jobs_and_the_same_command_resumes_them(tmp_path: Path, how: str):
    """Ctrl-C, or SIGTERM to a suite started in the background (SIGINT ignored, inherited by its jobs):
    the jobs stop at once with exit 130 (not killed after the grace period) and resume on a rerun."""
    out = tmp_path / "smoke"
    args = [sys.executable, "-m", "fedloom.cli", "suite", str(SMOKE), "--out", str(out), "--set", "rounds=8"]
    background = how == "sigterm-in-background"
    proc = subprocess.Popen(args, cwd=ROOT, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ignore_sigint if background else None)  # fmt: skip
    latest = out / "synthetic/fedavg/default/seed0/checkpoints/LATEST"
    while not latest.exists() and proc.poll() is None:  # the first job has finished a round
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM if background else signal.SIGINT)
    assert proc.wait() == 130
    assert [(e["status"], e["returncode"]) for e in events(out)] == [("interrupted", 130)]
    assert not (out / "synthetic/fedavg/default/seed0/summary.json").exists()

    again = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    log = (out / "logs/synthetic__fedavg__default__seed0.log").read_text()
    assert [line.startswith("$ ") and "--resume" in line for line in log.splitlines() if line.startswith("$ ")] == [
        False,
        True,
    ]
    summary = json.loads((out / "synthetic/fedavg/default/seed0/summary.json").read_text())
    assert summary["rounds"] == 8
