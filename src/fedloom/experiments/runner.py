"""Wire the layers into an experiment: backbone → data → features → clients → runtime → run directory.

A `Workspace` (backbone, dataset, frozen features, learners) depends on the data and adapter
configuration but not on the method, so several methods run in one process on one workspace.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr
from torch import Tensor

from fedloom.algorithms.registry import build_algorithm
from fedloom.backbone.features import Ragged, cached_features, cached_ragged
from fedloom.backbone.loading import cache_root, load_backbone
from fedloom.backbone.model import AdaptedLM
from fedloom.backbone.peft_io import export_peft
from fedloom.data.partition import client_views, partition_table
from fedloom.data.prompts import tokenize_instructions, tokenize_prompts, uses_numeric_side_channel
from fedloom.data.qlib_cn import benchmark_close
from fedloom.data.registry import load_dataset
from fedloom.data.schema import SampleTable, TextTable
from fedloom.data.splits import table_splits
from fedloom.errors import ConfigError
from fedloom.experiments.audit import alignment_quality, task_expert_routing
from fedloom.experiments.config import RunConfig, dump_config, load_config, settings
from fedloom.experiments.daily import daily_metrics, regime_breakdown, test_predictions
from fedloom.experiments.plots import route_heatmap, task_expert_heatmap
from fedloom.experiments.portfolio import BENCHMARKS, portfolio_metrics
from fedloom.experiments.report import client_table, fmt, markdown, method_table
from fedloom.experiments.rundir import RunDirectory
from fedloom.metrics.federated import higher_is_better
from fedloom.metrics.heterogeneity import heterogeneity_scores
from fedloom.metrics.significance import paired_block_bootstrap
from fedloom.progress import Progress, SilentProgress
from fedloom.runtime.rounds import (
    RoundRecord,
    Runtime,
    SimulationResult,
    mean_train_loss,
    summarize,
)
from fedloom.runtime.simulation import InProcessRuntime
from fedloom.seeding import generator
from fedloom.tasks.generation import GenerationTask
from fedloom.tasks.learner import Learner
from fedloom.tasks.registry import make_task
from fedloom.tasks.side_channel import SideChannel

log = logging.getLogger("fedloom")


@dataclass
class Workspace:
    """Everything method-independent: one backbone, one feature cache, one learner per client."""

    lm: AdaptedLM
    table: SampleTable | TextTable
    learners: dict[str, Learner]
    shared_init: dict[str, Tensor]
    setup_seconds: dict[str, float]


def load_adapted(cfg: RunConfig) -> AdaptedLM:
    """The frozen backbone with the configured adapter layout (what a Flower server needs, no data)."""
    backbone = load_backbone(cfg.backbone, cfg.model.dtype, cfg.model.device)
    return AdaptedLM(backbone, cfg.adapter.spec(backbone.num_layers))


def prepare_workspace(cfg: RunConfig, progress: Progress | None = None) -> Workspace:
    progress = progress or SilentProgress()
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    done = progress.task(f"loading {cfg.backbone} (the first use of a GGUF model converts it once)", 1)
    lm = load_adapted(cfg)
    backbone = lm.backbone
    done(1)
    seconds["backbone"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    table = load_dataset(cfg.dataset, cfg.data)
    token_cache = cache_root() / "tokens" if cfg.data.feature_cache else None
    key = token_key(table, backbone.identity, cfg)
    if isinstance(table, TextTable):
        prompts = cached_ragged(token_cache, key + "|prompts", lambda: tokenize_instructions(
            table, backbone.tokenizer, cfg.data.prompt.max_tokens)[0])  # fmt: skip
        responses = cached_ragged(token_cache, key + "|responses", lambda: tokenize_instructions(
            table, backbone.tokenizer, cfg.data.prompt.max_tokens)[1])  # fmt: skip
        tokens = Ragged.from_rows(
            [torch.cat([prompts.row(i), responses.row(i)]) for i in range(len(table))], torch.int64
        )
        frame = table.frame
        text_task = GenerationTask(
            frame["task"].to_numpy(str), frame["label"].to_numpy(str), list(frame["references"]),
            prompts.lengths, dict(cfg.generation.max_new_tokens),
        )  # fmt: skip
    else:
        tokens = cached_ragged(token_cache, key, lambda: tokenize_prompts(table, backbone.tokenizer, cfg.data.prompt))
        text_task = None
    seconds["data"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    features = cached_features(
        lm,
        tokens,
        cache_root() / "features" if cfg.data.feature_cache else None,
        with_embedding=True,  # the frozen pooled embedding: routers and prototype discovery read it
        batch_size=cfg.model.feature_batch_size,
        progress=progress.task("frozen features (once per dataset)", len(tokens)),
    )
    seconds["features"] = time.perf_counter() - t0

    splits = table_splits(table, cfg.data.split)
    d = cfg.data
    partition = partition_table(table, d.partition, d.num_clients, d.alpha, d.partition_seed, splits["train"])
    clients = client_views(partition, splits)
    if text_task is not None:
        none = np.zeros(len(table), dtype=np.float32)
        learners = {
            c.client_id: Learner(lm, features, none, none.astype("datetime64[D]"), c, cfg.train.batch_size, text_task)
            for c in clients
        }
        return Workspace(lm, table, learners, lm.layout.init_slot(generator(cfg.seed, "adapter-init")), seconds)
    eval_targets = table.frame["return"].to_numpy(np.float32) if table.task_kind == "ranking" else None
    numeric = None
    if uses_numeric_side_channel(d.prompt):
        if not table.covariates:
            raise ConfigError(f"prompt.inputs=text+numeric needs covariates; dataset {table.name!r} has none")
        numeric = table.frame[list(table.covariates)].to_numpy(np.float64)
    learners = {
        c.client_id: Learner(
            lm,
            features,
            table.targets,
            table.dates,
            c,
            cfg.train.batch_size,
            task=make_task(table.task_kind, table.targets[c.train], table.num_classes),
            eval_targets=eval_targets,
            grad_clip=cfg.train.grad_clip,
            side_channel=None if numeric is None else SideChannel.fitted(numeric, c.train),
        )
        for c in clients
    }
    shared_init = lm.layout.init_slot(generator(cfg.seed, "adapter-init"))
    return Workspace(lm, table, learners, shared_init, seconds)


def token_key(table: SampleTable | TextTable, backbone: str, cfg: RunConfig) -> str:
    """Identity of a dataset's token ids: the rows' content, the tokenizer and the prompt settings."""
    content = pd.util.hash_pandas_object(table.frame.astype(str), index=False).to_numpy()
    digest = hashlib.sha256(content.tobytes()).hexdigest()
    return f"{backbone}|{cfg.data.prompt.model_dump_json()}|{table.name}|{digest}"


def run_method(
    cfg: RunConfig, ws: Workspace, out: Path, progress: Progress | None = None, resume: bool = False
) -> dict[str, Any]:
    """Run ``cfg.method`` in process on the workspace and write its run directory; returns the summary.

    With ``resume``, continue from the newest checkpoint in ``out`` (a fresh run when there is none);
    the result is the same as an uninterrupted run.
    """
    algorithm = build_algorithm(cfg.method, cfg.build_context(ws.lm.layout.slot(), ws.lm))
    runtime = InProcessRuntime(algorithm, ws.learners, cfg.federation, cfg.seed, progress)
    metric = next(iter(ws.learners.values())).task.primary_metric
    env = {"setup_seconds": ws.setup_seconds, "runtime": "in-process"}
    extra = {cid: {"heterogeneity": h} for cid, h in client_heterogeneity(ws).items()}
    synthetic = getattr(ws.table, "synthetic", False)
    result, summary = run_rounds(cfg, runtime, ws.lm, ws.shared_init, out, metric, synthetic, env, resume, extra)
    rundir = RunDirectory(out)
    artifacts = algorithm.final_report(result.server, result.clients)
    if "routes" in artifacts:
        groups = client_groups(ws)
        rundir.write_json("routes.json", {"routes": artifacts["routes"], "group": groups, **artifacts})
        route_heatmap(artifacts["routes"], groups, out / "routes.png",
                      f"{cfg.method} on {cfg.dataset}\nfinal routes, rows by dominant prototype")  # fmt: skip
    if "buckets" in artifacts and isinstance(ws.table, TextTable):  # FedWeave's audit against hidden tasks
        tasks = ws.table.frame["task"].to_numpy(str)
        summary["alignment"] = alignment_quality(artifacts, ws.learners, tasks)
        routing = task_expert_routing(result.server.tensors, ws.learners, tasks)
        rundir.write_json("alignment.json", {**artifacts, "quality": summary["alignment"], "routing": routing})
        task_expert_heatmap(routing, out / "task_expert.png", f"{cfg.method} on {cfg.dataset}\ntask × expert routing")
    if isinstance(ws.table, SampleTable):  # daily series, regimes and portfolio: final models, test rows
        predictions = test_predictions(
            algorithm, result.server, result.clients, ws.learners, ws.table.frame, cfg.rounds
        )
        daily = daily_metrics(predictions, ws.table.task_kind)
        rundir.write_daily(daily)
        if cfg.dataset in BENCHMARKS:
            summary["portfolio"] = portfolio_metrics(predictions, cfg.dataset, cfg.data.data_dir, cfg.portfolio)
            index = benchmark_close(cfg.data.data_dir, BENCHMARKS[cfg.dataset])
            train_dates = ws.table.dates[np.concatenate([lrn.data.train for lrn in ws.learners.values()])]
            summary["regimes"] = regime_breakdown(daily["rank_ic"], index, train_dates)
    finish_run(out, summary)
    return summary


def finish_run(out: Path, summary: dict[str, Any]) -> None:
    """Write summary.json and report.md of a finished run."""
    rundir = RunDirectory(out)
    rundir.write_summary(summary)
    rundir.write_report(single_report(summary))


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
    summary = build_summary(cfg, result, time.perf_counter() - t0, out, metric, synthetic, per_client_extra or {})
    if set(lm.layout.slot().keys) <= set(result.server.tensors):
        export_peft(result.server.tensors, lm.layout, out / "adapter", base_model=cfg.backbone)
    return result, summary


# what `evaluate_run` may change: settings read only when a finished model is evaluated
EVALUATION_SETTINGS = ("methods.fedweave.inference", "methods.rpa.eval_residual", "data.data_dir")


def evaluate_run(run_dir: Path, overrides: list[str], progress: Progress | None = None) -> dict[str, Any]:
    """Evaluate the newest checkpoint of a finished in-process run again with evaluation-time settings
    changed (FedWeave's soft / top-1 / top-2 mixture, RPA's eval_residual), without training again;
    the result is also written to ``RUN_DIR/evaluations/<overrides>.json``."""
    base = load_config(run_dir / "config.yaml")
    cfg = load_config(run_dir / "config.yaml", None, overrides)
    now, then = settings(cfg), settings(base)
    training = sorted(
        k for k in now.keys() | then.keys() if now.get(k) != then.get(k) and k not in EVALUATION_SETTINGS
    )
    if training:
        raise ConfigError(f"{', '.join(training)}: only evaluation-time settings can change "
                          f"({', '.join(EVALUATION_SETTINGS)}); train a new run for the others")  # fmt: skip
    rundir = RunDirectory(run_dir)
    checkpoint = rundir.checkpoints.load(restore_random_state=False)
    if checkpoint is None:
        raise ConfigError(f"{run_dir} has no checkpoint to evaluate")
    ws = prepare_workspace(cfg, progress)
    if set(checkpoint.clients) != set(ws.learners):
        raise ConfigError(f"{run_dir}: the checkpoint holds no client states (a deployment keeps them on its nodes)")
    # built as a client builds it: evaluation needs no server-side model work (FedBiOT's alignment)
    algorithm = build_algorithm(cfg.method, cfg.build_context(ws.lm.layout.slot()))
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
    (run_dir / "evaluations").mkdir(exist_ok=True)
    rundir.write_json(f"evaluations/{name}.json", result)
    return result


def config_digest(cfg: RunConfig) -> str:
    """Identity of a run's configuration, ignoring ``rounds`` (a resumed run may be extended)."""
    return hashlib.sha256(dump_config(cfg.model_copy(update={"rounds": 0})).encode()).hexdigest()[:16]


