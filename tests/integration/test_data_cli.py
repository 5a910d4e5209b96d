"""`fedloom data list | info` as a user runs them, on the real bundle, and the one-line missing-data error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.integration


def _fedloom(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {"FEDLOOM_CACHE": str(cache), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "fedloom.cli", *args], capture_output=True, text=True, timeout=300, env=env
    )


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}")
def test_list_and_info(tmp_path):
    listing = _fedloom("data", "list", "--data-dir", str(SHARED_DATA), cache=tmp_path)
    assert listing.returncode == 0, listing.stderr[-2000:]
    for name in (
        "acl18",
        "bigdata22",
        "fnspid",
        "csi300",
        "csi800",
        "gsm8k",
        "arc_challenge",
        "tweeteval",
        "jfleg",
        "coedit",
        "multitask",
        "generic",
        "synthetic",
    ):
        assert f"│ {name} " in listing.stdout
    assert "missing coedit/train.jsonl" in listing.stdout.replace("\n", " ")

    info = _fedloom(
        "data", "info", "acl18", "--data-dir", str(SHARED_DATA), "--set", "data.max_dates_per_split=3", cache=tmp_path
    )
    assert info.returncode == 0, info.stderr[-2000:]
    for field in ("rows", "dates", "split train", "clients", "9 (sector)", "labels test", "class 1"):
        assert field in info.stdout
    train = next(line for line in info.stdout.splitlines() if "split train" in line)
    assert re.search(r"[\d,]+ rows, 3 dates", train), train  # rows and dates per split
    assert re.search(r"names per client\s*│ min \d+, median \d+, max \d+", info.stdout)


def test_missing_dataset_is_a_one_line_error(tmp_path):
    proc = _fedloom("data", "info", "fnspid", "--data-dir", str(tmp_path), cache=tmp_path)
    assert proc.returncode == 2
    assert "fnspid is missing prices_sentiment.csv.gz, news.jsonl" in proc.stderr
    assert "Traceback" not in proc.stderr
