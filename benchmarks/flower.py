"""Per-message overhead of a Flower deployment (issue: deployment). Not a test.

    python benchmarks/flower.py [--config configs/default.yaml] [--repeats 3]

A deployed SuperNode starts a new ``flwr-clientapp`` process for every message (landscape.md d.8).
Each repeat runs, in a fresh Python process, what such a process does for one TRAIN message of the
default experiment (SmolLM2, FedAvg, default batch and steps, warm on-disk caches), two ways:

* no worker: the process answers itself —
  start (interpreter + importing torch, transformers, flwr and fedloom), workspace (the backbone
  from the safetensors cache, token and feature caches, the partition: what `node_workspace`
  does), round (one client's local round, `client_round`: the work the message is for);
* node worker: the process imports what ``flwr-clientapp`` and the fedloom ClientApp import and
  relays the message to a warm ``fedloom node-worker``; overhead = its wall time minus the
  worker's own time for the round (reported in the reply).

Overhead = everything but the round, over the round; target ≤ 20 %. Flower's own transport (pulling
the message and FAB from the SuperNode, pushing the reply) comes on top in both cases and is not
measured here. Results → benchmarks/results/flower-DATE.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
import fedloom.apps.clientapp  # noqa: F401 - what the ClientApp process imports
from fedloom.algorithms.registry import build_algorithm
from fedloom.runs.config import load_config
from fedloom.runs.workspace import prepare_workspace
from fedloom.seeding import generator
from fedloom.runtime.simulation import client_round
t1 = time.perf_counter()
cfg = load_config(sys.argv[1], {"method": "fedavg"})
ws = prepare_workspace(cfg)
t2 = time.perf_counter()
cid = sorted(ws.learners)[0]
algo = build_algorithm("fedavg", method_context(cfg, ws.lm.layout.slot()))
server = algo.init_server(ws.shared_init, sorted(ws.learners))
state = algo.init_client(ws.shared_init, ws.learners[cid], generator(cfg.seed, "init", cid))
download = algo.configure(server, [cid], 1)[cid]
client_round(algo, ws.learners[cid], download, state, cfg.seed, 1)
t3 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "workspace": t2 - t1, "round": t3 - t2,
                  "steps": cfg.train.steps, "batch_size": cfg.train.batch_size}))
"""


RELAY = r"""
import json, sys, time
t0 = time.perf_counter()
import flwr.supernode.runtime.run_clientapp  # noqa: F401 - what flwr-clientapp imports
from fedloom.apps.clientapp import relay
from fedloom.runtime.flower.relay import decode
from fedloom.runs.methods import method_context
t1 = time.perf_counter()
content = decode(open(sys.argv[2], "rb").read())
reply = relay(sys.argv[1], "train", content, {"partition-id": 0, "state-dir": sys.argv[3]})
t2 = time.perf_counter()
seconds = reply.metric_records["metrics"]["fedloom.seconds"]
print(json.dumps({"imports": t1 - t0, "relayed": t2 - t1, "round": seconds}))
"""


def train_message(config: str, path: Path) -> None:
    """A round-1 TRAIN message of FedAvg for the first client, encoded as the relay sends it."""
    import torch
    from flwr.app import ConfigRecord

    from fedloom.algorithms.registry import build_algorithm
    from fedloom.runs.config import dump_config, load_config
    from fedloom.runs.methods import method_context
    from fedloom.runs.workspace import prepare_workspace
    from fedloom.runtime.flower.node import DOWNLOAD, RUN
    from fedloom.runtime.flower.records import to_recorddict
    from fedloom.runtime.flower.relay import encode

    cfg = load_config(config, {"method": "fedavg"})
    ws = prepare_workspace(cfg)
    ids = sorted(ws.learners)
    algo = build_algorithm("fedavg", method_context(cfg, ws.lm.layout.slot()))
    download = algo.configure(algo.init_server(ws.shared_init, ids), ids[:1], 1)[ids[0]]
    content = to_recorddict(download, torch.bfloat16, DOWNLOAD)
    content[RUN] = ConfigRecord({"round": 1, "config": dump_config(cfg), "run_key": "bench"})
    path.write_bytes(encode(content))


def with_worker(config: str, repeats: int) -> list[dict]:
    """Fresh ClientApp-like processes relaying a TRAIN message to one warm node worker."""
    with tempfile.TemporaryDirectory() as tmp:
        sock, message, state = Path(tmp) / "w.sock", Path(tmp) / "train.bin", Path(tmp) / "state"
        train_message(config, message)
        worker = subprocess.Popen([sys.executable, "-m", "fedloom.cli", "node-worker", "--socket", str(sock)])
        try:
            while not sock.is_socket():
                time.sleep(0.1)
            runs = []
            for i in range(repeats + 1):  # the first message loads the workspace into the worker
                t0 = time.perf_counter()
                args = [sys.executable, "-c", RELAY, str(sock), str(message), str(state / str(i))]
                out = subprocess.run(args, check=True, capture_output=True, text=True)
                row = json.loads(out.stdout.strip().splitlines()[-1])
                row["wall"] = time.perf_counter() - t0
                row["overhead"] = (row["wall"] - row["round"]) / row["round"]
                if i:
                    runs.append(row)
                    print(json.dumps({"worker": {k: round(v, 3) for k, v in row.items()}}))
            return runs
        finally:
            worker.terminate()
            worker.wait(30)


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
    relayed = with_worker(args.config, args.repeats)
    best, best_relayed = (min(r, key=lambda row: row["overhead"]) for r in (runs, relayed))
    result = {"command": "python benchmarks/flower.py " + " ".join(sys.argv[1:]), "date": str(date.today()),
              "config": args.config, "runs": runs, "best": best, "worker_runs": relayed,
              "best_worker": best_relayed}  # fmt: skip
    path = Path(__file__).parent / "results" / f"flower-{date.today()}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"overhead / round: no worker {best['overhead']:.1%}, node worker {best_relayed['overhead']:.1%} → {path}")


if __name__ == "__main__":
    main()
