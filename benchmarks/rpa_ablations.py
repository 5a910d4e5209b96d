"""RPA's ablation table on a financial dataset (issue 5; seed 000 Tables 6 and 14) from finished runs.

    python benchmarks/rpa_ablations.py runs/acl18-ablations --reference runs/acl18

Reads ``ABLATIONS/seed<k>/<name>/`` (``fedloom run --method rpa --set methods.rpa.<switch>=...``) and
the default ``rpa`` of ``REFERENCE/seed<k>/rpa``, and prints per row: the switches that differ from the
default run, the test metrics at the round chosen on validation and the primary one of the final
models (after the last round), the routing diagnostics of the last round (mean normalized route
entropy, collapse rate, load imbalance, mean client route change, mean residual strength ρ) that
explain them, bytes per client-round, and on how many seeds the row's every personalized test metric
(chosen round and final models) equals the default's exactly. Not a test.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from fedloom.experiments.config import load_config, settings
from quality_table import TABLES, cell, kilobytes, load, test_cells


def switches(run_dir: Path, base: dict[str, str]) -> str:
    """The settings of ``run_dir`` that differ from the default run's ``base`` (dotted keys, JSON values);
    both configs pass through the current schema, so sections added after the default run compare equal."""
    mine = settings(load_config(run_dir / "config.yaml"))
    return ", ".join(f"{k}={v}" for k, v in sorted(mine.items()) if base[k] != v) or "—"


def same_as(run: dict, default: dict) -> bool:
    """Whether every personalized test metric of ``run`` (chosen round and final models) equals ``default``'s."""
    return all(
        run[models][k] == v
        for models in ("metrics", "final_metrics")
        for k, v in default[models].items()
        if k.startswith("personal/test/")
    )


def last_round(run_dir: Path) -> dict[str, float]:
    """Routing diagnostics of the final round: server-side (routes received) and client means."""
    row = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    diag, train = row["diagnostics"], row["train"].values()
    return {
        "entropy": diag.get("route_entropy", float("nan")),
        "collapse": diag.get("collapse_rate", float("nan")),
        "imbalance": diag.get("load_imbalance", float("nan")),
        "change": float(np.mean([t.get("route_change", 0.0) for t in train])),
        "rho": float(np.mean([t.get("residual_strength", float("nan")) for t in train])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ablations", type=Path, nargs="?", default=Path("runs/acl18-ablations"))
    parser.add_argument("--reference", type=Path, default=Path("runs/acl18"), help="holds seed<k>/rpa")
    args = parser.parse_args()
    rows = load(args.ablations)
    seeds = sorted({s for by_seed in rows.values() for s in by_seed})
    default = load(args.reference, set(seeds)).get("rpa", {})
    if not rows or not default:
        raise SystemExit(f"need {args.ablations}/seed<k>/<name>/ and {args.reference}/seed<k>/rpa/ for the same k")
    table = TABLES[next(iter(default.values()))["dataset"]]
    metrics = "".join(f" {title} |" for title in table.titles)
    diagnostics = " route entropy | collapse | load imbalance | route change | ρ | KB down / up | seeds = default |"
    print(f"| ablation | switches |{metrics}{diagnostics}")
    print("|---|---|" + "---|" * (len(table.titles) + diagnostics.count("|")))
    base = settings(load_config(args.reference / f"seed{seeds[0]}" / "rpa" / "config.yaml"))
    named = [("rpa (default)", args.reference, "rpa", default)]
    named += [(name, args.ablations, name, by_seed) for name, by_seed in sorted(rows.items())]
    for name, root, folder, by_seed in named:
        dirs = [root / f"seed{s}" / folder for s in by_seed]
        cells = test_cells(by_seed, table)
        diag = [last_round(d) for d in dirs]
        cells += [cell([x[k] for x in diag]) for k in ("entropy", "collapse", "imbalance")]
        cells += [f"{np.mean([x['change'] for x in diag]):.2g}", cell([x["rho"] for x in diag])]
        kb = kilobytes(next(iter(by_seed.values())))
        label = "—" if root == args.reference else switches(dirs[0], base)
        same = sum(same_as(run, default[s]) for s, run in by_seed.items() if s in default)
        print(f"| {name} | {label} | {' | '.join(cells)} | {kb} | {same}/{len(by_seed)} |")


if __name__ == "__main__":
    main()