def best_round(history: list[RoundRecord], metric: str) -> RoundRecord:
    """The evaluated round with the best macro validation ``metric`` (personalized); ties → earliest."""
    key = f"personal/val/{metric}/macro"
    sign = 1.0 if higher_is_better(metric) else -1.0
    evaluated = [r for r in history if r.evaluation is not None]
    scored = [(sign * r.summary[key], -r.round, r) for r in evaluated if math.isfinite(r.summary.get(key, math.nan))]
    return max(scored, key=lambda t: t[:2])[2] if scored else evaluated[-1]


def client_groups(ws: Workspace) -> dict[str, str]:
    """Each client's most common group (its sector, for sector partitions) — the heatmap's labels."""
    column = "task" if isinstance(ws.table, TextTable) else "group"
    groups = ws.table.frame[column].astype(str).to_numpy()
    out = {}
    for cid, learner in ws.learners.items():
        values, counts = np.unique(groups[learner.data.train], return_counts=True)
        out[cid] = str(values[np.argmax(counts)])
    return out


def client_heterogeneity(ws: Workspace) -> dict[str, float]:
    """Seed 000 eq. 26 per client, from its training targets and covariates (financial tables only)."""
    if isinstance(ws.table, TextTable):
        return {}
    covariates = ws.table.frame[list(ws.table.covariates)].to_numpy(float) if ws.table.covariates else None
    targets = {c: ws.table.targets[lrn.data.train] for c, lrn in ws.learners.items()}
    if covariates is None:
        return {}
    bins = None if ws.table.task_kind == "classification" else 10
    return heterogeneity_scores(targets, {c: covariates[lrn.data.train] for c, lrn in ws.learners.items()}, bins)


