"""A run on Flower's simulation engine (Ray): the fedloom ServerApp and ClientApp in one process, one
SuperNode per client, writing the same run directory as `fedloom.runs.run` (less the in-process-only
files: README "What travels")."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fedloom.apps.clientapp import make_client_app
from fedloom.apps.serverapp import make_server_app
from fedloom.errors import FedloomError
from fedloom.progress import Progress
from fedloom.runs.config import RunConfig
from fedloom.runs.kinds import require_backbone
from fedloom.runs.rundir import claim_run_dir
from fedloom.runs.workspace import prepare_workspace


def simulate(
    cfg: RunConfig,
    out: Path,
    workers: int = 1,
    progress: Progress | None = None,
    overwrite: bool = False,
    on_start: Any = None,
) -> dict[str, Any]:
    """Run ``cfg`` on Flower's simulation engine with ``workers`` ClientApp processes (Ray actors) at
    once; the summary. ``on_start(clients)`` hears how many SuperNodes start."""
    from flwr.simulation import run_simulation

    require_backbone(cfg, "the Flower simulation")
    with claim_run_dir(out, overwrite):  # the ServerApp runs in this process and holds it again
        clients = len(prepare_workspace(cfg, progress).learners)  # warms the on-disk caches the ClientApps read
        if on_start is not None:
            on_start(clients)
        result: dict[str, Any] = {}
        run_simulation(
            server_app=make_server_app(cfg, clients, out, result=result),
            client_app=make_client_app(),
            num_supernodes=clients,
            backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": workers}},
            verbose_logging=logging.getLogger("fedloom").isEnabledFor(logging.DEBUG),
        )
    if "summary" not in result:
        raise FedloomError(f"the Flower simulation of {cfg.method} ended without a summary (its log says why)")
    return result["summary"]
