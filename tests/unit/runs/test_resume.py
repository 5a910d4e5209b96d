"""`--resume` may change only the keys that leave the rounds already done valid."""

from __future__ import annotations

import pytest

from fedloom.errors import ConfigError
from fedloom.runs.config import config_digest, dump_config, load_config
from fedloom.runs.resume import resume_changes
from tests.conftest import small_config


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / "config.yaml").write_text(dump_config(small_config()))
    return tmp_path


@pytest.mark.parametrize(
    ("override", "key"),
    [("method=rpa", "method"), ("train.lr=0.01", "train.lr"), ("seed=5", "seed"), ("adapter.rank=2", "adapter.rank")],
)
def test_changes_to_what_the_run_means_are_refused_by_name(run_dir, override, key):
    cfg = load_config(run_dir / "config.yaml", None, [override])
    with pytest.raises(ConfigError, match=rf"cannot change {key} .*a resume may change only rounds"):
        resume_changes(run_dir, cfg)


def test_more_rounds_and_another_data_folder_are_allowed(run_dir):
    cfg = load_config(run_dir / "config.yaml", None, ["rounds=5", "data.data_dir=/elsewhere"])
    assert resume_changes(run_dir, cfg) == {"rounds": ("2", "5"), "data.data_dir": ("null", '"/elsewhere"')}
    assert config_digest(cfg) == config_digest(small_config())  # the checkpoint still matches


def test_a_folder_without_config_is_not_a_run(tmp_path):
    with pytest.raises(ConfigError, match=r"no config\.yaml there"):
        resume_changes(tmp_path, small_config())
