"""Quality tables on the financial datasets (issues 4 and 5) from finished runs. Not a test.

    python benchmarks/quality_table.py runs/acl18 [--seeds 0]      # or runs/csi300, runs/fnspid

Reads ``RUNS/seed<k>/<method>/summary.json`` (written by ``fedloom run`` / ``compare`` with
configs/<dataset>.yaml) and prints, per method: seeds found, the dataset's personalized test
metrics at the round chosen on validation (mean ± std over seeds), the primary metric of the final
models (after the last round; CSI300 adds their TopkDropout portfolio), and bytes per client per
round. Then a paired block bootstrap over trading weeks (seed 000, Table 5) of rpa against the
baseline whose final models have the best mean primary metric, on the daily series of the final
models (daily.csv), one line per seed: the test compares the models the final column shows.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from fedloom.metrics.significance import paired_block_bootstrap


@dataclass(frozen=True)
class Table:
    """What one dataset's table shows: (summary metric, column title), the metric that picks the best
    baseline, whether higher is better, and the daily series the bootstrap resamples."""

    columns: tuple[tuple[str, str], ...]
    primary: str
    higher: bool
    daily: str
    portfolio: bool = False

    @property
    def titles(self) -> list[str]:
        """Titles of `test_cells`: the chosen-round columns, then the final models' primary metric."""
        return [title for _, title in self.columns] + [f"{dict(self.columns)[self.primary]}, final models"]


TABLES = {
    "acl18": Table((("accuracy", "test accuracy"), ("mcc", "test MCC")), "mcc", True, "accuracy"),
    "csi300": Table(
        (("ic", "IC"), ("rank_ic", "RankIC"), ("icir", "ICIR"), ("rank_icir", "RankICIR")),
        "rank_ic",
        True,
        "rank_ic",
        portfolio=True,
    ),
    "fnspid": Table((("mse", "MSE"), ("mae", "MAE"), ("ic", "IC")), "mse", False, "mse"),
}
PORTFOLIO = (("annualized_return", "excess AR (cost)"), ("information_ratio", "IR"), ("max_drawdown", "MDD"))


def load(runs: Path, seeds: set[int] | None = None) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {}
    for path in sorted(runs.glob("seed*/*/summary.json")):
        seed = int(path.parent.parent.name.removeprefix("seed"))
        if seeds is None or seed in seeds:
            out.setdefault(path.parent.name, {})[seed] = json.loads(path.read_text())
    return out


def cell(values: list[float], digits: int = 3) -> str:
    if len(values) > 1:
        return f"{np.mean(values):.{digits}f} ± {np.std(values):.{digits}f}"
    return f"{values[0]:.{digits}f}"


Models = Literal["metrics", "final_metrics"]


def test_values(by_seed: dict[int, dict], metric: str, models: Models = "metrics") -> list[float]:
    """The personalized macro test ``metric``, one value per seed, of the validation-chosen round's
    models (``models="metrics"``) or of the final ones (``"final_metrics"``)."""
    return [s[models][f"personal/test/{metric}/macro"] for s in by_seed.values()]


def test_cell(by_seed: dict[int, dict], metric: str, models: Models = "metrics") -> str:
    return cell(test_values(by_seed, metric, models), 5 if metric in ("mse", "mae") else 3)


def test_cells(by_seed: dict[int, dict], table: Table) -> list[str]:
    """One row's test cells under `Table.titles`."""
    return [test_cell(by_seed, m) for m, _ in table.columns] + [test_cell(by_seed, table.primary, "final_metrics")]


def kilobytes(summary: dict) -> str:
    """Download / upload KB per client per round, from a run's communication totals."""
    per = summary["rounds"] * len(summary["per_client"])
    comm = summary["communication"]
    return f"{comm['download_bytes'] / per / 1e3:.0f} / {comm['upload_bytes'] / per / 1e3:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="?", default=Path("runs/acl18"))
    parser.add_argument("--seeds", help="comma-separated seeds to include (default: all found)")
    args = parser.parse_args()
    runs = load(args.runs, None if args.seeds is None else {int(x) for x in args.seeds.split(",")})
    if not runs:
        raise SystemExit(f"no seed*/<method>/summary.json under {args.runs}")
    dataset = next(iter(next(iter(runs.values())).values()))["dataset"]
    table = TABLES[dataset]
    columns = table.titles + ([t for _, t in PORTFOLIO] if table.portfolio else [])
    print(f"| method | seeds | {' | '.join(columns)} | KB down / up per client-round |")
    print("|---|---|" + "---|" * len(columns) + "---|")
    primary = {}
    for method, by_seed in sorted(runs.items()):
        cells = test_cells(by_seed, table)
        primary[method] = float(np.mean(test_values(by_seed, table.primary, "final_metrics")))
        if table.portfolio:
            cells += [cell([s["portfolio"][key] for s in by_seed.values()]) for key, _ in PORTFOLIO]
        kb = kilobytes(next(iter(by_seed.values())))
        print(f"| {method} | {','.join(map(str, sorted(by_seed)))} | {' | '.join(cells)} | {kb} |")
    baselines = {m: v for m, v in primary.items() if m != "rpa"}
    if "rpa" not in runs or not baselines:
        return
    best = (max if table.higher else min)(baselines, key=baselines.get)
    print(f"\nrpa − {best} (best baseline by mean final-model test {table.primary}), "
          f"daily {table.daily}, weeks resampled:")  # fmt: skip
    for seed in sorted(set(runs["rpa"]) & set(runs[best])):
        daily = [pd.read_csv(args.runs / f"seed{seed}" / m / "daily.csv", index_col="date", parse_dates=["date"])
                 for m in ("rpa", best)]  # fmt: skip
        t = paired_block_bootstrap(daily[0][table.daily], daily[1][table.daily])
        print(
            f"  seed {seed}: mean {t['mean_difference']:+.4g}, 95 % CI [{t['ci_low']:+.4g}, {t['ci_high']:+.4g}], "
            f"p = {t['p_value']:.3f}, {t['days']:.0f} days / {t['weeks']:.0f} weeks"
        )


if __name__ == "__main__":
    main()
