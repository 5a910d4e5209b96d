"""Routed prototype adapters (seed 000): projection, routing, decomposition and the algorithm."""

from fedloom.algorithms.rpa.algorithm import RPA, RPAConfig

__all__ = ["RPA", "RPAConfig"]
