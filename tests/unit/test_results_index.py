"""benchmarks/results/INDEX.md stays in step with configs/suites/ (issue 44): every shipped suite is named
on a line of the index, every suite the index names is shipped, every status is one the index defines,
and a line that claims results has its suite's folder committed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INDEX = ROOT / "benchmarks" / "results" / "INDEX.md"
STATUSES = {"run", "partial", "reported", "old protocol", "not run", "paper size only", "text only"}
NO_FOLDER = {"not run", "reported", "paper size only", "text only"}


def index_lines() -> list[tuple[str, list[str], str]]:
    """(table / figure, suites, status) of every row of the index's tables."""
    rows = []
    for line in INDEX.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or set(cells[0]) <= {"-"} or cells[0] in ("table / figure", "purpose"):
            continue
        suites = [] if cells[1] == "—" else [s.strip() for s in cells[1].split(",")]
        rows.append((cells[0], suites, cells[2]))
    return rows


def test_the_index_names_every_shipped_suite_and_only_shipped_suites():
    shipped = {p.stem for p in (ROOT / "configs" / "suites").glob("*.yaml")}
    named = {s for _, suites, _ in index_lines() for s in suites}
    assert shipped - named == set(), "suites missing from benchmarks/results/INDEX.md"
    assert named - shipped == set(), "the index names suites that configs/suites/ does not ship"


@pytest.mark.parametrize(("entry", "suites", "status"), index_lines(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_line_has_a_known_status_backed_by_committed_folders(entry, suites, status):
    assert status in STATUSES, f"{entry}: unknown status {status!r}"
    if status not in NO_FOLDER:
        committed = [s for s in suites if (ROOT / "benchmarks" / "results" / "suites" / s).is_dir()]
        assert committed, f"{entry}: status {status!r} but none of {suites} has a folder in benchmarks/results/suites"


def test_every_seed_table_and_figure_has_a_line():
    for seed, tables, figures in (("000", 14, 7), ("002", 3, 4)):
        text = INDEX.read_text().split(f"## Seed {seed}")[1].split("\n## ")[0]
        for n in range(1, tables + 1):
            assert re.search(rf"^\| Table {n} \(", text, re.M), f"seed {seed}: Table {n} has no line"
        for n in range(2, figures + 1):  # Fig. 1 of both seeds is the method's overview
            assert re.search(rf"^\| Fig\. {n} \(", text, re.M), f"seed {seed}: Fig. {n} has no line"
