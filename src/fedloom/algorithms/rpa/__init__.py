"""Routed prototype adapters (seed 000): projection, routing, decomposition and the algorithm."""

from fedloom.algorithms.config import RPAConfig
from fedloom.algorithms.rpa.algorithm import RPA

__all__ = ["RPA", "RPAConfig"]
