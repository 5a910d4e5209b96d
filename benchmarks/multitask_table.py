"""The four-task FedWeave benchmark tables (issue 6, seed 002 Tables 1–3) from finished runs. Not a test.

    python benchmarks/multitask_table.py [runs/multitask]

Reads every ``RUNS/seed<k>/<group>/<name>/summary.json`` (configs/multitask.yaml runs: the
baselines, ``moe`` for fedlease / fedweave, ``ablations`` for switched FedWeave / FedLEASE runs) and
prints one row per run name: per-task test scores and teacher-forced losses with their macro
averages (mean ± std over the seeds found), upload MB, and, for FedWeave runs, the alignment audit
against the hidden task labels (local / global purity, NMI, ARI). Re-evaluations of a run's checkpoint
(``fedloom evaluate RUN --set ...``, in ``RUN/evaluations/<overrides>.json``) are rows of their own,
named by run and overrides, without upload.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

TASKS = ("gsm8k", "arc_challenge", "tweeteval", "jfleg")
AUDIT = ("local_purity", "local_nmi", "local_ari", "global_purity", "global_nmi", "global_ari")


def load(runs: Path) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {}
    for path in sorted(runs.glob("seed*/*/*/summary.json")):
        seed = int(path.parents[2].name.removeprefix("seed"))
        out.setdefault(path.parent.name, {})[seed] = json.loads(path.read_text())
    for path in sorted(runs.glob("seed*/*/*/evaluations/*.json")):
        seed = int(path.parents[3].name.removeprefix("seed"))
        evaluation = json.loads(path.read_text())
        name = f"{path.parents[1].name} @ {', '.join(evaluation['overrides'])}"
        out.setdefault(name, {})[seed] = evaluation
    return out


def cell(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}" if len(values) > 1 else f"{values[0]:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="?", default=Path("runs/multitask"))
    args = parser.parse_args()
    runs = load(args.runs)
    if not runs:
        raise SystemExit(f"no seed*/<group>/<name>/summary.json under {args.runs}")
    score_cols = [f"{t}/score" for t in TASKS] + ["score"]
    loss_cols = [f"{t}/loss" for t in TASKS] + ["loss"]
    titles = [*TASKS, "macro score"] + [f"{t} loss" for t in TASKS] + ["macro loss", "upload MB"]
    print(f"| run | method | seeds | {' | '.join(titles)} |")
    print("|---|---|---|" + "---|" * len(titles))
    for name, by_seed in sorted(runs.items()):
        cells = [
            cell([s["metrics"][f"personal/test/{c}/macro"] for s in by_seed.values()]) for c in score_cols + loss_cols
        ]
        uploads = [s["communication"]["upload_bytes"] / 1e6 for s in by_seed.values() if "communication" in s]
        cells.append(cell(uploads) if uploads else "–")
        method = next(iter(by_seed.values()))["method"]
        print(f"| {name} | {method} | {','.join(map(str, sorted(by_seed)))} | {' | '.join(cells)} |")
    audited = {n: b for n, b in runs.items() if all("alignment" in s for s in b.values())}
    if audited:
        print(f"\n| run | {' | '.join(AUDIT)} |")
        print("|---|" + "---|" * len(AUDIT))
        for name, by_seed in sorted(audited.items()):
            print(f"| {name} | {' | '.join(cell([s['alignment'][k] for s in by_seed.values()]) for k in AUDIT)} |")


if __name__ == "__main__":
    main()
