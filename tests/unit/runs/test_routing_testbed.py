"""The default experiment is issue 17's powered routing testbed (configs/default.yaml): at least 40 test
dates, sectors alike and no macro news (the planted rule groups are the only client structure), heads
shared and frozen, RPA with the improved routing and seed 000's one switch away; its IID control keeps
every headline and changes the returns (and the return covariates)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedloom.algorithms.config import RPAConfig
from fedloom.data.registry import load_dataset
from fedloom.data.splits import table_splits
from fedloom.runs.config import load_config

TESTBED = Path(__file__).resolve().parents[3] / "configs" / "default.yaml"


def test_the_testbed_has_forty_test_dates_and_only_the_planted_structure():
    cfg = load_config(TESTBED, None, [])
    assert cfg.train.head_init == "shared" and cfg.train.head_lr < 1e-6
    syn = cfg.data.synthetic
    assert not syn.sector_effects and not syn.stock_betas and syn.macro_probability == 0 and syn.rule_groups == 2
    table = load_dataset(cfg.dataset, cfg.data)
    test = table_splits(table, cfg.data.split)["test"]
    assert len(np.unique(table.dates[test])) >= 40


def test_the_default_runs_the_improved_routing_and_the_paper_is_one_switch_away():
    improved = load_config(TESTBED, None, ["method=rpa"]).methods.rpa
    paper = load_config(TESTBED, None, ["methods.rpa.routing=paper"]).methods.rpa
    assert (improved.score, improved.warm_start, improved.prototype_momentum) == ("prototype", "residuals", 0.9)
    assert paper == RPAConfig(prototypes=improved.prototypes)  # seed 000's defaults, every one of them


def test_the_iid_control_keeps_the_news_and_changes_the_returns():
    planted = load_config(TESTBED, None, [])
    iid = load_config(TESTBED, None, ["data.synthetic.rule_strength=0"])
    a, b = load_dataset(planted.dataset, planted.data), load_dataset(iid.dataset, iid.data)
    assert a.frame[["text", "event", "group"]].equals(b.frame[["text", "event", "group"]])
    assert not np.allclose(a.targets, b.targets)
