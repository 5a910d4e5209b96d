"""Behaviour-identity check for refactors: run a fixed grid through the CLI, then compare two grids.

    python benchmarks/identity.py run OUT [--default]    # every method on a tiny synthetic run
                                                         # (+ FedWeave/FedLEASE on the tiny four-task mix,
                                                         #  + configs/default.yaml with --default)
    python benchmarks/identity.py compare BEFORE AFTER   # summary.json of each run, timings removed

Two grids are identical when every summary.json (metrics, final metrics, per-client metrics,
communication, alignment, portfolio...) matches exactly once wall-clock fields are dropped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SHARED_DATA = Path(os.environ.get("FEDLOOM_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data")
TINY = [
    "backbone=tiny-random-llama", "rounds=2", "train.steps=2", "train.batch_size=4", "data.synthetic.sectors=3",
    "data.synthetic.stocks_per_sector=3", "data.synthetic.days=15", "data.feature_cache=false",
    "adapter.layers=2", "adapter.rank=4", "adapter.alpha=8", "federation.fraction=0.67",
    "methods.fedweave.router_hidden=16", f"data.data_dir={SHARED_DATA}",
]  # fmt: skip
TEXT = [
    "dataset=multitask", "data.text.train_size=12", "data.text.val_size=2",
    "data.text.test_size=3", "data.num_clients=3", "prompt.max_tokens=40",
    "generation.max_new_tokens={gsm8k: 2, arc_challenge: 2, tweeteval: 2, jfleg: 2}",
]  # fmt: skip
VOLATILE = ("seconds", "run_dir")  # keys holding timings or paths


def _fedloom(*args: str) -> None:
    cmd = [sys.executable, "-m", "fedloom.cli", *args, "--overwrite"]  # a rerun replaces its own runs
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def run(out: Path, default: bool) -> None:
    listing = subprocess.run(
        [sys.executable, "-m", "fedloom.cli", "methods"], check=True, capture_output=True, text=True
    )
    names = [line.split()[0] for line in listing.stdout.splitlines() if line.strip()]
    sets = [a for s in TINY for a in ("--set", s)]
    _fedloom("compare", "--methods", ",".join(names), "--out", str(out / "tiny"), *sets)
    text = [a for s in TEXT for a in ("--set", s)]
    _fedloom("compare", "--methods", "fedit,fedweave,fedlease", "--out", str(out / "text"), *sets, *text)
    if default:
        _fedloom("compare", "--methods", "local,fedavg,rpa", "--config", "configs/default.yaml",
                 "--out", str(out / "default"))  # fmt: skip


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not any(t in k for t in VOLATILE)}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def compare(before: Path, after: Path) -> int:
    a = {p.relative_to(before): p for p in before.rglob("summary.json")}
    b = {p.relative_to(after): p for p in after.rglob("summary.json")}
    if a.keys() != b.keys():
        print(f"run sets differ: only before {sorted(a.keys() - b.keys())}, only after {sorted(b.keys() - a.keys())}")
        return 1
    bad = 0
    for rel in sorted(a):
        x, y = (_strip(json.loads(p.read_text())) for p in (a[rel], b[rel]))
        same = json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True)
        bad += not same
        print(f"{'identical' if same else 'DIFFERENT'}  {rel.parent}")
        if not same:
            assert isinstance(x, dict) and isinstance(y, dict)
            for key in sorted(x.keys() | y.keys()):
                if json.dumps(x.get(key), sort_keys=True) != json.dumps(y.get(key), sort_keys=True):
                    print(f"    differs in {key!r}")
    print(f"{len(a) - bad} of {len(a)} summaries identical")
    return 1 if bad else 0


if __name__ == "__main__":
    verb, *rest = sys.argv[1:]
    if verb == "run":
        run(Path(rest[0]), "--default" in rest)
    elif verb == "compare":
        sys.exit(compare(Path(rest[0]), Path(rest[1])))
    else:
        sys.exit(__doc__)
