"""What the CLI tests share: a tiny run's flags, and the check that a command fails with one error line."""

from __future__ import annotations

import sys

import pytest

from fedloom.cli import main

TINY = ["--backbone", "tiny-random-llama", "--rounds", "1", "--set", "train.steps=1", "--set", "train.batch_size=4",
        "--set", "data.synthetic.sectors=2", "--set", "data.synthetic.stocks_per_sector=2",
        "--set", "data.synthetic.days=12", "--set", "data.feature_cache=false", "--set", "adapter.rank=2"]  # fmt: skip


def fails(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """The error line of ``fedloom ARGV`` — its last line of output, after any progress lines, and its only
    line that says error — which must exit with status 2 and print no traceback."""
    monkeypatch.setattr(sys, "argv", ["fedloom", *argv])
    with pytest.raises(SystemExit) as exit_info:
        main()
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2, err
    lines = err.splitlines()
    assert "Traceback" not in err and [line for line in lines if "error" in line.lower()] == lines[-1:], err
    return lines[-1]
