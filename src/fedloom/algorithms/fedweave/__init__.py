"""FedWeave (seed 002): prototype discovery, signature alignment, asymmetric aggregation."""

from fedloom.algorithms.fedweave.algorithm import FedWeave, FedWeaveConfig

__all__ = ["FedWeave", "FedWeaveConfig"]
