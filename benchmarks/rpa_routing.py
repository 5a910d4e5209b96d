"""RPA routing overhead at SmolLM2 scale (issue 5). Not a test.

    python benchmarks/rpa_routing.py                 # routing inside one client's local update
    python benchmarks/rpa_routing.py --projections   # Rademacher blocks vs the structured SRHT alone

LoRA r=8 on q_proj and v_proj of all 30 layers (d = 460,800 adapter parameters), M = 4, q = 256,
E = 3 residual steps of batch 16 on the default synthetic market (the prefix cache is off: the
lowest adapted layer is 0). One client's local update, three times; reported separately:
projection + scores + route update, the calibration gradient (one extra forward+backward on 16
rows), and the residual training. Also the projection alone and its peak block memory.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import date
from pathlib import Path

import torch

from fedloom.algorithms.base import LocalContext
from fedloom.algorithms.registry import build_algorithm
from fedloom.algorithms.rpa.projection import BLOCK, project
from fedloom.runs.config import load_config
from fedloom.runs.methods import method_context
from fedloom.runs.workspace import prepare_workspace

D_SMOLLM2 = 460_800  # LoRA r=8 on q_proj and v_proj of all 30 layers


def compare_projections(d: int = D_SMOLLM2, q: int = 256, pairs: int = 20) -> dict:
    """Seconds per projection of one d-vector (best of 3) and the cosine error over random pairs
    with known cosines, for each public projection kind at the same q."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(d, generator=g)
    vectors = [base + torch.randn(d, generator=g) * s for s in torch.linspace(0.2, 3.0, pairs).tolist()]
    out = {}
    for kind in ("rademacher", "srht"):
        seconds = []
        for _ in range(3):
            t0 = time.perf_counter()
            project(vectors[0], 0, q, kind)
            seconds.append(time.perf_counter() - t0)
        projected = [project(v, 0, q, kind) for v in vectors]
        errors = [abs(float(torch.cosine_similarity(vectors[i], vectors[j], 0) -
                            torch.cosine_similarity(projected[i], projected[j], 0)))
                  for i in range(pairs) for j in range(i + 1, pairs)]  # fmt: skip
        out[kind] = {"seconds": min(seconds), "cosine_error_mean": sum(errors) / len(errors),
                     "cosine_error_max": max(errors)}  # fmt: skip
    return {"d": d, "q": q, "pairs": pairs * (pairs - 1) // 2, **out}


def main() -> None:
    if "--projections" in sys.argv:
        result = {"date": str(date.today()), "command": "python benchmarks/rpa_routing.py --projections",
                  **compare_projections()}  # fmt: skip
        print(json.dumps(result, indent=1))
        Path(f"benchmarks/results/rpa-projections-{result['date']}.json").write_text(json.dumps(result, indent=2))
        return
    cfg = load_config("configs/default.yaml", {"method": "rpa"},
                      ["adapter.layers=all", "train.steps=3", "data.synthetic.days=10"])  # fmt: skip
    ws = prepare_workspace(cfg)
    layout = ws.lm.layout.slot()
    algo = build_algorithm("rpa", method_context(cfg, layout))
    server = algo.init_server(ws.shared_init, list(ws.learners))
    cid, learner = next(iter(ws.learners.items()))
    download = algo.configure(server, [cid], 1)[cid]
    state = algo.init_client(ws.shared_init, learner, torch.Generator().manual_seed(0))
    runs = []
    for k in range(3):
        update = algo.local_update(download, state, LocalContext(learner, 1, torch.Generator().manual_seed(k)))
        runs.append(
            {key: update.metrics[key] for key in ("routing_seconds", "calibration_seconds", "residual_seconds")}
        )
    v = torch.randn(layout.numel)
    t0 = time.perf_counter()
    project(v, 0, 256)
    result = {
        "date": str(date.today()),
        "d": layout.numel,
        "runs": runs,
        "projection_seconds": time.perf_counter() - t0,
        "projection_block_mb": 256 * BLOCK * 4 / 1e6,
        "routing_share_of_residual_training": [r["routing_seconds"] / r["residual_seconds"] for r in runs],
    }
    print(json.dumps(result, indent=1))
    Path("benchmarks/results").mkdir(parents=True, exist_ok=True)
    Path(f"benchmarks/results/rpa-routing-{result['date']}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
