"""``torch.compile`` on CPU for fedloom's training step, eager vs compiled (issue 21). Not a test.

The step is what `Learner.fit` runs per mini-batch on SmolLM2-135M: the adapted decoder layers from
cached prefix states, mean pooling, a linear head, MSE, backward into the LoRA tensors. Measured on one
fixed batch shape (16 × 64 tokens; real batches vary in length, which makes a compiled graph recompile
or run with dynamic shapes) in the dtype ``model.dtype: auto`` picks here, with adapters on the top 2
layers and on all 30 (the whole stack from the embeddings). Reports the compile time, the median step
time of each and the speed-up.

    python benchmarks/compile.py --out benchmarks/results/compile-DATE.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from fedloom.backbone.loading import load_backbone
from fedloom.backbone.lora import Binding, LoraSpec
from fedloom.backbone.model import AdaptedLM, masked_mean


def measure(layers: int, dtype: str, repeats: int) -> dict[str, float]:
    backbone = load_backbone("smollm2-135m", dtype=dtype)
    n = backbone.num_layers
    lm = AdaptedLM(backbone, LoraSpec(rank=8, alpha=16, layers=tuple(range(n - layers, n))))
    g = torch.Generator().manual_seed(0)
    params = {k: v.requires_grad_(True) for k, v in lm.layout.init_slot(g).items()}
    for key in params:  # B = 0 gives A no gradient: make both factors live
        params[key].data += 0.01 * torch.randn(params[key].shape, generator=g)
    head = torch.randn(lm.hidden_size, generator=g, requires_grad=True)
    ids = torch.randint(0, 49152, (16, 64), generator=g)
    mask = torch.ones(16, 64, dtype=torch.long)
    prefix = lm.prefix(ids, mask)
    target = torch.randn(16, generator=g)

    def step() -> torch.Tensor:
        hidden = lm.hidden_from_prefix(prefix, mask, Binding(params, train=True))
        loss = ((masked_mean(hidden, mask).float() @ head) - target).square().mean()
        loss.backward()
        return loss

    def timed(fn: Callable[[], object]) -> list[float]:
        out = []
        for _ in range(repeats):
            started = time.perf_counter()
            fn()
            out.append(time.perf_counter() - started)
        return out

    step()  # warm-up
    eager = timed(step)
    compiled = torch.compile(step)
    started = time.perf_counter()
    compiled()
    compile_seconds = time.perf_counter() - started
    fast = timed(compiled)
    eager_again = timed(step)  # A/B/A: the machine did not change under us
    e, c = statistics.median(eager + eager_again), statistics.median(fast)
    return {"eager_ms": e * 1e3, "compiled_ms": c * 1e3, "speedup": e / c, "compile_seconds": compile_seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 30])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = {}
    for layers in args.layers:
        results[f"top {layers}"] = measure(layers, args.dtype, args.repeats)
        torch._dynamo.reset()
        print(layers, {k: round(v, 2) for k, v in results[f"top {layers}"].items()}, flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {"results": results, "dtype": args.dtype, "torch": torch.__version__,
                  "threads": torch.get_num_threads(), "machine": platform.processor(),
                  "date": time.strftime("%Y-%m-%d")}  # fmt: skip
        args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
