"""fedloom: federated adaptation of frozen LLMs across data owners who cannot pool their data."""

__version__ = "0.1.0"
