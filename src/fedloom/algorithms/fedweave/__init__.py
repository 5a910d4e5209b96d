"""FedWeave (seed 002): prototype discovery, signature alignment, asymmetric aggregation."""

from fedloom.algorithms.config import FedWeaveConfig
from fedloom.algorithms.fedweave.algorithm import FedWeave

__all__ = ["FedWeave", "FedWeaveConfig"]
