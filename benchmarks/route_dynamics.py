"""RPA's route dynamics over rounds and the per-client gain against heterogeneity, from a suite's run
directories (issue 17; the shapes of seed 000's Tables 8 and 9). Not a test.

For every RPA row, at chosen rounds, mean ± std over seeds, as seed 000's Table 8: mean normalized route
entropy (eq. 15), collapse rate (share of clients with max π > 0.9), load imbalance (max − min of the
mean route) and mean route change ‖π⁺ − π‖₁ per client-round; then the final routes' purity against the
planted groups. For every row, each client's test IC gain over a baseline
row next to its heterogeneity score, with Spearman's ρ (scipy) over all clients and seeds.

    python benchmarks/route_dynamics.py runs/suites/routing-testbed-cpu --baseline fedavgm/improved
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr


def rows(suite: Path) -> dict[str, list[Path]]:
    """Row name → run directories (one per seed) of the suite's finished jobs."""
    out: dict[str, list[Path]] = defaultdict(list)
    for job in sorted(suite.rglob("job.json")):
        if (job.parent / "summary.json").exists():
            out[json.loads(job.read_text())["row"]].append(job.parent)
    return out


def dynamics(run: Path, rounds: list[int]) -> dict[int, tuple[float, float, float, float]]:
    """round → (route entropy, collapse rate, load imbalance, mean route change)."""
    out = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        diag = record.get("diagnostics") or {}
        if record["round"] in rounds and "route_entropy" in diag:
            change = np.mean([m["route_change"] for m in record["train"].values()])
            out[record["round"]] = (
                diag["route_entropy"],
                diag["collapse_rate"],
                diag["load_imbalance"],
                float(change),
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", type=Path)
    parser.add_argument("--baseline", default="fedavgm/improved", help="row the per-client gain is measured against")
    parser.add_argument("--rounds", type=int, nargs="+", default=[10, 25, 50, 64])
    args = parser.parse_args()
    table = rows(args.suite)
    print(
        "| row | "
        + " | ".join(f"round {k}: entropy / collapse / imbalance / change" for k in args.rounds)
        + " | purity |"
    )
    print("|---|" + "---|" * (len(args.rounds) + 1))
    for row, runs in table.items():
        if not row.startswith("rpa"):
            continue
        per_seed = [dynamics(r, args.rounds) for r in runs]
        cells = []
        for k in args.rounds:
            values = np.array([d[k] for d in per_seed if k in d])
            cells.append(" / ".join(f"{m:.3f}±{s:.3f}" for m, s in zip(values.mean(0), values.std(0), strict=True)))
        purity = [json.loads((r / "summary.json").read_text()).get("route_purity", {}).get("rule_group") for r in runs]
        print(f"| {row} | " + " | ".join(cells) + f" | {', '.join(f'{p:.3f}' for p in purity if p is not None)} |")
    base = {json.loads((r / "summary.json").read_text())["seed"]: r for r in table[args.baseline]}
    print(f"\nper-client test IC gain over {args.baseline} vs heterogeneity score (Spearman over clients × seeds)")
    for row, runs in table.items():
        gains, scores = [], []
        for run in runs:
            summary = json.loads((run / "summary.json").read_text())
            ref = json.loads((base[summary["seed"]] / "summary.json").read_text())["per_client"]
            for client, values in summary["per_client"].items():
                gains.append(values["test/ic"] - ref[client]["test/ic"])
                scores.append(values["heterogeneity"])
        rho, p = spearmanr(scores, gains)
        print(f"{row}: mean gain {np.mean(gains):+.3f}, Spearman ρ {rho:+.3f} (p {p:.2f}, n {len(gains)})")


if __name__ == "__main__":
    main()
