"""The fedloom ServerApp that ``flwr run`` loads from the fedloom Flower app (``deploy/flower/pyproject.toml``).

Run config keys (``flwr run deploy/flower <connection> -c "config='/abs/x.yaml' out='/abs/run'"``):
``config`` (fedloom YAML, read by the ServerApp only), ``out`` (run directory on the server),
``num-nodes`` (SuperNodes to wait for), ``overrides`` (``key=value`` pairs separated by ``;``) and
``resume`` (continue ``out`` from its newest checkpoint).
"""

from __future__ import annotations

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedloom.experiments.config import load_config
from fedloom.runtime.flower.apps import serve

server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    overrides = [o.strip() for o in str(rc.get("overrides", "")).split(";") if o.strip()]
    cfg = load_config(str(rc["config"]), None, overrides)
    serve(grid, cfg, Path(str(rc["out"])), int(rc["num-nodes"]), bool(rc.get("resume", False)))
