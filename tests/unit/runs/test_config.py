"""Typed config: defaults, overrides by path or unique leaf, and one-line errors naming the problem."""

from __future__ import annotations

import pytest

from fedloom.errors import ConfigError
from fedloom.runs.config import RunConfig, dump_config, load_config


def test_defaults_validate_and_round_trip(tmp_path):
    cfg = load_config()
    assert cfg == RunConfig()
    path = tmp_path / "c.yaml"
    path.write_text(dump_config(cfg))
    assert load_config(path) == cfg


def test_file_then_flags_then_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("method: local\nrounds: 4\ntrain:\n  steps: 3\n")
    cfg = load_config(path, {"rounds": 6, "seed": None}, ["fraction=0.5", "train.lr=1e-3", "adapter.layers=all"])
    assert (cfg.method, cfg.rounds, cfg.seed, cfg.train.steps) == ("local", 6, 0, 3)
    assert cfg.federation.fraction == 0.5 and cfg.train.lr == 1e-3 and cfg.adapter.layers == "all"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["method=fedsgd"], "method: unknown method 'fedsgd'; available: ditto, fdlora, fedavg"),
        (["dataset=mnist"], "dataset: unknown dataset 'mnist'; available: acl18, arc_challenge"),
        (["backbone=gpt-5"], "backbone: unknown backbone 'gpt-5'"),
        (["roundz=3"], "config key 'roundz' does not exist"),
        (["rounds=0"], "rounds: Input should be greater than or equal to 1"),
        (["rounds"], "override 'rounds' is not of the form key=value"),
        (["train.step_alpha=100"], "step_alpha is the penalty of the refitted head the adapter steps train"),
        (["train.alpha_choice=every_fit"], "alpha_choice: every_fit chooses the penalty of the refitted head"),
    ],
)
def test_errors_name_the_problem(overrides, message):
    with pytest.raises(ConfigError, match=None) as err:
        load_config(None, None, overrides)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_leaf_names_resolve_when_unique_and_ambiguity_is_reported(monkeypatch):
    assert load_config(None, None, ["lr=0.1"]).train.lr == 0.1
    from fedloom.runs import config as config_module

    paths = [("train", "lr"), ("rpa", "lr")]
    monkeypatch.setattr(config_module, "_leaf_paths", lambda model: paths)
    with pytest.raises(ConfigError, match=r"config key 'lr' is ambiguous; use one of: train\.lr, rpa\.lr"):
        config_module._resolve_key("lr")


def test_unknown_key_in_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  stepz: 3\n")
    with pytest.raises(ConfigError, match=r"c.yaml: invalid config: train.stepz: no such config key"):
        load_config(path)


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("rounds: 3\ntrain: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: malformed YAML at line \d+"):
        load_config(path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(tmp_path / "list.yaml")


def test_adapter_layers_spec():
    cfg = load_config(None, None, ["adapter.layers=2"])
    assert cfg.adapter.spec(30).layers == (28, 29)
    assert load_config(None, None, ["adapter.layers=[0, 5]"]).adapter.spec(30).layers == (0, 5)
    assert load_config(None, None, ["adapter.layers=all"]).adapter.spec(30).layers is None
    with pytest.raises(ConfigError, match=r"adapter\.layers=40: the backbone has 30 layers"):
        load_config(None, None, ["adapter.layers=40"]).adapter.spec(30)


@pytest.mark.parametrize(
    "overrides",
    [["train.lr=.inf"], ["privacy.clip=.inf"], ["privacy.clip=1", "noise_multiplier=.inf"], ["train.lr=inf"]],
)
def test_non_finite_numbers_are_refused_by_key(overrides):
    key = overrides[-1].split("=")[0].replace("noise_multiplier", "privacy.noise_multiplier")
    with pytest.raises(ConfigError, match=rf"{key}: must be a finite number"):
        load_config(None, None, overrides)
