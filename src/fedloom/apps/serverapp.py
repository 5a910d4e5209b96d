"""The fedloom ServerApp: the shared round loop over Flower nodes, writing a run directory like
`fedloom run`. ``server_app`` is what ``flwr run`` loads from the fedloom Flower app.

Run config keys (``flwr run deploy/flower <connection> -c "config='/abs/x.yaml' out='/abs/run'"``):
``config`` (fedloom YAML, read by the ServerApp only), ``out`` (run directory on the server),
``num-nodes`` (SuperNodes to wait for), ``overrides`` (``key=value`` pairs separated by ``;``),
``resume`` (continue ``out`` from its newest checkpoint) and ``overwrite`` (delete what ``out`` holds first;
without it or ``resume`` a non-empty ``out`` is refused).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedloom.errors import ConfigError
from fedloom.runs.config import RunConfig, dump_config, load_config
from fedloom.runs.kinds import require_backbone
from fedloom.runs.llm import run_rounds
from fedloom.runs.methods import build_method
from fedloom.runs.outputs import finish_run
from fedloom.runs.resume import resume_changes
from fedloom.runs.rundir import RunDirectory, claim_run_dir, hold_run_dir
from fedloom.runs.workspace import load_adapted, shared_init
from fedloom.runtime.flower.pool import FlowerClients
from fedloom.runtime.rounds import Runtime


def serve(grid: Grid, cfg: RunConfig, out: Path, num_nodes: int, resume: bool = False,
          connect_timeout: float = 600.0, overwrite: bool = False) -> dict[str, Any]:  # fmt: skip
    """The ServerApp's work: the shared round loop over Flower nodes, writing ``out`` like `fedloom run`."""
    if cfg.federation.test_rounds != "all":  # the nodes keep the client states a chosen round's test pass needs
        raise ConfigError("federation.test_rounds=chosen runs in process only (`fedloom run`); on Flower the "
                          "test split is evaluated with every evaluation (test_rounds=all)")  # fmt: skip
    if resume:
        resume_changes(out, cfg)  # a refused change leaves ``out`` untouched
    with hold_run_dir(out) if resume else claim_run_dir(out, overwrite):
        return _serve(grid, cfg, out, num_nodes, resume, connect_timeout)


def _serve(grid: Grid, cfg: RunConfig, out: Path, num_nodes: int, resume: bool, connect_timeout: float) -> dict:
    key_file = RunDirectory(out).own("flower.json")
    if resume and key_file.is_file():
        run_key = json.loads(key_file.read_text())["run_key"]
    else:  # a fresh run never sees private state left on the nodes by an earlier one
        run_key = uuid.uuid4().hex
        key_file.write_text(json.dumps({"run_key": run_key}))
    lm = load_adapted(cfg)
    algorithm = build_method(cfg, lm, server=True)
    pool = FlowerClients(grid, dump_config(cfg), cfg.federation, run_key, num_nodes, connect_timeout)
    info = next(iter(pool.info.values()))
    shrink = cfg.train.head_intercept == "shrunk"
    runtime = Runtime(algorithm, pool, cfg.federation, cfg.seed, shrink_intercepts=shrink)
    env = {"runtime": "flower", "nodes": dict(pool.nodes)}
    _, summary = run_rounds(cfg, runtime, out, lm=lm, shared_init=shared_init(cfg, lm), env=env, resume=resume,
                            metric=str(info["primary_metric"]), synthetic=bool(info["synthetic"]))  # fmt: skip
    finish_run(RunDirectory(out), summary)
    return summary


def make_server_app(
    cfg: RunConfig, num_nodes: int, out: Path, resume: bool = False, result: dict[str, Any] | None = None
) -> ServerApp:
    """A ServerApp bound to one configuration (Python API: ``flwr.simulation.run_simulation``)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        summary = serve(grid, cfg, out, num_nodes, resume)
        if result is not None:
            result["summary"] = summary

    return app


server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    rc = context.run_config
    overrides = [o.strip() for o in str(rc.get("overrides", "")).split(";") if o.strip()]
    cfg = load_config(str(rc["config"]), None, overrides)
    require_backbone(cfg, "a Flower deployment")
    serve(
        grid, cfg, Path(str(rc["out"])), int(rc["num-nodes"]), switch(rc, "resume"), overwrite=switch(rc, "overwrite")
    )


def switch(run_config: Mapping[str, Any], key: str) -> bool:
    """A true/false run-config key: TOML's ``true`` / ``false``, or those words quoted. Anything else is
    refused: read as Python truth, a quoted ``'false'`` or ``'no'`` meant yes (and overwrite deleted)."""
    value = run_config.get(key, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"run config {key}={value!r}: expected true or false")
