"""One run, start to finish: the method on a runtime, the round loop, then the run directory's
summary, the method's own report (`Algorithm.final_report`) and the financial outputs."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from fedloom.algorithms.base import Algorithm, RunReport
from fedloom.backbone.model import AdaptedLM
from fedloom.backbone.peft_io import export_peft
from fedloom.data.qlib_cn import benchmark_close
from fedloom.data.schema import SampleTable
from fedloom.experiments.config import RunConfig, config_digest
from fedloom.experiments.daily import daily_metrics, regime_breakdown, test_predictions
from fedloom.experiments.methods import build_method
from fedloom.experiments.plots import draw_heatmap
from fedloom.experiments.portfolio import BENCHMARKS, portfolio_metrics
from fedloom.experiments.report import single_report
from fedloom.experiments.rundir import RunDirectory
from fedloom.experiments.summary import build_summary
from fedloom.experiments.workspace import Workspace, client_heterogeneity
from fedloom.progress import Progress
from fedloom.runtime.rounds import RoundRecord, Runtime, SimulationResult
from fedloom.runtime.simulation import InProcessRuntime

log = logging.getLogger("fedloom")


def run_method(
    cfg: RunConfig, ws: Workspace, out: Path, progress: Progress | None = None, resume: bool = False
) -> dict[str, Any]:
    """Run ``cfg.method`` in process on the workspace and write its run directory; returns the summary.

    With ``resume``, continue from the newest checkpoint in ``out`` (a fresh run when there is none);
    the result is the same as an uninterrupted run.
    """
    algorithm = build_method(cfg, ws.lm, server=True)
    runtime = InProcessRuntime(algorithm, ws.learners, cfg.federation, cfg.seed, progress)
    metric = next(iter(ws.learners.values())).task.primary_metric
    env = {"setup_seconds": ws.setup_seconds, "runtime": "in-process"}
    extra = {cid: {"heterogeneity": h} for cid, h in client_heterogeneity(ws).items()}
    result, summary = run_rounds(cfg, runtime, ws.lm, ws.shared_init, out, metric, ws.table.synthetic, env, resume,
                                 extra)  # fmt: skip
    rundir = RunDirectory(out)
    report = algorithm.final_report(result.server, result.clients, ws.audit())
    write_run_report(rundir, report, f"{cfg.method} on {cfg.dataset}")
    summary.update(report.summary)
    if isinstance(ws.table, SampleTable):
        summary.update(financial_outputs(cfg, ws, algorithm, result, rundir))
    finish_run(rundir, summary)
    return summary


def run_rounds(
    cfg: RunConfig,
    runtime: Runtime,
    lm: AdaptedLM,
    shared_init: dict[str, Tensor],
    out: Path,
    metric: str,
    synthetic: bool,
    env: dict[str, Any],
    resume: bool = False,
    per_client_extra: dict[str, dict[str, float]] | None = None,
) -> tuple[SimulationResult, dict[str, Any]]:
    """The part of a run every runtime shares: config, env, metrics.jsonl, checkpoints, the rounds and
    the PEFT export of the final shared adapter; the caller adds its extras to the summary and writes
    summary.json and report.md (`finish_run`)."""
    rundir = RunDirectory(out)
    digest = config_digest(cfg)
    checkpoint = rundir.checkpoints.load() if resume else None
    if checkpoint is not None and checkpoint.config_digest != digest:
        log.warning("%s: config differs from the checkpointed run (beyond `rounds`); continuing anyway", out)
    rundir.write_config(cfg)
    rundir.write_env(
        {
            "backbone": lm.backbone.identity,
            "dtype": cfg.model.dtype,
            "adapted_layers": sorted({m.layer for m in lm.layout.modules}),
            "resumed_from_round": checkpoint.round if checkpoint else None,
            **env,
        }
    )
    history = [RoundRecord(**r) for r in checkpoint.history] if checkpoint else []
    rundir.start_metrics(history)
    t0 = time.perf_counter()
    result = runtime.run(
        shared_init,
        cfg.rounds,
        on_round=rundir.append_metrics,
        checkpoints=rundir.checkpoints,
        config_digest=digest,
        resume_from=checkpoint,
    )
    summary = build_summary(cfg, result, time.perf_counter() - t0, str(out), metric, synthetic, per_client_extra or {})
    if set(lm.layout.slot().keys) <= set(result.server.tensors):
        export_peft(result.server.tensors, lm.layout, out / "adapter", base_model=cfg.backbone)
    return result, summary


def write_run_report(rundir: RunDirectory, report: RunReport, title: str) -> None:
    """A method's declared end-of-run files (``<name>.json``) and heatmaps (``<name>.png``)."""
    for name, content in report.files.items():
        rundir.write_json(f"{name}.json", content)
    for name, heatmap in report.heatmaps.items():
        draw_heatmap(heatmap, rundir.path / f"{name}.png", f"{title}\n{heatmap.title}")


def financial_outputs(
    cfg: RunConfig, ws: Workspace, algorithm: Algorithm, result: SimulationResult, rundir: RunDirectory
) -> dict[str, Any]:
    """daily.csv of the final models on the test rows; for index datasets the TopkDropout portfolio and
    the regime breakdown (summary entries)."""
    assert isinstance(ws.table, SampleTable)
    predictions = test_predictions(algorithm, result.server, result.clients, ws.learners, ws.table.frame, cfg.rounds)
    if predictions.empty:
        log.warning("no client has test rows: daily.csv, the portfolio and the regimes are skipped")
        return {}
    daily = daily_metrics(predictions, ws.table.task_kind)
    rundir.write_daily(daily)
    if cfg.dataset not in BENCHMARKS:
        return {}
    portfolio = portfolio_metrics(predictions, cfg.dataset, cfg.data.data_dir, cfg.portfolio)
    index = benchmark_close(cfg.data.data_dir, BENCHMARKS[cfg.dataset])
    train_dates = ws.table.dates[np.concatenate([lrn.data.train for lrn in ws.learners.values()])]
    return {"portfolio": portfolio, "regimes": regime_breakdown(daily["rank_ic"], index, train_dates)}


def finish_run(rundir: RunDirectory, summary: dict[str, Any]) -> None:
    """Write summary.json and report.md of a finished run."""
    rundir.write_summary(summary)
    rundir.write_report(single_report(summary))
