"""Wire the layers into an experiment: backbone → data → features → clients → runtime → run directory.

A `Workspace` (backbone, dataset, frozen features, learners) depends on the data and adapter
configuration but not on the method, so several methods run in one process on one workspace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from fedloom.algorithms.registry import build_algorithm
from fedloom.backbone.features import cached_features
from fedloom.backbone.loading import cache_root, load_backbone
from fedloom.backbone.model import AdaptedLM
from fedloom.backbone.peft_io import export_peft
from fedloom.data.partition import client_views, partition_by_group
from fedloom.data.prompts import tokenize_prompts
from fedloom.data.registry import load_dataset
from fedloom.data.schema import SampleTable
from fedloom.data.splits import chronological_split
from fedloom.experiments.config import RunConfig
from fedloom.experiments.report import client_table, markdown, method_table
from fedloom.experiments.rundir import RunDirectory
from fedloom.progress import Progress, SilentProgress
from fedloom.runtime.seeding import generator
from fedloom.runtime.simulation import InProcessRuntime, RoundRecord, SimulationResult, mean_train_loss
from fedloom.tasks.learner import Learner


@dataclass
class Workspace:
    """Everything method-independent: one backbone, one feature cache, one learner per client."""

    lm: AdaptedLM
    table: SampleTable
    learners: dict[str, Learner]
    shared_init: dict[str, Tensor]
    setup_seconds: dict[str, float]


def prepare_workspace(cfg: RunConfig, progress: Progress | None = None) -> Workspace:
    progress = progress or SilentProgress()
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    done = progress.task(f"loading {cfg.backbone} (the first use of a GGUF model converts it once)", 1)
    backbone = load_backbone(cfg.backbone, cfg.model.dtype)
    lm = AdaptedLM(backbone, cfg.adapter.spec(backbone.num_layers))
    done(1)
    seconds["backbone"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    table = load_dataset(cfg.dataset, cfg.data)
    tokens = tokenize_prompts(table, backbone.tokenizer, cfg.data.prompt)
    seconds["data"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    features = cached_features(
        lm,
        tokens,
        cache_root() / "features" if cfg.data.feature_cache else None,
        batch_size=cfg.model.feature_batch_size,
        progress=progress.task("frozen features (once per dataset)", len(tokens)),
    )
    seconds["features"] = time.perf_counter() - t0

    splits = chronological_split(table.dates, cfg.data.split)
    clients = client_views(partition_by_group(table.frame["group"].to_numpy()), splits)
    learners = {
        c.client_id: Learner(
            lm, features, table.targets, table.dates, c, cfg.train.batch_size, grad_clip=cfg.train.grad_clip
        )
        for c in clients
    }
    shared_init = lm.layout.init_slot(generator(cfg.seed, "adapter-init"))
    return Workspace(lm, table, learners, shared_init, seconds)


def run_method(cfg: RunConfig, ws: Workspace, out: Path, progress: Progress | None = None) -> dict[str, Any]:
    """Run ``cfg.method`` on the workspace and write its run directory; returns the summary."""
    rundir = RunDirectory(out)
    rundir.write_config(cfg)
    rundir.write_env(
        {
            "backbone": ws.lm.backbone.identity,
            "dtype": cfg.model.dtype,
            "adapted_layers": sorted({m.layer for m in ws.lm.layout.modules}),
            "setup_seconds": ws.setup_seconds,
        }
    )
    algorithm = build_algorithm(cfg.method, cfg.train)
    runtime = InProcessRuntime(algorithm, ws.learners, cfg.federation, cfg.seed, progress)
    t0 = time.perf_counter()
    result = runtime.run(ws.shared_init, cfg.rounds, on_round=rundir.append_metrics)
    wall = time.perf_counter() - t0
    summary = build_summary(cfg, ws, result, wall)
    rundir.write_summary(summary)
    rundir.write_report(single_report(summary))
    layout = ws.lm.layout.slot()
    if set(layout.keys) <= set(result.server.tensors):
        export_peft(result.server.tensors, ws.lm.layout, out / "adapter", base_model=cfg.backbone)
    return summary


def build_summary(cfg: RunConfig, ws: Workspace, result: SimulationResult, wall: float) -> dict[str, Any]:
    last: RoundRecord = result.history[-1]
    assert last.evaluation is not None  # the last round is always evaluated
    per_client = {
        cid: {f"{split}/{m}": v for split in ("val", "test") for m, v in last.evaluation[split][cid].items()}
        for cid in ws.learners
    }
    return {
        "method": cfg.method,
        "dataset": cfg.dataset,
        "synthetic": ws.table.synthetic,
        "backbone": cfg.backbone,
        "rounds": cfg.rounds,
        "seed": cfg.seed,
        "metrics": {**last.summary, "train_loss/final_round": mean_train_loss(last)},
        "per_client": per_client,
        "communication": {
            "download_bytes": sum(sum(r.download_bytes.values()) for r in result.history),
            "upload_bytes": sum(sum(r.upload_bytes.values()) for r in result.history),
        },
        "failures": sum(len(r.failures) for r in result.history),
        "wall_seconds": wall,
    }


def single_report(summary: dict[str, Any]) -> str:
    label = " (SYNTHETIC data)" if summary["synthetic"] else ""
    return (
        f"# {summary['method']} on {summary['dataset']}{label}\n\n"
        f"Backbone `{summary['backbone']}`, {summary['rounds']} rounds, seed {summary['seed']}; "
        "personalized evaluation on each client's test split after the last round.\n\n"
        + markdown(client_table(summary))
        + "\n"
        + markdown(method_table([summary]))
    )


def comparison_report(summaries: list[dict[str, Any]]) -> str:
    s0 = summaries[0]
    label = " (SYNTHETIC data)" if s0["synthetic"] else ""
    return (
        f"# Method comparison on {s0['dataset']}{label}\n\n"
        f"Backbone `{s0['backbone']}`, {s0['rounds']} rounds, seed {s0['seed']}; test metrics after the last "
        "round (IC / RankIC: macro mean over clients of the mean daily correlation; MSE / MAE: weighted by "
        "test rows).\n\n" + markdown(method_table(summaries))
    )
