"""A fresh run claims its directory: never into another run's files unless asked to overwrite, never a
folder fedloom did not write, never while another run holds it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from fedloom.errors import ConfigError
from fedloom.runs.rundir import MARKER, RunDirectory, claim_run_dir, hold_run_dir


def _names(path):
    return sorted(p.name for p in path.iterdir())


def _a_run(path):
    """A run directory as an RPA run leaves it (written through RunDirectory, as every run writes)."""
    with claim_run_dir(path):
        rundir = RunDirectory(path)
        rundir.write_report("# report\n")
        rundir.write_json("routes.json", {})
        rundir.own("adapter").mkdir()
        (rundir.own("adapter") / "adapter_model.safetensors").write_bytes(b"x")


def test_a_new_or_empty_directory_is_claimed(tmp_path):
    with claim_run_dir(tmp_path / "a" / "b"):
        assert (tmp_path / "a" / "b").is_dir()
    with claim_run_dir(tmp_path / "a" / "b"):  # only the marker there: nothing of a run yet
        assert _names(tmp_path / "a" / "b") == [MARKER]


def test_a_directory_holding_a_run_is_refused_without_overwrite(tmp_path):
    (tmp_path / "config.yaml").write_text("method: rpa\n")
    (tmp_path / "routes.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"already holds files \(config.yaml, routes.json\).*--resume .*--overwrite"):
        claim_run_dir(tmp_path)
    assert (tmp_path / "routes.json").is_file()


def test_the_marker_lists_every_top_level_name_a_run_wrote(tmp_path):
    _a_run(tmp_path)
    marker = json.loads((tmp_path / MARKER).read_text())
    assert marker["files"] == ["adapter", "checkpoints", "report.md", "routes.json"]
    assert marker["pid"] == os.getpid()


def test_overwrite_clears_a_run_directory_first(tmp_path):
    _a_run(tmp_path)
    with claim_run_dir(tmp_path, overwrite=True):
        assert _names(tmp_path) == [MARKER]
    assert json.loads((tmp_path / MARKER).read_text())["files"] == []


def test_overwrite_deletes_only_what_fedloom_wrote(tmp_path):
    _a_run(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    with claim_run_dir(tmp_path, overwrite=True):
        assert _names(tmp_path) == [MARKER, "notes.txt"]


def test_overwrite_never_deletes_a_folder_that_is_not_a_run(tmp_path):
    """The probe: `fedloom run --out . --overwrite` in a project folder with a stray config.yaml."""
    (tmp_path / "config.yaml").write_text("method: rpa\n")
    (tmp_path / "thesis.tex").write_text("years of work")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / ".git").mkdir()
    before = _names(tmp_path)
    with pytest.raises(ConfigError, match="not a fedloom run directory"):
        claim_run_dir(tmp_path, overwrite=True)
    assert _names(tmp_path) == before
    assert (tmp_path / "thesis.tex").read_text() == "years of work"


def test_an_unwritable_directory_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"cannot write to the run directory .*file/run"):
        claim_run_dir(tmp_path / "file" / "run")  # below a regular file: fails even for root


def test_a_suite_label_is_not_run_data_and_survives_an_overwrite(tmp_path):
    (tmp_path / "job.json").write_text('{"row": "local"}')  # `fedloom suite` writes it before the run starts
    _a_run(tmp_path)
    with claim_run_dir(tmp_path, overwrite=True):
        assert _names(tmp_path) == [MARKER, "job.json"]


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from fedloom.runs.rundir import claim_run_dir
    with claim_run_dir(Path(sys.argv[1])):
        print("held", flush=True)
        sys.stdin.readline()  # until the test closes our stdin
""")


def test_a_directory_held_by_another_process_is_refused_with_its_pid(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for claim in (lambda: claim_run_dir(tmp_path), lambda: hold_run_dir(tmp_path)):
            with pytest.raises(ConfigError, match=rf"in use by fedloom process {holder.pid}\b"):
                claim()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=120)
    with claim_run_dir(tmp_path):  # released when its holder ended
        pass


def test_a_claim_is_reentrant_within_a_process_and_released_by_the_outermost(tmp_path):
    with claim_run_dir(tmp_path), claim_run_dir(tmp_path):
        pass
    probe = subprocess.run([sys.executable, "-c", HOLDER, str(tmp_path)], input="\n", capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert probe.returncode == 0 and probe.stdout.strip() == "held", probe.stderr