def build_summary(
    cfg: RunConfig,
    result: SimulationResult,
    wall: float,
    out: Path,
    metric: str,
    synthetic: bool,
    per_client_extra: dict[str, dict[str, float]],
) -> dict[str, Any]:
    """Test metrics at the round chosen on validation (``metrics``) and after the last round."""
    best, last = best_round(result.history, metric), result.history[-1]
    assert best.evaluation is not None
    clients = sorted({c for per_split in best.evaluation.values() for per in per_split.values() for c in per})
    per_client: dict[str, dict[str, float]] = {cid: {} for cid in clients}
    for mode, per_split in best.evaluation.items():
        prefix = "" if mode == "personal" else f"{mode}/"
        for split, per in per_split.items():
            for cid, values in per.items():
                per_client[cid].update({f"{prefix}{split}/{m}": v for m, v in values.items()})
    by_group: dict[str, dict[str, int]] = {}
    for r in result.history:
        for direction, groups in r.bytes_by_group.items():
            for g, n in groups.items():
                by_group.setdefault(direction, {}).setdefault(g, 0)
                by_group[direction][g] += n
    for cid, extra in per_client_extra.items():
        per_client.setdefault(cid, {}).update(extra)
    return {
        "method": cfg.method,
        "dataset": cfg.dataset,
        "primary_metric": metric,
        "synthetic": synthetic,
        "backbone": cfg.backbone,
        "rounds": cfg.rounds,
        "seed": cfg.seed,
        "selection": {"metric": f"personal/val/{metric}/macro", "best_round": best.round},
        "metrics": {**best.summary, "train_loss/final_round": mean_train_loss(last)},
        "final_metrics": last.summary,
        "per_client": per_client,
        "communication": {
            "download_bytes": sum(sum(r.download_bytes.values()) for r in result.history),
            "upload_bytes": sum(sum(r.upload_bytes.values()) for r in result.history),
            "by_group": by_group,
        },
        "failures": sum(len(r.failures) for r in result.history),
        "rejected": sum(len(r.rejected) for r in result.history),
        "wall_seconds": wall,
        "run_dir": str(out),
    }


