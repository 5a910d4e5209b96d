"""Shared fixtures: a fresh tiny random Llama per test (the adapter bank wraps modules in place),
and a small run config on the synthetic market."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings

from fedloom.backbone.loading import Backbone, load_backbone
from fedloom.backbone.lora import LoraSpec
from fedloom.backbone.model import AdaptedLM
from fedloom.runs.config import RunConfig, load_config
from tests.flower_group import pytest_collection_modifyitems  # noqa: F401  (the Flower tests' xdist group)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# No per-example time limit: property tests assert math, and a loaded 2-core machine (or the other pytest
# worker) can make any example slow.
settings.register_profile("fedloom", deadline=None)
settings.load_profile("fedloom")

if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs two workers on 2 cores: one thread each, since
    torch.set_num_threads(1)  # oversubscribed OpenMP threads spin and make every test several times slower


@pytest.fixture(autouse=True)
def _deterministic_torch():
    torch.manual_seed(0)
    yield


@pytest.fixture
def tiny_backbone() -> Backbone:
    return load_backbone("tiny-random-llama")


@pytest.fixture
def tiny_lm(tiny_backbone: Backbone) -> AdaptedLM:
    """Adapters on the top two of four layers, so the prefix cache has two frozen layers below."""
    return AdaptedLM(tiny_backbone, LoraSpec(rank=4, alpha=8, layers=(2, 3)))


def small_config(**overrides: object) -> RunConfig:
    """A few-second experiment: tiny model, 3 sectors x 3 stocks x 15 days, 2 rounds of 2 steps."""
    sets = [
        "backbone=tiny-random-llama",
        "model.dtype=float32",  # the same numerics on every machine (`auto` would measure this one)
        "rounds=2",
        "train.steps=2",
        "train.batch_size=4",
        "data.synthetic.sectors=3",
        "data.synthetic.stocks_per_sector=3",
        "data.synthetic.days=15",
        "data.feature_cache=false",
        "adapter.layers=2",
        "adapter.rank=4",
        "adapter.alpha=8",
    ]
    sets += [f"{k}={v}" for k, v in overrides.items()]
    return load_config(None, None, sets)


@pytest.fixture
def fedloom_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty $FEDLOOM_CACHE for tests of caching itself (models already converted stay where they are)."""
    path = tmp_path / "cache"
    monkeypatch.setenv("FEDLOOM_CACHE", str(path))
    return path


def pytest_report_header(config: pytest.Config) -> str:
    return f"FEDLOOM_CACHE={os.environ.get('FEDLOOM_CACHE', '~/.cache/fedloom')}; shared data: {SHARED_DATA.is_dir()}"
