"""Per-message overhead of a Flower deployment (issue: deployment). Not a test.

    python benchmarks/flower.py [--config configs/default.yaml] [--repeats 3]

A deployed SuperNode starts a new ``flwr-clientapp`` process for every message (landscape.md d.8).
Each repeat runs, in a fresh Python process, what such a process does before and during a TRAIN
message of the default experiment (SmolLM2, FedAvg, default batch and steps, warm on-disk caches):

* start:     interpreter start + importing torch, transformers, flwr and the fedloom ClientApp;
* workspace: loading the backbone from the safetensors cache, the token and feature caches, and
             building the partition (what `node_workspace` does on a message);
* round:     one client's local training round (`client_round`), the work the message is for.

Overhead = (start + workspace) / round; target ≤ 20 %. Results → benchmarks/results/flower-DATE.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
import fedloom.runtime.flower.components  # noqa: F401 - what the ClientApp process imports
from fedloom.algorithms.registry import build_algorithm
from fedloom.experiments.config import load_config
from fedloom.experiments.runner import prepare_workspace
from fedloom.runtime.seeding import generator
from fedloom.runtime.simulation import client_round
t1 = time.perf_counter()
cfg = load_config(sys.argv[1], {"method": "fedavg"})
ws = prepare_workspace(cfg)
t2 = time.perf_counter()
cid = sorted(ws.learners)[0]
algo = build_algorithm("fedavg", cfg.build_context(ws.lm.layout.slot()))
server = algo.init_server(ws.shared_init, sorted(ws.learners))
state = algo.init_client(ws.shared_init, ws.learners[cid], generator(cfg.seed, "init", cid))
download = algo.configure(server, [cid], 1)[cid]
client_round(algo, ws.learners[cid], download, state, cfg.seed, 1)
t3 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "workspace": t2 - t1, "round": t3 - t2,
                  "steps": cfg.train.steps, "batch_size": cfg.train.batch_size}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-c", CHILD, args.config], check=True, capture_output=True)  # warm caches
    runs = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", CHILD, args.config], check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        row = json.loads(out.stdout.strip().splitlines()[-1])
        row["interpreter"] = wall - row["imports"] - row["workspace"] - row["round"]
        row["start"] = row["interpreter"] + row["imports"]
        row["overhead"] = (row["start"] + row["workspace"]) / row["round"]
        runs.append(row)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}))
    best = min(runs, key=lambda r: r["overhead"])
    result = {"command": "python benchmarks/flower.py " + " ".join(sys.argv[1:]), "date": str(date.today()),
              "config": args.config, "runs": runs, "best": best}  # fmt: skip
    path = Path(__file__).parent / "results" / f"flower-{date.today()}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"overhead (start + workspace) / round = {best['overhead']:.1%} → {path}")


if __name__ == "__main__":
    main()
