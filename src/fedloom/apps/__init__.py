"""Flower apps: the ServerApp and ClientApp that ``flwr run`` loads (``deploy/flower/pyproject.toml``),
binding the Flower runtime to fedloom's workspaces and run directories."""
