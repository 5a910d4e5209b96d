"""`make test` runs the Flower and Ray tests one after another on one xdist worker (tests/flower_group.py
adds the `xdist_group("flower")` mark at collection). Nothing fails when that grouping silently stops, and it
had: the hook ran after pytest-xdist's (which reads the marks), and pytest 9.2 with pytest-xdist 3.8
ignores the groups altogether (pytest-xdist#1386) — the tests then started Flower fleets on both
workers at once. This runs a small pytest session with the pinned versions and that hook and
checks that the group holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.flower_group import FLOWER_FILES

ROOT = Path(__file__).resolve().parents[2]
FLOWER = tuple(sorted(FLOWER_FILES))  # files of these names in the small session, beside three others
OTHER = ("test_one.py", "test_two.py", "test_three.py")

TEST = """
import os
from pathlib import Path


def test_{n}(request):
    Path(r"{out}", "{n}").write_text(request.node.nodeid + " " + os.environ["PYTEST_XDIST_WORKER"])
"""


def test_the_flower_files_share_one_worker_and_carry_the_group(tmp_path: Path):
    out = tmp_path / "seen"
    out.mkdir()
    suite = tmp_path / "suite"
    suite.mkdir()
    hook = "from tests.flower_group import pytest_collection_modifyitems  # noqa: F401"  # as tests/conftest.py
    (suite / "conftest.py").write_text(f"import sys\nsys.path.insert(0, r'{ROOT}')\n{hook}\n")
    for name in FLOWER + OTHER:
        (suite / name).write_text(TEST.format(n=Path(name).stem, out=out))
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider"]
    proc = subprocess.run([*cmd, str(suite)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    seen = dict(p.read_text().split() for p in out.iterdir())  # node id -> worker
    assert len(seen) == len(FLOWER + OTHER), seen
    grouped = {node: worker for node, worker in seen.items() if node.endswith("@flower")}  # xdist's group suffix
    assert sorted(Path(node.split("::")[0]).name for node in grouped) == sorted(FLOWER), seen
    assert len(set(grouped.values())) == 1, seen  # one work unit: one worker
