"""The four-task FedWeave benchmark tables (issue 6, seed 002 Tables 1–3) from finished runs. Not a test.

    python benchmarks/multitask_table.py [runs/multitask]

`fedloom table` over every run under RUNS (configs/multitask.yaml runs, rows named by run folder),
re-evaluations (``fedloom evaluate RUN --set ...``) as rows of their own: per-task test scores and
teacher-forced losses with their macro averages, mean ± std over seeds; then, for the runs that
report one (FedWeave), the alignment audit against the hidden task labels (seed 002 Table 3).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fedloom.results.load import find_runs
from fedloom.results.render import to_markdown
from fedloom.results.table import Column, build_tables

AUDIT = ("local_purity", "local_nmi", "local_ari", "global_purity", "global_nmi", "global_ari")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="?", default=Path("runs/multitask"))
    args = parser.parse_args()
    runs = find_runs([args.runs], evaluations=True)
    print(to_markdown(build_tables(runs)))
    audited = [r for r in runs if "alignment" in r.record]
    if audited:
        print(to_markdown(build_tables(audited, [Column(k, ("alignment", k), True) for k in AUDIT])))


if __name__ == "__main__":
    main()
