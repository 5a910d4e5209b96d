"""Two processes asking for the same missing cache entry build it once: the second waits on the
entry's lock and reads what the first wrote."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import sys, time
from pathlib import Path
import torch
from fedloom.backbone.features import Ragged, cached_ragged
cache, log, me, wait_for = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4])

def compute():
    with log.open("a") as f:
        f.write(me + "\\n")
    while not wait_for.exists():  # stay inside the build until the other process looks the entry up
        time.sleep(0.05)
    time.sleep(1.0)
    return Ragged.from_rows([[1, 2, 3], [4]], torch.int64)

(log.parent / f"{me}.ready").touch()  # next: the lookup
rows = cached_ragged(cache, "same-key", compute)
assert rows.values.tolist() == [1, 2, 3, 4], rows.values
"""


def test_two_processes_build_one_entry_once(tmp_path: Path):
    cache, log = tmp_path / "cache", tmp_path / "builds.txt"

    def start(me: str, wait_for: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", CHILD, str(cache), str(log), me, str(wait_for)])

    first = start("first", tmp_path / "second.ready")  # builds until the second has started its lookup
    while not log.exists() and first.poll() is None:  # the first process is inside its build
        time.sleep(0.05)
    second = start("second", tmp_path)
    assert first.wait() == 0 and second.wait() == 0
    assert log.read_text().split() == ["first"]
