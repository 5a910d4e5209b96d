"""RPA routing overhead at SmolLM2 scale (issue 5). Not a test.

    python benchmarks/rpa_routing.py

LoRA r=8 on q_proj and v_proj of all 30 layers (d = 460,800 adapter parameters), M = 4, q = 256,
E = 3 residual steps of batch 16 on the default synthetic market (the prefix cache is off: the
lowest adapted layer is 0). One client's local update, three times; reported separately:
projection + scores + route update, the calibration gradient (one extra forward+backward on 16
rows), and the residual training. Also the projection alone and its peak block memory.
"""

from __future__ import annotations

import json
import time
from datetime import date
from pathlib import Path

import torch

from fedloom.algorithms.base import LocalContext
from fedloom.algorithms.registry import build_algorithm
from fedloom.algorithms.rpa.projection import BLOCK, project
from fedloom.experiments.config import load_config
from fedloom.experiments.runner import prepare_workspace


def main() -> None:
    cfg = load_config("configs/default.yaml", {"method": "rpa"},
                      ["adapter.layers=all", "train.steps=3", "data.synthetic.days=10"])  # fmt: skip
    ws = prepare_workspace(cfg)
    layout = ws.lm.layout.slot()
    algo = build_algorithm("rpa", cfg.build_context(layout))
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
