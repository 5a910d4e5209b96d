"""The ACL18 quality table (issues 4 and 5) from finished runs. Not a test.

    python benchmarks/acl18_table.py [--runs runs/acl18]

Reads ``RUNS/seed<k>/<method>/summary.json`` (written by ``fedloom run`` / ``compare`` with
configs/acl18.yaml) and prints, per method: seeds found, personalized test accuracy and MCC at the
round chosen on validation MCC (mean ± std over seeds), and bytes per client per round. Then a
paired block bootstrap over trading weeks (seed 000, Table 5) of rpa against the baseline with the
best mean test MCC, on the daily test accuracy of the final models, one line per seed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from fedloom.metrics.significance import paired_block_bootstrap


def load(runs: Path) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {}
    for path in sorted(runs.glob("seed*/*/summary.json")):
        seed = int(path.parent.parent.name.removeprefix("seed"))
        out.setdefault(path.parent.name, {})[seed] = json.loads(path.read_text())
    return out


def cell(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}" if len(values) > 1 else f"{values[0]:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/acl18"))
    args = parser.parse_args()
    runs = load(args.runs)
    print("| method | seeds | test accuracy | test MCC | KB down / up per client-round |")
    print("|---|---|---|---|---|")
    mcc = {}
    for method, by_seed in sorted(runs.items()):
        acc = [s["metrics"]["personal/test/accuracy/macro"] for s in by_seed.values()]
        mcc[method] = [s["metrics"]["personal/test/mcc/macro"] for s in by_seed.values()]
        s0 = next(iter(by_seed.values()))
        per = s0["rounds"] * len(s0["per_client"])
        comm = s0["communication"]
        kb = f"{comm['download_bytes'] / per / 1e3:.0f} / {comm['upload_bytes'] / per / 1e3:.0f}"
        print(f"| {method} | {','.join(map(str, sorted(by_seed)))} | {cell(acc)} | {cell(mcc[method])} | {kb} |")
    baselines = {m: float(np.mean(v)) for m, v in mcc.items() if m != "rpa"}
    if "rpa" not in runs or not baselines:
        return
    best = max(baselines, key=baselines.get)
    print(f"\nrpa − {best} (best baseline by mean test MCC), daily test accuracy, weeks resampled:")
    for seed in sorted(set(runs["rpa"]) & set(runs[best])):
        daily = [pd.read_csv(Path(runs[m][seed]["run_dir"]) / "daily.csv", index_col="date", parse_dates=["date"])
                 for m in ("rpa", best)]  # fmt: skip
        t = paired_block_bootstrap(daily[0]["accuracy"], daily[1]["accuracy"])
        print(
            f"  seed {seed}: mean {t['mean_difference']:+.4f}, 95 % CI [{t['ci_low']:+.4f}, {t['ci_high']:+.4f}], "
            f"p = {t['p_value']:.3f}, {t['days']:.0f} days / {t['weeks']:.0f} weeks"
        )


if __name__ == "__main__":
    main()
