"""What one job of a paper-size suite would cost: its prompt passes counted from the resolved config and the
dataset's split sizes, priced at this CPU's measured seconds a prompt and, for a GPU, at an assumed throughput.

No GPU was lent to this project, so the GPU column is arithmetic, not a measurement: the job's forward FLOPs
(2 × the backbone's non-embedding parameters per token, plus attention) over ``--gpu-tflops`` sustained
(default 100 TFLOPS, ~10 % of an H100's dense bf16 peak: a 576-wide model keeps its matmuls small). The CPU
column scales a measured forward (``--cpu-seconds`` a prompt of ``--cpu-tokens`` tokens through the whole model;
defaults: RESULTS.md, seventh part, SmolLM2-135M in bf16 on this 2-core AMD EPYC, alone) by the job's tokens.

What a job's passes are (the dominant terms; a method's extras — Ditto's second model, RPA's calibration batch,
FedWeave's clustering — are a few steps' worth and left out):

* the head's start (``head_start: ridge``): the frozen state of every training and validation row, once;
* each round, the sampled clients' refits (``head_update: ridge``): two passes over their training rows;
* each round, ``steps × batch`` rows forward and backward on every sampled client (counted as 3 forwards);
* each evaluation (every ``eval_every`` rounds and after the last): every validation row, and with
  ``test_rounds: all`` every test row; with ``chosen`` the test rows twice at the end;
* a text task computes logits (the output layer, 2 × vocabulary × hidden a token) on its responses' tokens in
  training and on every generated token, counted at the mean ``max_new_tokens``;
* a text task generates at each evaluation: its prompt, then up to ``max_new_tokens`` tokens (one forward each;
  on the GPU a decoding step is latency-bound: ``--gpu-step-ms`` a step of ``--decode-batch`` rows, assumed);
* with ``adapter.layers`` a number below the model's depth, every pass runs only those layers; the frozen
  prefix below them is computed once per row by ``fedloom prepare`` and shared by every job of the dataset
  (its own column, not in a job's cost).

Prompts are counted at ``prompt.max_tokens`` (an upper bound: CSI300's structured prompts are ~221 of 256).

    python benchmarks/paper_cost.py                       # every configs/suites/*-paper.yaml
    python benchmarks/paper_cost.py configs/suites/seed000-csi-paper.yaml --gpu-tflops 200
    python benchmarks/paper_cost.py configs/suites/seed000-csi-paper.yaml --set train.head_update=adam  # seed's head
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedloom.algorithms.participation import participation_rate, sample_size
from fedloom.backbone.loading import load_backbone
from fedloom.data.partition import configured_partition
from fedloom.data.registry import DATASETS, load_dataset
from fedloom.data.splits import table_splits
from fedloom.runs.config import RunConfig
from fedloom.suites.spec import load_suite

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Shape:
    """The backbone's cost per token: forward FLOPs of the layers and of attention per context token."""

    layers: int
    flops_per_token: float  # 2 × non-embedding parameters (every layer)
    attention_per_context: float  # 4 × hidden × layers: scores and values, per token of context
    logits_per_token: float  # 2 × vocabulary × hidden: the output layer, where a text task needs logits


def backbone_shape(name: str) -> Shape:
    backbone = load_backbone(name)
    model, cfg = backbone.model, backbone.model.config
    embedding = model.get_input_embeddings().weight.numel()
    params = sum(p.numel() for p in model.parameters()) - embedding
    layers, hidden = backbone.num_layers, cfg.hidden_size
    return Shape(layers, 2.0 * params, 4.0 * hidden * layers, 2.0 * embedding)


@dataclass(frozen=True)
class Passes:
    """One job's work in forwards of the adapted layers: prompts (at ``tokens``) and generated tokens."""

    prompts: float  # forward-equivalents through the adapted layers
    refits: float  # of which the ridge head's refits
    generated: float  # decoded tokens (text tasks)
    logit_tokens: float  # tokens whose logits are computed: training responses (×3 for backward), decoded ones
    tokens: int  # tokens a prompt is counted at
    depth: float  # share of the layers a pass runs through


def evaluations(rounds: int, every: int) -> int:
    """Rounds evaluated: every ``every``-th and always the last."""
    return len(set(range(every, rounds + 1, every)) | {rounds})


def count_passes(cfg: RunConfig, sizes: dict[str, int], num_clients: int, num_layers: int) -> Passes:
    fed, train = cfg.federation, cfg.train
    per_round = sample_size(participation_rate(fed.fraction, fed.clients_per_round, num_clients), num_clients)
    n_train, n_val, n_test = sizes["train"], sizes["val"], sizes["test"]
    text = DATASETS[cfg.dataset].kind == "text"
    start = 0.0 if text or train.head_start != "ridge" else n_train + n_val
    # a round's refits: two passes over the sampled clients' training rows (their expected share)
    refit = 0.0 if text or train.head_update != "ridge" else 2.0 * per_round / num_clients * n_train
    steps = 3.0 * per_round * train.steps * train.batch_size
    evals = evaluations(cfg.rounds, fed.eval_every)
    each = n_val + (n_test if fed.test_rounds == "all" else 0)
    scored = evals * each + (2 * n_test if fed.test_rounds == "chosen" else 0)
    generated = logit_tokens = 0.0
    if text:  # a response is counted at the mean generation budget
        mean_new = float(np.mean(list(cfg.generation.max_new_tokens.values())))
        generated = scored * mean_new
        logit_tokens = cfg.rounds * steps * mean_new + generated
    layers = cfg.adapter.layers
    depth = 1.0 if layers == "all" else (layers if isinstance(layers, int) else len(layers)) / num_layers
    prompts = start + cfg.rounds * (refit + steps) + scored
    return Passes(prompts, cfg.rounds * refit, generated, logit_tokens, cfg.data.prompt.max_tokens, depth)


