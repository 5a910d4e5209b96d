"""Backbone throughput and memory (issue: walking skeleton). Not a test: numbers go to RESULTS.md.

    python benchmarks/backbone.py                 # SmolLM2-135M, batch 16 x 128, fp32 and bf16
    python benchmarks/backbone.py --repeats 2     # quicker

Measures tokens/s of (1) the frozen forward, (2) forward+backward with LoRA on the top 2 of 30
layers from token ids, (3) the same from the cached prefix; for fp32 and bf16 frozen weights.
Then peak RSS of one FedAvg round with 2 vs 20 clients on the same rows (one subprocess each).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import torch

from fedloom.backbone.loading import load_backbone
from fedloom.backbone.lora import Binding, LoraSpec
from fedloom.backbone.model import AdaptedLM
from fedloom.runs.rundir import environment

BATCH, TOKENS = 16, 128


def _timed(fn, repeats: int) -> float:
    fn()  # warm-up
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / repeats


def throughput(dtype: str, repeats: int) -> dict[str, float]:
    lm = AdaptedLM(load_backbone("smollm2-135m", dtype), LoraSpec(layers=(28, 29)))
    g = torch.Generator().manual_seed(0)
    params = {k: v.clone().requires_grad_(True) for k, v in lm.layout.init_slot(g).items()}
    for k in params:
        if ".lora_B." in k:
            params[k].data.normal_(0, 0.01, generator=g)
    binding = Binding(params, train=True)
    ids = torch.randint(100, 40000, (BATCH, TOKENS), generator=g)
    mask = torch.ones_like(ids)
    head = torch.randn(lm.hidden_size, generator=g)

    def forward() -> None:
        with torch.no_grad():
            lm.model.model(input_ids=ids, attention_mask=mask)

    def train_full() -> None:
        (lm.pooled(ids, mask, binding) @ head).pow(2).mean().backward()

    prefix = lm.prefix(ids, mask)

    def train_cached() -> None:
        (lm.pooled_from_prefix(prefix, mask, binding) @ head).pow(2).mean().backward()

    n = BATCH * TOKENS
    out = {
        "forward_tok_s": n / _timed(forward, repeats),
        "train_full_tok_s": n / _timed(train_full, repeats),
        "train_cached_tok_s": n / _timed(train_cached, repeats),
    }
    out["cached_speedup"] = out["train_cached_tok_s"] / out["train_full_tok_s"]
    return out


RSS_CHILD = r"""
import sys, numpy as np, torch
from fedloom.algorithms.fedavg import FedAvg
from fedloom.data.schema import ClientData
from fedloom.runs.workspace import prepare_workspace
from fedloom.runtime.rounds import FederationConfig
from fedloom.runtime.simulation import InProcessRuntime
from fedloom.runs.config import load_config
from fedloom.tasks.learner import Learner
k = int(sys.argv[1])
cfg = load_config("configs/default.yaml", None, ["train.steps=2"])
ws = prepare_workspace(cfg)
one = next(iter(ws.learners.values()))
rows = {s: np.concatenate([l.data.split(s) for l in ws.learners.values()]) for s in ("train", "val", "test")}
clients = [ClientData(f"c{i}", *(np.array_split(rows[s], k)[i] for s in ("train", "val", "test"))) for i in range(k)]
learners = {c.client_id: Learner(ws.lm, one.features, ws.table.targets, ws.table.dates, c) for c in clients}
InProcessRuntime(FedAvg(cfg.train), learners, FederationConfig(), 0).run(ws.shared_init, rounds=1)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0]  # ru_maxrss survives exec; VmHWM not
print(int(hwm.split()[1]))
"""


def peak_rss_mb(clients: int) -> float:
    """Peak resident memory (VmHWM) of a child process that runs one FedAvg round."""
    out = subprocess.run([sys.executable, "-c", RSS_CHILD, str(clients)], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parts", default="rss,throughput", help="comma-separated: rss, throughput")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    results: dict[str, object] = {"date": str(date.today()), "batch": BATCH, "tokens": TOKENS}
    if "rss" in parts:  # first: children must not inherit a large parent
        results["peak_rss_mb"] = {k: peak_rss_mb(k) for k in (2, 20)}
        results["rss_ratio_20_vs_2"] = results["peak_rss_mb"][20] / results["peak_rss_mb"][2]  # type: ignore[index]
        print(json.dumps(results["peak_rss_mb"]), flush=True)
    if "throughput" in parts:
        for dtype in ("float32", "bfloat16"):
            results[dtype] = throughput(dtype, args.repeats)
            print(dtype, json.dumps(results[dtype], indent=1), flush=True)
        results["throughput_process_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results["environment"] = environment()
    print(json.dumps({k: v for k, v in results.items() if k != "environment"}, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"backbone-{'-'.join(sorted(parts))}-{results['date']}.json"
    (args.out / name).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
