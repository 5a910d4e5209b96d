"""Dataset names → loaders. Each loader turns a `DataConfig` into a validated `SampleTable`."""

from __future__ import annotations

from collections.abc import Callable

from fedloom.data.config import DataConfig
from fedloom.data.schema import SampleTable
from fedloom.data.synthetic import make_synthetic_market
from fedloom.errors import ConfigError

DATASETS: dict[str, Callable[[DataConfig], SampleTable]] = {
    "synthetic": lambda cfg: make_synthetic_market(cfg.synthetic),
}


def load_dataset(name: str, cfg: DataConfig) -> SampleTable:
    if name not in DATASETS:
        raise ConfigError(f"unknown dataset {name!r}; available: {', '.join(sorted(DATASETS))}")
    return DATASETS[name](cfg)