def prompt_flops(shape: Shape, tokens: int) -> float:
    """Forward FLOPs of one prompt through every layer (causal attention: half the square)."""
    return tokens * (shape.flops_per_token + shape.attention_per_context * tokens / 2)


def job_flops(p: Passes, shape: Shape) -> float:
    per_prompt = prompt_flops(shape, p.tokens)
    decode = shape.flops_per_token + shape.attention_per_context * p.tokens
    return p.prompts * p.depth * per_prompt + p.generated * decode + p.logit_tokens * shape.logits_per_token


def split_sizes(cfg: RunConfig) -> tuple[dict[str, int], int]:
    table = load_dataset(cfg.dataset, cfg.data)
    splits = table_splits(table, cfg.data.split)
    parts = configured_partition(table, cfg.data, splits["train"])
    return {k: len(v) for k, v in splits.items()}, len(parts)


def count(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.0f} k"


def human(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="*", type=Path)
    parser.add_argument("--cpu-seconds", type=float, default=0.195, help="measured s a prompt, whole model")
    parser.add_argument("--cpu-tokens", type=int, default=221, help="tokens of the measured prompts")
    parser.add_argument(
        "--set", action="append", default=[], help="override for every job, e.g. train.head_update=adam"
    )
    parser.add_argument("--gpu-tflops", type=float, default=100.0, help="assumed sustained bf16 TFLOPS")
    parser.add_argument("--gpu-step-ms", type=float, default=25.0, help="assumed ms a decoding step of a batch")
    parser.add_argument(
        "--decode-batch", type=int, default=64, help="rows decoded together (the learner's eval batch)"
    )
    args = parser.parse_args()
    suites = args.suites or sorted((ROOT / "configs" / "suites").glob("*-paper.yaml"))
    shapes: dict[str, Shape] = {}
    sizes: dict[str, tuple[dict[str, int], int]] = {}
    print(
        "| suite | dataset | switch sets | jobs | clients | train / val / test rows | full-depth forwards "
        "(refits) | generated tokens | PFLOP | a job on this CPU | a job on one GPU (assumed) | these jobs on it | "
        "frozen prefix on this CPU (once) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for path in suites:
        suite = load_suite(path, args.set)
        # jobs that cost the same (same dataset and passes) share a row: their switch sets are listed
        groups: dict[tuple[str, Passes], tuple[int, dict[str, int], Shape, list[str]]] = {}
        for job in suite.jobs:
            cfg = job.config
            if cfg.backbone not in shapes:
                shapes[cfg.backbone] = backbone_shape(cfg.backbone)
            data_key = cfg.data.model_dump_json() + cfg.dataset
            if data_key not in sizes:
                sizes[data_key] = split_sizes(cfg)
            n, clients = sizes[data_key]
            shape = shapes[cfg.backbone]
            passes = count_passes(cfg, n, clients, shape.layers)
            groups.setdefault((job.label.dataset, passes), (clients, n, shape, []))[3].append(job.label.switches)
        for (dataset, passes), (clients, n, shape, switches) in groups.items():
            flops = job_flops(passes, shape)
            cpu_rate = args.cpu_seconds / prompt_flops(shape, args.cpu_tokens)  # s a FLOP, measured
            # decoding is latency-bound on a GPU: a step of ``--decode-batch`` rows costs ``--gpu-step-ms``
            gpu = flops / (args.gpu_tflops * 1e12) + passes.generated / args.decode_batch * args.gpu_step_ms / 1e3
            rows = sum(n.values()) * (1 - passes.depth) * prompt_flops(shape, passes.tokens)
            prefix = human(rows * cpu_rate) if passes.depth < 1 else "–"
            # a text job's CPU time is not FLOP-bound (decoding latency): its price is a floor (RESULTS: 20x)
            cpu = ("≥ " if passes.generated else "") + human(flops * cpu_rate)
            names = sorted(set(switches))
            shown = ", ".join(names) if len(names) <= 3 else f"{len(names)} ({names[0]}, …)"
            print(
                f"| {suite.config.name} | {dataset} | {shown} | {len(switches)} | {clients} | "
                f"{n['train']:,} / {n['val']:,} / {n['test']:,} | {count(passes.prompts * passes.depth)} "
                f"({count(passes.refits * passes.depth)}) | "
                f"{count(passes.generated)} | {flops / 1e15:.2g} | {cpu} | {human(gpu)} | "
                f"{human(gpu * len(switches))} | {prefix} |",
                flush=True,
            )
    print(
        f"\nCPU: {args.cpu_seconds} s a {args.cpu_tokens}-token prompt through the whole model, scaled by FLOPs; "
        f"GPU: {args.gpu_tflops:.0f} TFLOPS sustained and {args.gpu_step_ms:.0f} ms a decoding step of "
        f"{args.decode_batch} rows (assumed, not measured). On the CPU a generated token is priced as one forward "
        "(decoding on a CPU is slower than its FLOPs)."
    )


if __name__ == "__main__":
    main()
