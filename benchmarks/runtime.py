"""Runtime overhead and memory versus the number of clients (issue: simulation runtime). Not a test.

    python benchmarks/runtime.py --parts overhead,memory

* overhead: the default SYNTHETIC market on SmolLM2 (adapters on the top 2 layers) split IID over 20
  clients; 2 rounds of FedAvg and of FedEx-LoRA (the heaviest server step: dense residuals); the
  share of each round's wall time spent outside client compute (sampling, wire, byte counting,
  validation, aggregation) — target ≤ 5 %.
* memory: peak RSS (VmHWM) of one FedAvg round over the same rows split IID into 10 vs 100 clients,
  each in a fresh process — target: no growth beyond the clients' adapters and heads.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import date
from pathlib import Path

CHILD = r"""
import json, sys, numpy as np
from fedloom.algorithms.registry import build_algorithm
from fedloom.data.schema import ClientData
from fedloom.runs.config import load_config
from fedloom.runs.workspace import prepare_workspace
from fedloom.runtime.simulation import InProcessRuntime
from fedloom.tasks.learner import Learner
from fedloom.runs.methods import method_context
method, k, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cfg = load_config("configs/default.yaml", {"method": method}, [f"train.steps={steps}", "federation.eval_every=100"])
ws = prepare_workspace(cfg)
one = next(iter(ws.learners.values()))
rows = {s: np.concatenate([l.data.split(s) for l in ws.learners.values()]) for s in ("train", "val", "test")}
perm = {s: np.random.default_rng(0).permutation(r) for s, r in rows.items()}
clients = [ClientData(f"c{i:03d}", *(np.sort(np.array_split(perm[s], k)[i]) for s in ("train", "val", "test")))
           for i in range(k)]
learners = {c.client_id: Learner(ws.lm, one.features, ws.table.targets, ws.table.dates, c) for c in clients}
algo = build_algorithm(method, method_context(cfg, ws.lm.layout.slot()))
hist = InProcessRuntime(algo, learners, cfg.federation, 0).run(ws.shared_init, rounds).history
hwm = int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1])
print(json.dumps({"seconds": [{k: v for k, v in r.seconds.items() if k != "evaluate"} for r in hist],
                  "peak_rss_mb": hwm / 1024}))
"""


def child(method: str, clients: int, rounds: int, steps: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, method, str(clients), str(rounds), str(steps)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="overhead,memory")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    results: dict[str, object] = {"date": str(date.today())}
    if "memory" in args.parts:
        results["memory_peak_rss_mb"] = {k: child("fedavg", k, 1, 2)["peak_rss_mb"] for k in (10, 100)}
        print(json.dumps(results["memory_peak_rss_mb"]), flush=True)
    if "overhead" in args.parts:
        overhead = {}
        for method in ("fedavg", "fedex-lora"):
            rounds = child(method, 20, 2, 8)["seconds"]
            share = [r["server"] / (r["server"] + r["local"]) for r in rounds]
            overhead[method] = {"rounds": rounds, "server_share": share}
            print(method, json.dumps(overhead[method]), flush=True)
        results["overhead_20_clients"] = overhead
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"runtime-{results['date']}.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
