"""Fuzz the readers every loader goes through and the config resolver (issue 19 item 7): mutations of
slices of the real files and random overrides give a table that holds what was required, or one
`DataError` / `ConfigError` line — never another exception. Mutations are made in tmp_path."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedloom.data.reading import read_csv, read_jsonl
from fedloom.errors import ConfigError, DataError
from fedloom.runs.config import load_config
from tests.conftest import SHARED_DATA

shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}")
SLICE = 120  # lines of each real file the mutations start from


def _head(path: Path) -> bytes:
    with path.open("rb") as f:
        return b"".join(next(f) for _ in range(SLICE))


def _mutate(data: bytes, kind: str, at: float, byte: int) -> bytes:
    """One corruption of ``data`` at relative position ``at``."""
    i = int(at * (len(data) - 1))
    lines = data.splitlines(keepends=True)
    j = int(at * (len(lines) - 1))
    if kind == "truncate":
        return data[:i]
    if kind == "flip":
        return data[:i] + bytes([byte]) + data[i + 1 :]
    if kind == "drop_line":
        return b"".join(lines[:j] + lines[j + 1 :])
    if kind == "repeat_lines":
        return b"".join(lines + lines[j : j + 5])
    if kind == "garbage_line":
        return b"".join([*lines[:j], bytes([byte]) * 7 + b",\x00{\n", *lines[j:]])
    return b"".join(lines[:j])  # keep_head: a file cut at a line end


MUTATION = st.tuples(
    st.sampled_from(["truncate", "flip", "drop_line", "repeat_lines", "garbage_line", "keep_head"]),
    st.floats(0, 1),
    st.integers(0, 255),
)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _one_line(exc: Exception) -> None:
    assert str(exc) and "\n" not in str(exc) and "Traceback" not in str(exc)


@shared
@FUZZ
@given(mutation=MUTATION, gz=st.booleans())
def test_a_mutated_csv_reads_completely_or_fails_in_one_line(tmp_path, mutation, gz):
    data = _mutate(_head(SHARED_DATA / "acl18" / "prices.csv"), *mutation)
    path = tmp_path / ("prices.csv.gz" if gz else "prices.csv")
    path.write_bytes(gzip.compress(data) if gz else data)
    required = ("ticker", "close", "volume")
    try:
        frame = read_csv(path, required=required, dates=("date",))
    except DataError as exc:
        _one_line(exc)
        assert str(path) in str(exc)
        return
    assert not frame[list(required)].isna().any().any()  # what was required is there on every row
    assert not frame["date"].isna().any()


@shared
@FUZZ
@given(mutation=MUTATION)
def test_a_mutated_jsonl_reads_or_fails_in_one_line(tmp_path, mutation):
    path = tmp_path / "tweets.jsonl"
    path.write_bytes(_mutate(_head(SHARED_DATA / "acl18" / "tweets.jsonl"), *mutation))
    try:
        frame = read_jsonl(path)
    except DataError as exc:
        _one_line(exc)
        assert str(path) in str(exc)
        return
    assert len(frame) > 0


KEYS = st.sampled_from(
    ["rounds", "seed", "train.lr", "federation.fraction", "adapter.rank", "method", "dataset",
     "data.synthetic.days", "methods.rpa.route_step", "no.such.key", "", "privacy.clip"]
)  # fmt: skip
VALUES = st.one_of(
    st.sampled_from([".inf", "-.inf", ".nan", "-1", "0", "1e400", "[1, 2]", "{a: 1}", "null", "yes", "'", "rpa"]),
    st.text(max_size=12),
)


@FUZZ
@given(overrides=st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=3))
def test_random_overrides_resolve_or_fail_in_one_line(overrides):
    try:
        cfg = load_config(None, None, [f"{k}={v}" for k, v in overrides])
    except ConfigError as exc:
        _one_line(exc)
        return
    assert cfg.rounds >= 1 and cfg.train.lr > 0 and cfg.train.lr != float("inf")
