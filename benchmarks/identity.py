"""Behaviour-identity check for refactors: run a fixed grid through the CLI, then compare two grids file by file.

    python benchmarks/identity.py run OUT [--default]    # every federated method on a tiny synthetic run,
                                                         # FedIT / FedWeave / FedLEASE on the tiny four-task
                                                         # mix, structured references pooled / local /
                                                         # federated, the smoke suite (+ configs/default.yaml
                                                         # with --default)
    python benchmarks/identity.py compare BEFORE AFTER   # every file of every run folder

Two grids are identical when both hold the same files and each file matches: JSON (summary.json, routes.json,
state.json, …) and JSON lines (metrics.jsonl) once the keys holding wall-clock times or paths are dropped (and
state.json's global RNG states, never seeded); Markdown once its tables' ``wall s`` column is dropped; every
other file (CSV, YAML, safetensors, PNG) byte for byte. Not compared: env.json (versions,
machine, timings), the run marker (the PID holding it), the digests of files that hold timings (state.sha256,
LATEST), logs. To check the code of another commit, run it from a worktree with
``PYTHONPATH=WORKTREE/src`` (the subprocesses import fedloom from there).
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
REFERENCES = "linear,lightgbm,mlp"  # one-pass references on the synthetic market's covariates
VOLATILE = ("seconds", "run_dir", "wall", "elapsed")  # keys holding timings or paths
# exact keys that differ between any two runs of the same code: state.json's global numpy / Python RNG states
# (fedloom never seeds nor draws from them); suite.jsonl's log path and clock time
UNSEEDED = {"rng", "log", "time"}
UNORDERED = {"target_modules"}  # PEFT writes this set in hash order (PYTHONHASHSEED): compared sorted
SKIPPED = {"env.json", ".fedloom-run", "state.sha256", "LATEST", "logs"}
JSON_SUFFIXES = (".json", ".jsonl")


def _fedloom(*args: str) -> None:
    cmd = [sys.executable, "-m", "fedloom.cli", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def run(out: Path, default: bool) -> None:
    from fedloom.algorithms.registry import METHODS

    sets = [a for s in TINY for a in ("--set", s)]
    _fedloom("compare", "--methods", ",".join(sorted(METHODS)), "--out", str(out / "tiny"), *sets, "--overwrite")
    text = [a for s in TEXT for a in ("--set", s)]
    _fedloom("compare", "--methods", "fedit,fedweave,fedlease", "--out", str(out / "text"), *sets, *text,
             "--overwrite")  # fmt: skip
    for mode in ("pooled", "local"):
        _fedloom("compare", "--methods", REFERENCES, "--out", str(out / f"references-{mode}"), *sets,
                 "--set", f"references.mode={mode}", "--overwrite")  # fmt: skip
    _fedloom("run", "--method", "mlp", "--out", str(out / "references-federated"), *sets,
             "--set", "references.mode=federated", "--overwrite")  # fmt: skip
    suites = Path(__file__).resolve().parents[1] / "configs" / "suites"
    _fedloom("suite", str(suites / "smoke.yaml"), "--out", str(out / "suite"), "--workers", "1")
    if default:
        _fedloom("compare", "--methods", "local,fedavg,rpa", "--config", "configs/default.yaml",
                 "--out", str(out / "default"), "--overwrite")  # fmt: skip


def _strip(value: object) -> object:
    if isinstance(value, dict):
        kept = {k: v for k, v in value.items() if not any(t in k for t in VOLATILE) and k not in UNSEEDED}
        return {k: sorted(v) if k in UNORDERED and isinstance(v, list) else _strip(v) for k, v in kept.items()}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _files(root: Path) -> dict[Path, Path]:
    return {p.relative_to(root): p for p in root.rglob("*")
            if p.is_file() and not SKIPPED & set(p.relative_to(root).parts)}  # fmt: skip


def _untimed(markdown: str) -> str:
    """A Markdown report without its tables' wall-time column (``wall s``)."""
    lines, drop = [], None
    for line in markdown.splitlines():
        cells = line.split("|")
        if line.startswith("|") and "wall s" in (c.strip() for c in cells):
            drop = [c.strip() for c in cells].index("wall s")
        elif not line.startswith("|"):
            drop = None
        lines.append("|".join(c for i, c in enumerate(cells) if i != drop) if drop is not None else line)
    return "\n".join(lines)


def _same(a: Path, b: Path) -> bool:
    if a.suffix == ".md":
        return _untimed(a.read_text()) == _untimed(b.read_text())
    if a.suffix not in JSON_SUFFIXES:
        return a.read_bytes() == b.read_bytes()
    if a.suffix == ".jsonl":
        x, y = ([_strip(json.loads(line)) for line in p.read_text().splitlines() if line.strip()] for p in (a, b))
    else:
        x, y = (_strip(json.loads(p.read_text())) for p in (a, b))
    return json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True)


def compare(before: Path, after: Path) -> int:
    a, b = _files(before), _files(after)
    if a.keys() != b.keys():
        print(f"file sets differ: only before {sorted(map(str, a.keys() - b.keys()))[:20]}, "
              f"only after {sorted(map(str, b.keys() - a.keys()))[:20]}")  # fmt: skip
        return 1
    different = [rel for rel in sorted(a) if not _same(a[rel], b[rel])]
    for rel in different:
        print(f"DIFFERENT  {rel}")
    runs = {rel.parent for rel in a if rel.name == "summary.json"}
    print(f"{len(a) - len(different)} of {len(a)} files identical, in {len(runs)} run folders")
    return 1 if different else 0


if __name__ == "__main__":
    verb, *rest = sys.argv[1:]
    if verb == "run":
        run(Path(rest[0]), "--default" in rest)
    elif verb == "compare":
        sys.exit(compare(Path(rest[0]), Path(rest[1])))
    else:
        sys.exit(__doc__)
