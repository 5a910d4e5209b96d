"""FedWeave inference and memory on SmolLM2 (issue: FedWeave). Not a test.

    python benchmarks/fedweave.py [--batch 16] [--tokens 128] [--repeats 5]

* latency: one forward of the adapted layers from the cached prefix (what evaluation and every
  generated token pay), batch × tokens, with M experts bound as a soft mixture (every expert
  computed), top-2 and sparse top-1 (only the chosen expert computed); adapters on the top 2 layers
  (the default) and on all 30 layers (where the mixture's share of compute is largest); M = 2, 4, 6.
* memory: bytes of the M expert tensors in the adapter bank against M × one adapter: O(M·adapter).

Expert values and routing weights are random (latency does not depend on them). → results/fedweave-DATE.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import date
from pathlib import Path

import torch

from fedloom.algorithms.fedweave.router import init_router, route
from fedloom.backbone.loading import load_backbone
from fedloom.backbone.lora import Binding, LoraSpec
from fedloom.backbone.model import AdaptedLM


def forward_ms(lm: AdaptedLM, binding: Binding | None, x: torch.Tensor, mask: torch.Tensor, repeats: int) -> float:
    with torch.no_grad():
        lm.pooled_from_prefix(x, mask, binding)  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            lm.pooled_from_prefix(x, mask, binding)
            times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    g = torch.Generator().manual_seed(0)
    rows = []
    for layers in (2, 30):
        backbone = load_backbone("smollm2-135m", "float32")  # a fresh model per adapter bank
        spec = LoraSpec(
            8, 16.0, 0.0, ("q_proj", "v_proj"), tuple(range(backbone.num_layers - layers, backbone.num_layers))
        )
        lm = AdaptedLM(backbone, spec)
        layout = lm.layout.slot()
        x = torch.randn(args.batch, args.tokens, lm.hidden_size, generator=g)
        mask = torch.ones(args.batch, args.tokens, dtype=torch.long)
        base = forward_ms(lm, None, x, mask, args.repeats)
        for m in (2, 4, 6):
            experts = {}
            for e in range(m):
                experts.update({k.replace(".default.", f".e{e}."): 0.01 * torch.randn(s, generator=g)
                                for k, s in layout.entries})  # fmt: skip
            weights = route(
                init_router(lm.hidden_size, m, 512, g), torch.randn(args.batch, lm.hidden_size, generator=g)
            )
            slots = tuple(f"e{e}" for e in range(m))
            row = {"adapted_layers": layers, "experts": m, "base_ms": base,
                   "expert_bytes": sum(v.numel() * v.element_size() for v in experts.values()),
                   "one_adapter_bytes": sum(v.numel() * v.element_size() for v in experts.values()) // m}  # fmt: skip
            for name, k in (("soft", None), ("top2", 2), ("top1", 1)):
                row[f"{name}_ms"] = forward_ms(lm, Binding(experts, slots, weights, top_k=k), x, mask, args.repeats)
            rows.append(row)
            print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}))
    result = {"command": "python benchmarks/fedweave.py", "date": str(date.today()), "batch": args.batch,
              "tokens": args.tokens, "rows": rows}  # fmt: skip
    path = Path(__file__).parent / "results" / f"fedweave-{date.today()}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"→ {path}")


if __name__ == "__main__":
    main()
