"""A fresh run claims its directory: never into another run's files unless asked to overwrite."""

from __future__ import annotations

import pytest

from fedloom.errors import ConfigError
from fedloom.experiments.rundir import claim_run_dir


def test_a_new_or_empty_directory_is_claimed(tmp_path):
    claim_run_dir(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir()
    claim_run_dir(tmp_path / "a" / "b")  # still empty: no files written by the claim


def test_a_directory_holding_a_run_is_refused_without_overwrite(tmp_path):
    (tmp_path / "config.yaml").write_text("method: rpa\n")
    (tmp_path / "routes.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"already holds files \(config.yaml, routes.json\).*--resume .*--overwrite"):
        claim_run_dir(tmp_path)
    assert (tmp_path / "routes.json").is_file()


def test_overwrite_clears_a_run_directory_first(tmp_path):
    (tmp_path / "config.yaml").write_text("method: rpa\n")
    (tmp_path / "routes.json").write_text("{}")
    claim_run_dir(tmp_path, overwrite=True)
    assert tmp_path.is_dir() and not any(tmp_path.iterdir())


def test_overwrite_never_deletes_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "thesis.tex").write_text("years of work")
    with pytest.raises(ConfigError, match="not a fedloom run directory"):
        claim_run_dir(tmp_path, overwrite=True)
    assert (tmp_path / "thesis.tex").is_file()


def test_an_unwritable_directory_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"cannot write to the run directory .*file/run"):
        claim_run_dir(tmp_path / "file" / "run")  # below a regular file: fails even for root


def test_a_suite_label_is_not_run_data_and_survives_an_overwrite(tmp_path):
    (tmp_path / "job.json").write_text('{"row": "local"}')  # `fedloom suite` writes it before the run starts
    claim_run_dir(tmp_path)
    (tmp_path / "config.yaml").write_text("method: rpa\n")
    claim_run_dir(tmp_path, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.json"]