def single_report(summary: dict[str, Any]) -> str:
    label = " (SYNTHETIC data)" if summary["synthetic"] else ""
    text = (
        f"# {summary['method']} on {summary['dataset']}{label}\n\n"
        f"Backbone `{summary['backbone']}`, {summary['rounds']} rounds, seed {summary['seed']}; "
        f"personalized evaluation on each client's test split at round {summary['selection']['best_round']}, "
        f"chosen by `{summary['selection']['metric']}`.\n\n"
        + markdown(client_table(summary))
        + "\n"
        + markdown(method_table([summary]))
    )
    if "portfolio" in summary:
        values = ", ".join(f"{k} {fmt(v)}" for k, v in summary["portfolio"].items())
        text += f"\nTopkDropout, excess return with cost (final models): {values}\n"
    return text


def comparison_report(summaries: list[dict[str, Any]]) -> str:
    """The method table, and where FedAvg ran, each method's per-client gain over it beside the
    client's heterogeneity score (seed 000 eq. 26) with their Spearman correlation."""
    s0 = summaries[0]
    label = " (SYNTHETIC data)" if s0["synthetic"] else ""
    return (
        f"# Method comparison on {s0['dataset']}{label}\n\n"
        f"Backbone `{s0['backbone']}`, {s0['rounds']} rounds, seed {s0['seed']}; personalized test metrics at "
        "the round with the best validation score (column `round`; IC / RankIC: macro mean over clients of "
        "the mean daily correlation; MSE / MAE: weighted by test rows).\n\n"
        + markdown(method_table(summaries))
        + gain_section(summaries)
        + significance_section(summaries)
    )


