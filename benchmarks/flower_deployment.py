"""Per-round overhead of a real local Flower deployment, with and without node workers. Not a test.

    python benchmarks/flower_deployment.py [--config configs/default.yaml] [--rounds 3]

One SuperLink and one SuperNode per client on 127.0.0.1 (tests/integration/cluster.py), the fedloom
app submitted with ``flwr run``, FedAvg with one client per round. Per round, ``seconds.local`` in
metrics.jsonl is the wall time of the TRAIN exchange as the server sees it (Flower transport, the
ClientApp process, the client's work); the work itself is the client's own round time measured in
the run with node workers (its workspace already loaded). Overhead = local / work − 1, per round;
the first round (which loads the worker's workspace) is reported but left out of the summary.
Results → benchmarks/results/flower-deployment-DATE.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import date
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.cluster import Cluster

from fedloom.runs.config import dump_config, load_config
from fedloom.runs.workspace import prepare_workspace


def deployed_rounds(cfg, nodes: int, workers: bool, root: Path) -> list[dict]:
    cluster = Cluster(root, nodes, tuple(range(nodes)) if workers else (), shared_worker=True)
    cluster.start()
    try:
        cfg_path, out = root / "run.yaml", root / "run"
        cfg_path.write_text(dump_config(cfg))
        cluster.flwr_run(cfg_path, out)
    finally:
        cluster.stop()
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    overrides = [f"rounds={args.rounds}", "method=fedavg", "federation.clients_per_round=1",
                 f"federation.eval_every={args.rounds}"]  # fmt: skip
    cfg = load_config(args.config, None, overrides)
    nodes = len(prepare_workspace(cfg).learners)  # also warms the on-disk caches every node reads
    logs = {}
    for workers in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            logs[workers] = deployed_rounds(cfg, nodes, workers, Path(tmp))
    rows = []
    for plain, relayed in zip(logs[False], logs[True], strict=True):
        (cid,) = relayed["train"]
        work = relayed["train"][cid]["seconds"]
        rows.append({"round": relayed["round"], "client": cid, "work": work,
                     "local_no_worker": plain["seconds"]["local"], "local_worker": relayed["seconds"]["local"],
                     "overhead_no_worker": plain["seconds"]["local"] / work - 1,
                     "overhead_worker": relayed["seconds"]["local"] / work - 1})  # fmt: skip
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()}))
    later = rows[1:] or rows
    summary = {k: float(np.median([r[k] for r in later])) for k in ("work", "overhead_no_worker", "overhead_worker")}
    result = {"command": "python benchmarks/flower_deployment.py " + " ".join(sys.argv[1:]), "date": str(date.today()),
              "config": args.config, "overrides": overrides, "nodes": nodes, "rounds": rows,
              "median_after_round_1": summary}  # fmt: skip
    path = Path(__file__).parent / "results" / f"flower-deployment-{date.today()}.json"
    path.write_text(json.dumps(result, indent=2))
    print(
        f"median overhead per round (rounds ≥ 2): no worker {summary['overhead_no_worker']:.0%}, "
        f"node workers {summary['overhead_worker']:.0%} of a {summary['work']:.2f} s round → {path}"
    )


if __name__ == "__main__":
    main()
