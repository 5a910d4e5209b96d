"""A run directory is never mixed with another run, a refused resume writes nothing, and a crash
prints no local variables."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from fedloom.algorithms.base import Record
from fedloom.cli import main
from fedloom.runs.config import config_digest, dump_config
from fedloom.runs.rundir import MARKER, RunDirectory, claim_run_dir
from fedloom.runtime.checkpoint import Checkpoint, CheckpointStore
from tests.conftest import small_config
from tests.integration.cli_check import TINY, fails

pytestmark = pytest.mark.integration


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    """A run directory as an RPA run leaves it (no training needed to test refusals)."""
    out = tmp_path / "old"
    with claim_run_dir(out):
        rundir = RunDirectory(out)
        rundir.write_config(small_config())
        rundir.write_json("routes.json", {})
    return out


def test_run_into_a_run_directory_is_refused(old_run, monkeypatch, capsys):
    err = fails(["run", "--out", str(old_run), *TINY], monkeypatch, capsys)
    assert f"run directory {old_run} already holds files" in err and "--overwrite" in err
    assert (old_run / "routes.json").is_file()


def test_overwrite_starts_from_an_empty_directory(old_run, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["fedloom", "run", "--out", str(old_run), "--overwrite", *TINY])
    main()
    assert not (old_run / "routes.json").exists()
    assert (old_run / "summary.json").is_file()


@pytest.mark.parametrize(("override", "key"), [("method=rpa", "method"), ("train.lr=0.01", "train.lr")])
def test_a_refused_resume_leaves_the_config_untouched(old_run, monkeypatch, capsys, override, key):
    before = (old_run / "config.yaml").read_bytes()
    err = fails(["run", "--resume", str(old_run), "--set", override], monkeypatch, capsys)
    assert f"cannot change {key} " in err
    assert (old_run / "config.yaml").read_bytes() == before
    assert sorted(p.name for p in old_run.iterdir()) == [MARKER, "config.yaml", "routes.json"]


def test_resume_cannot_end_before_its_checkpoint(old_run, monkeypatch, capsys):
    cfg = small_config()
    CheckpointStore(old_run / "checkpoints").save(
        Checkpoint(2, Record({"w": torch.zeros(1)}), {}, [], config_digest(cfg))
    )
    err = fails(["run", "--resume", str(old_run), "--set", "rounds=1"], monkeypatch, capsys)
    assert "rounds=1" in err and "already checkpointed at round 2" in err


def test_overwrite_refuses_a_project_folder_with_a_stray_config(tmp_path, monkeypatch, capsys):
    (tmp_path / "config.yaml").write_text(dump_config(small_config()))
    (tmp_path / "thesis.tex").write_text("years of work")
    (tmp_path / "src").mkdir()
    (tmp_path / ".git").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    monkeypatch.chdir(tmp_path)
    err = fails(["run", "--out", ".", "--overwrite", *TINY], monkeypatch, capsys)
    assert "is not a fedloom run directory" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_second_run_into_a_running_runs_folder_is_refused_with_its_pid(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "fedloom.cli", "run", "--out", str(out), *TINY, "--rounds", "400"]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300  # generous: a cold start imports torch and builds the tiny model
        while not (out / "metrics.jsonl").is_file() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert first.poll() is None, first.stderr.read() if first.stderr else ""
        err = fails(["run", "--out", str(out), *TINY], monkeypatch, capsys)
        assert f"run directory {out} is in use by fedloom process {first.pid};" in err
        err = fails(["run", "--resume", str(out)], monkeypatch, capsys)
        assert f"in use by fedloom process {first.pid}" in err
    finally:
        first.send_signal(signal.SIGINT)  # stops as Ctrl-C does
        first.wait(timeout=300)
    rounds = [json.loads(line)["round"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rounds == list(range(1, len(rounds) + 1))  # one run's rounds, none interleaved


def test_a_run_without_checkpoints_finishes(tmp_path, monkeypatch):
    """federation.checkpoint_every: 0, as a benchmark sets it: the chosen round is kept by nobody."""
    out = tmp_path / "run"
    argv = ["run", "--out", str(out), *TINY, "--rounds", "2", "--set", "federation.checkpoint_every=0"]
    monkeypatch.setattr(sys, "argv", ["fedloom", *argv])
    main()
    assert (out / "summary.json").is_file() and not (out / "checkpoints").exists()


def test_unwritable_out_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("")
    err = fails(["run", "--out", str(tmp_path / "file" / "run"), *TINY], monkeypatch, capsys)
    assert "cannot write to the run directory" in err


def test_a_crash_prints_no_local_variables(tmp_path):
    script = textwrap.dedent("""
        import sys
        import fedloom.runs.config as config
        from fedloom.cli import main

        def broken(cfg):
            secret_row = "PRIVATE-ROW-0042"
            raise RuntimeError("boom")

        config.dump_config = broken
        sys.argv = ["fedloom", "config"]
        main()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "RuntimeError" in proc.stderr and "boom" in proc.stderr
    assert "PRIVATE-ROW-0042" not in proc.stderr
