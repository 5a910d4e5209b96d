"""What one greedy decoding step of the whole backbone costs on this machine (issue 44). Not a test.

A text task's evaluation generates each client's rows per task, so its batches are a few rows and its time is
decoding steps, not FLOPs: one token per row through every layer, a few matrix-vector products a layer. This
times the prompt's prefill and the mean step after it, by dtype, batch and thread count, with HF ``generate``
and its KV cache (what `AdaptedLM.generate` runs), on random token ids (the time does not depend on them).

    python benchmarks/decode_step.py                       # threads 1, batches 1 4 16, fp32 and bf16
    python benchmarks/decode_step.py --threads 2 --prompt 200 --steps 32
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import date

import torch

from fedloom.backbone.loading import load_backbone
from fedloom.runs.rundir import environment


def seconds(model: torch.nn.Module, ids: torch.Tensor, new: int) -> float:
    """Wall seconds of a greedy generation of exactly ``new`` tokens after ``ids``."""
    t = time.perf_counter()
    with torch.no_grad():
        model.generate(  # type: ignore[operator]
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
            do_sample=False, pad_token_id=0,
        )  # fmt: skip
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--prompt", type=int, default=200, help="prompt tokens a row")
    parser.add_argument("--steps", type=int, default=32, help="decoding steps timed after the first token")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    rows = []
    for dtype in args.dtypes:
        model = load_backbone(args.backbone, dtype=dtype).model.eval()
        for batch in args.batches:
            ids = torch.randint(100, 40_000, (batch, args.prompt), generator=generator)
            seconds(model, ids, 4)  # warm-up
            prefill = seconds(model, ids, 1)  # the prompt's pass and the first token
            total = seconds(model, ids, args.steps + 1)
            row = {"dtype": dtype, "batch": batch, "prefill_ms": 1e3 * prefill,
                   "step_ms": 1e3 * (total - prefill) / args.steps}  # fmt: skip
            rows.append(row)
            print(f"{dtype:9s} batch {batch:3d}: prefill {row['prefill_ms']:7.0f} ms, step {row['step_ms']:6.1f} ms",
                  flush=True)  # fmt: skip
    print(json.dumps({"date": date.today().isoformat(), "threads": args.threads, "prompt": args.prompt,
                      "environment": environment(), "rows": rows}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
