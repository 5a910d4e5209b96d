"""A run directory is never mixed with another run, a refused resume writes nothing, and a crash
prints no local variables."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from fedloom.algorithms.base import Record
from fedloom.cli import main
from fedloom.experiments.config import config_digest, dump_config
from fedloom.runtime.checkpoint import Checkpoint, CheckpointStore
from tests.conftest import small_config

pytestmark = pytest.mark.integration

TINY = ["--backbone", "tiny-random-llama", "--rounds", "1", "--set", "train.steps=1", "--set", "train.batch_size=4",
        "--set", "data.synthetic.sectors=2", "--set", "data.synthetic.stocks_per_sector=2",
        "--set", "data.synthetic.days=12", "--set", "data.feature_cache=false", "--set", "adapter.rank=2"]  # fmt: skip


def _fails(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setattr(sys, "argv", ["fedloom", *argv])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    """A run directory as an RPA run leaves it (no training needed to test refusals)."""
    out = tmp_path / "old"
    out.mkdir()
    (out / "config.yaml").write_text(dump_config(small_config()))
    (out / "routes.json").write_text("{}")
    return out


def test_run_into_a_run_directory_is_refused(old_run, monkeypatch, capsys):
    err = _fails(["run", "--out", str(old_run), *TINY], monkeypatch, capsys)
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
    err = _fails(["run", "--resume", str(old_run), "--set", override], monkeypatch, capsys)
    assert f"cannot change {key} " in err
    assert (old_run / "config.yaml").read_bytes() == before
    assert sorted(p.name for p in old_run.iterdir()) == ["config.yaml", "routes.json"]


def test_resume_cannot_end_before_its_checkpoint(old_run, monkeypatch, capsys):
    cfg = small_config()
    CheckpointStore(old_run / "checkpoints").save(
        Checkpoint(2, Record({"w": torch.zeros(1)}), {}, [], config_digest(cfg))
    )
    err = _fails(["run", "--resume", str(old_run), "--set", "rounds=1"], monkeypatch, capsys)
    assert "rounds=1" in err and "already checkpointed at round 2" in err


def test_unwritable_out_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("")
    err = _fails(["run", "--out", str(tmp_path / "file" / "run"), *TINY], monkeypatch, capsys)
    assert "cannot write to the run directory" in err


def test_a_crash_prints_no_local_variables(tmp_path):
    script = textwrap.dedent("""
        import sys
        import fedloom.experiments.config as config
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
