"""Method names → algorithm classes. Adding a method: one module, one line here, one contract-test row."""

from __future__ import annotations

from fedloom.algorithms.base import Algorithm, LocalTrainingConfig
from fedloom.algorithms.fedavg import FedAvg
from fedloom.algorithms.local import LocalOnly
from fedloom.errors import ConfigError

METHODS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (LocalOnly, FedAvg)}


def build_algorithm(name: str, local: LocalTrainingConfig) -> Algorithm:
    if name not in METHODS:
        raise ConfigError(f"unknown method {name!r}; available: {', '.join(sorted(METHODS))}")
    return METHODS[name](local)
