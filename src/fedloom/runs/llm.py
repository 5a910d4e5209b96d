"""One run, start to finish: the method on a runtime, the round loop, then the run directory's
summary, the method's own report (`Algorithm.final_report`) and the financial outputs.

One model behind every number: the headline metrics are those of the round chosen on validation, so
the daily series, the portfolio and the regimes come from that round's checkpoint (kept apart from
pruning while the run goes on); the final models give the same outputs as a second view
(``daily_final.csv``, ``portfolio_final``, ``regimes_final``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from torch import Tensor

from fedloom.algorithms.base import Algorithm
from fedloom.backbone.model import AdaptedLM
from fedloom.backbone.peft_io import export_peft
from fedloom.data.schema import SampleTable, TextTable
from fedloom.errors import FedloomError
from fedloom.progress import Progress
from fedloom.runs.baseline import constant_baseline, learner_owners, text_baseline
from fedloom.runs.config import RunConfig, config_digest
from fedloom.runs.daily import test_predictions
from fedloom.runs.methods import build_method
from fedloom.runs.outputs import finish_run, prediction_outputs, record_outputs, write_run_report
from fedloom.runs.resume import check_checkpoint, resume_changes
from fedloom.runs.rundir import RunDirectory
from fedloom.runs.scoring import RoundModels, RoundTest, complete_test, round_models, round_test
from fedloom.runs.summary import best_round, build_summary, selection_metric
from fedloom.runs.workspace import Workspace, client_heterogeneity
from fedloom.runtime.memory import algorithm_state
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
    frame = ws.table.frame if isinstance(ws.table, SampleTable) else None
    tests: dict[int, RoundTest] = {}

    def deferred_test(result: SimulationResult) -> None:
        """test_rounds=chosen: the test split of the chosen and the last round, from their models."""
        chosen = best_round(result.history, selection_metric(cfg, metric)).round
        for rnd in dict.fromkeys((chosen, result.history[-1].round)):
            models = round_models(result, RunDirectory(out), rnd)
            if models is None:
                raise FedloomError(f"{out}: round {rnd} (chosen on validation) has no checkpoint to test")
            tests[rnd] = round_test(algorithm, ws.learners, models, frame)
            complete_test(next(r for r in result.history if r.round == rnd), tests[rnd], runtime.pool.sizes)

    complete = deferred_test if cfg.federation.test_rounds == "chosen" else None
    result, summary = run_rounds(cfg, runtime, out, lm=ws.lm, shared_init=ws.shared_init, metric=metric,
                                 synthetic=ws.table.synthetic, env=env, resume=resume, per_client_extra=extra,
                                 complete=complete)  # fmt: skip
    rundir = RunDirectory(out)
    clients = {cid: algorithm_state(state) for cid, state in result.clients.items()}
    report = algorithm.final_report(result.server, clients, ws.audit())
    write_run_report(rundir, report, f"{cfg.method} on {cfg.dataset}")
    summary.update(report.summary)
    if isinstance(ws.table, SampleTable):
        summary["baseline"] = constant_baseline(learner_owners(ws.learners))
        predicted = {rnd: t.predictions for rnd, t in tests.items() if t.predictions is not None}
        chosen = summary["selection"]["best_round"]
        summary.update(financial_outputs(cfg, ws, algorithm, result, rundir, chosen, predicted))
    elif isinstance(ws.table, TextTable):
        summary["baseline"] = text_baseline(ws.table, [lrn.data for lrn in ws.learners.values()])
    finish_run(rundir, summary)
    return summary


def run_rounds(
    cfg: RunConfig,
    runtime: Runtime,
    out: Path,
    *,
    lm: AdaptedLM | None,
    shared_init: dict[str, Tensor],
    metric: str,
    synthetic: bool,
    env: dict[str, Any],
    resume: bool = False,
    per_client_extra: dict[str, dict[str, float]] | None = None,
    complete: Callable[[SimulationResult], None] | None = None,
) -> tuple[SimulationResult, dict[str, Any]]:
    """The part of a run every runtime shares: config, env, metrics.jsonl, checkpoints, the rounds and
    the PEFT export of the final shared adapter; ``complete`` fills in what the round loop deferred
    (`deferred_test`) before the summary is built. The caller adds its extras to the summary and writes
    summary.json and report.md (`finish_run`)."""
    changes = resume_changes(out, cfg) if resume else {}  # refused before anything is written
    rundir = RunDirectory(out)
    digest = config_digest(cfg)
    checkpoint = rundir.checkpoints.load() if resume else None
    if checkpoint is not None:
        check_checkpoint(out, cfg, checkpoint.round, checkpoint.config_digest)
        rundir.record_resume(checkpoint.round, changes)
    rundir.write_config(cfg)
    model = {} if lm is None else {
        "backbone": lm.backbone.identity,
        "dtype": str(lm.backbone.dtype).removeprefix("torch."),  # what `auto` chose, when it was auto
        "adapted_layers": sorted({m.layer for m in lm.layout.modules}),
    }  # fmt: skip
    rundir.write_env({**model, "resumed_from_round": checkpoint.round if checkpoint else None, **env})
    history = [RoundRecord(**r) for r in checkpoint.history] if checkpoint else []
    rundir.start_metrics(history)
    select = selection_metric(cfg, metric)

    def on_round(record: RoundRecord) -> None:
        """Log the round and keep the checkpoint of the round chosen on validation so far."""
        rundir.append_metrics(record)
        history.append(record)
        if any(r.evaluation is not None for r in history):
            rundir.checkpoints.protect(best_round(history, select).round)

    if any(r.evaluation is not None for r in history):  # resumed: the chosen round may predate the restart
        rundir.checkpoints.protect(best_round(history, select).round)
    t0 = time.perf_counter()
    result = runtime.run(
        shared_init,
        cfg.rounds,
        on_round=on_round,
        checkpoints=rundir.checkpoints,
        config_digest=digest,
        resume_from=checkpoint,
    )
    if complete is not None:
        complete(result)
    summary = build_summary(cfg, result, time.perf_counter() - t0, str(out), metric, synthetic, per_client_extra or {})
    if lm is not None and set(lm.layout.slot().keys) <= set(result.server.tensors):
        export_peft(result.server.tensors, lm.layout, rundir.own("adapter"), base_model=cfg.backbone)
    return result, summary


def financial_outputs(
    cfg: RunConfig,
    ws: Workspace,
    algorithm: Algorithm,
    result: SimulationResult,
    rundir: RunDirectory,
    chosen: int,
    predicted: Mapping[int, pd.DataFrame] | None = None,
) -> dict[str, Any]:
    """The test outputs of the models of round ``chosen`` (daily.csv; for index datasets portfolio.csv and
    the ``portfolio`` and ``regimes`` summary entries) and the same of the final models, suffixed
    ``_final``; test predictions already made for a round (``predicted``) are reused. Without a
    checkpoint of the chosen round (``checkpoint_every``), both are the final ones."""
    final = round_models(result, rundir, result.history[-1].round)
    assert final is not None
    models = round_models(result, rundir, chosen)
    if models is None:
        log.warning("round %d (chosen on validation) has no checkpoint: daily.csv and the portfolio use the "
                    "final models", chosen)  # fmt: skip
    views = {"_final": final, "": models or final}
    out: dict[str, Any] = {"outputs_round": views[""].round}
    computed: dict[int, dict[str, Any]] = {}
    for suffix, view in views.items():
        if view.round not in computed:
            known = (predicted or {}).get(view.round)
            computed[view.round] = _test_outputs(cfg, ws, algorithm, view, known)
        out |= record_outputs(rundir, computed[view.round], suffix)
    return out


def _test_outputs(
    cfg: RunConfig, ws: Workspace, algorithm: Algorithm, models: RoundModels, predictions: pd.DataFrame | None
) -> dict[str, Any]:
    """Daily series, daily portfolio report and its summaries, and regimes of one round's models (from
    their test ``predictions`` when these are already made)."""
    assert isinstance(ws.table, SampleTable)
    if predictions is None:
        frame = ws.table.frame
        predictions = test_predictions(algorithm, models.server, models.clients, ws.learners, frame, models.round)
    train_dates = ws.table.dates[np.concatenate([lrn.data.train for lrn in ws.learners.values()])]
    return prediction_outputs(cfg, ws.table.task_kind, predictions, train_dates)
