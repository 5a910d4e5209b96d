"""Evaluate a finished run's last checkpoint again with evaluation-time settings changed (FedWeave's
soft / top-1 / top-2 mixture, RPA's eval_residual: whatever the method declares), without training."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fedloom.algorithms.config import MethodConfig
from fedloom.errors import ConfigError
from fedloom.progress import Progress
from fedloom.runs.config import RunConfig, changed_keys, load_config
from fedloom.runs.kinds import kind_of, require_rounds
from fedloom.runs.methods import build_method
from fedloom.runs.rundir import RunDirectory, hold_run_dir
from fedloom.runtime.rounds import summarize
from fedloom.runtime.simulation import InProcessRuntime

RUN_SETTINGS = ("data.data_dir",)  # where this machine keeps the data may differ from where it trained


def evaluation_settings(cfg: RunConfig) -> tuple[str, ...]:
    """The dotted keys `evaluate_run` may change for this run's method."""
    section = getattr(cfg.methods, cfg.method, None)  # the method's settings, where it has any
    declared = section.evaluation_settings if isinstance(section, MethodConfig) else ()
    return (*(f"methods.{cfg.method}.{key}" for key in declared), *RUN_SETTINGS)


def evaluate_run(run_dir: Path, overrides: list[str], progress: Progress | None = None) -> dict[str, Any]:
    """Evaluate the newest checkpoint of a finished in-process run with ``overrides`` applied; the result
    is also written to ``RUN_DIR/evaluations/<overrides>.json``."""
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir}: no config.yaml there; is it a fedloom run directory?")
    with hold_run_dir(run_dir):
        return _evaluate(run_dir, overrides, progress)


def _evaluate(run_dir: Path, overrides: list[str], progress: Progress | None) -> dict[str, Any]:
    base = load_config(run_dir / "config.yaml")
    cfg = load_config(run_dir / "config.yaml", None, overrides)
    require_rounds(cfg, "fedloom evaluate")
    allowed = evaluation_settings(base)
    training = [k for k in changed_keys(base, cfg) if k not in allowed]
    if training:
        raise ConfigError(f"{', '.join(training)}: only evaluation-time settings can change "
                          f"({', '.join(allowed)}); train a new run for the others")  # fmt: skip
    rundir = RunDirectory(run_dir)
    checkpoint = rundir.checkpoints.load(restore_random_state=False)
    if checkpoint is None:
        raise ConfigError(f"{run_dir} has no checkpoint to evaluate")
    kind = kind_of(cfg)
    assert kind.workspace is not None  # require_rounds: a round-by-round run has one
    ws = kind.workspace(cfg, progress)
    if set(checkpoint.clients) != set(ws.learners):
        raise ConfigError(f"{run_dir}: the checkpoint holds no client states (a deployment keeps them on its nodes)")
    algorithm = build_method(cfg, ws.lm, server=False)  # evaluation needs no server-side model work
    runtime = InProcessRuntime(algorithm, ws.learners, cfg.federation, cfg.seed, progress)
    runtime.pool.start(ws.shared_init, checkpoint.clients)
    t0 = time.perf_counter()
    evaluation = runtime.evaluate(checkpoint.server, checkpoint.round)
    result = {
        "run_dir": str(run_dir),
        "method": cfg.method,
        "round": checkpoint.round,
        "overrides": sorted(overrides),
        "metrics": summarize(evaluation, runtime.pool.sizes),
        "seconds": time.perf_counter() - t0,
    }
    name = "+".join(sorted(overrides)).replace("/", "_") or "as-trained"
    rundir.own("evaluations").mkdir(exist_ok=True)
    rundir.write_json(f"evaluations/{name}.json", result)
    return result
