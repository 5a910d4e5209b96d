"""Federated methods: one module per method family over one protocol (`base.Algorithm`)."""

from fedloom.algorithms.base import Algorithm, ClientUpdate, LocalContext, LocalTrainingConfig, Record
from fedloom.algorithms.registry import METHODS, build_algorithm

__all__ = [
    "METHODS",
    "Algorithm",
    "ClientUpdate",
    "LocalContext",
    "LocalTrainingConfig",
    "Record",
    "build_algorithm",
]