def significance_section(summaries: list[dict[str, Any]]) -> str:
    """Paired block bootstrap over trading weeks (seed 000, Table 5) of each method against FedAvg on
    the daily test series of the final models (daily.csv)."""
    daily = {s["method"]: Path(s["run_dir"]) / "daily.csv" for s in summaries}
    if "fedavg" not in daily or not all(p.is_file() for p in daily.values()):
        return ""
    frames = {m: pd.read_csv(p, index_col="date", parse_dates=["date"]) for m, p in daily.items()}
    primary = summaries[0]["primary_metric"]
    column = primary if primary in frames["fedavg"].columns else frames["fedavg"].columns[0]
    rows = []
    for method, frame in frames.items():
        if method == "fedavg" or column not in frame:
            continue
        try:
            t = paired_block_bootstrap(frame[column], frames["fedavg"][column])
        except ValueError:
            continue
        ci = f"[{fmt(t['ci_low'])}, {fmt(t['ci_high'])}]"
        rows.append([method, fmt(t["mean_difference"]), ci, fmt(t["p_value"]), f"{t['days']:.0f} / {t['weeks']:.0f}"])
    if not rows:
        return ""
    header = ["method", f"mean daily {column} − fedavg", "95 % CI", "p", "days / weeks"]
    return f"\n## Paired block bootstrap vs FedAvg (daily `{column}`, final models, weeks resampled)\n\n" + markdown(
        (header, rows)
    )


def gain_section(summaries: list[dict[str, Any]]) -> str:
    base = next((s for s in summaries if s["method"] == "fedavg"), None)
    if base is None:
        return ""
    metric = f"test/{base['primary_metric']}"
    clients = sorted(base["per_client"])
    others = [s for s in summaries if s["method"] != "fedavg"]
    header = ["client", "heterogeneity", *(f"{s['method']} − fedavg" for s in others)]
    rows, notes = [], []
    for c in clients:
        row = [c, fmt(base["per_client"][c].get("heterogeneity"))]
        row += [fmt(_gain(s, base, c, metric)) for s in others]
        rows.append(row)
    for s in others:
        gains = [_gain(s, base, c, metric) for c in clients]
        het = [base["per_client"][c].get("heterogeneity", math.nan) for c in clients]
        ok = [(h, g) for h, g in zip(het, gains, strict=True) if math.isfinite(h) and math.isfinite(g)]
        rho = spearmanr([h for h, _ in ok], [g for _, g in ok]).statistic if len(ok) > 2 else math.nan
        notes.append(f"* {s['method']}: Spearman ρ(heterogeneity, gain) = {fmt(float(rho))} over {len(ok)} clients")
    return (
        f"\n## Per-client gain in `{metric}` over FedAvg\n\n"
        + markdown((header, rows))
        + "\n"
        + "\n".join(notes)
        + "\n"
    )


def _gain(s: dict[str, Any], base: dict[str, Any], client: str, metric: str) -> float:
    a, b = s["per_client"].get(client, {}).get(metric), base["per_client"][client].get(metric)
    return float(a) - float(b) if a is not None and b is not None else math.nan
