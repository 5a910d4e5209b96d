"""The multi-slot LoRA path, per slot vs fused: one adapted linear layer at SmolLM2-135M's q_proj shape
(576 → 576), a soft mixture of S slots of rank r (FedWeave's experts, FedDPA's global + local pair),
forward + backward on a training batch. "per slot" runs each slot on its own and sums them (what
`LoraLinear` did before it fused the slots: S dropouts, 2·S small matmuls); "fused" is `LoraLinear`
today (one dropout, one ``x @ A`` and one ``@ B`` over the stacked slots). Reports the median time per
step of each, interleaved, and the PyTorch profiler's top operators by self CPU time for both.
Not a test.

    python benchmarks/lora_slots.py --slots 4 --rank 8 --tokens 1024 --out benchmarks/results/lora-slots-DATE.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from fedloom.backbone.lora import Binding, LoraLinear, LoraSpec, _BindingSlot, lora_a_key, lora_b_key


def build(d: int, slots: int, rank: int) -> tuple[LoraLinear, _BindingSlot, dict[str, torch.Tensor]]:
    cell = _BindingSlot()
    layer = LoraLinear(nn.Linear(d, d).requires_grad_(False), "m", LoraSpec(rank=rank, alpha=2 * rank), cell)
    g = torch.Generator().manual_seed(0)
    params = {}
    for s in range(slots):
        params[lora_a_key("m", f"e{s}")] = (torch.randn(rank, d, generator=g) / d**0.5).requires_grad_(True)
        params[lora_b_key("m", f"e{s}")] = (torch.randn(d, rank, generator=g) / rank).requires_grad_(True)
    return layer, cell, params


def step(layer: LoraLinear, cell: _BindingSlot, params: dict, x: torch.Tensor, w: torch.Tensor, fused: bool) -> None:
    slots = tuple(sorted({k.split(".")[-2] for k in params}))
    if fused:
        cell.binding = Binding(params, slots=slots, weights=w, train=True)
        y = layer(x)
    else:  # the former path: the base once, then each slot alone (its own dropout), weighted and summed
        binding = Binding(params, slots=slots, weights=w, train=True)
        y = layer.base(x)
        for k, s in enumerate(slots):
            y = y + w[:, k, None, None] * layer._slot_output(x, s, binding)
    y.square().mean().backward()
    for p in params.values():
        p.grad = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=1024, help="batch × sequence length (16 × 64)")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    layer, cell, params = build(576, args.slots, args.rank)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, args.tokens // 16, 576, generator=g)
    w = torch.softmax(torch.randn(16, args.slots, generator=g), dim=1)
    times: dict[str, list[float]] = {"per slot": [], "fused": []}
    for _ in range(3):  # warm-up
        step(layer, cell, params, x, w, True), step(layer, cell, params, x, w, False)
    for _ in range(args.repeats):
        for name, fused in (("per slot", False), ("fused", True)):
            started = time.perf_counter()
            step(layer, cell, params, x, w, fused)
            times[name].append(time.perf_counter() - started)
    kernels = {}
    for name, fused in (("per slot", False), ("fused", True)):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(10):
                step(layer, cell, params, x, w, fused)
        table = prof.key_averages()
        top = sorted(table, key=lambda e: e.self_cpu_time_total, reverse=True)[:8]
        kernels[name] = [{"op": e.key, "calls": e.count, "self_ms": round(e.self_cpu_time_total / 1e3 / 10, 3)}
                         for e in top]  # fmt: skip
        print(f"\n{name}: top operators by self CPU time, per step")
        print(table.table(sort_by="self_cpu_time_total", row_limit=8))
    medians = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print({k: f"{v:.2f} ms" for k, v in medians.items()}, f"speed-up {medians['per slot'] / medians['fused']:.2f}x")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {"args": vars(args) | {"out": str(args.out)}, "median_ms": medians, "kernels": kernels,
                  "machine": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
                  "torch": torch.__version__}  # fmt: skip
        args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
