"""Reading a data file into a frame: every way a file can be broken (empty, cut short, not UTF-8, a
malformed JSON line, duplicated rows) becomes one `DataError` naming the file, and the line where
there is one, instead of a parser traceback."""

from __future__ import annotations

import gzip
import json
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fedloom.errors import DataError

BROKEN = (ValueError, OSError, EOFError, zlib.error, pd.errors.ParserError)  # UnicodeDecodeError is a ValueError


def read_csv(
    path: Path, required: Sequence[str] = (), dates: Sequence[str] = (), numbers: Sequence[str] = (), **options: Any
) -> pd.DataFrame:
    """``path`` as a frame; ``required`` columns must exist and hold a value on every row (a file cut
    short leaves its last row incomplete), ``dates`` must parse as dates, ``numbers`` as numbers where
    they hold a value (empty: NaN, as pandas reads it)."""
    try:
        with warnings.catch_warnings():  # a column of mixed types: refused below by name, not warned about
            warnings.simplefilter("ignore", pd.errors.DtypeWarning)
            frame = pd.read_csv(path, **options)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path} is empty (0 bytes or no header); restore the file") from None
    except BROKEN as exc:
        raise DataError(f"{path}: {_first_bad_line(path, _utf8) or _reason(exc)}") from None
    missing = [c for c in (*required, *dates, *numbers) if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing columns {missing}; the file has {list(frame.columns)}")
    for column in required:
        _refuse_rows(path, frame[column].isna(), f"no value in column {column!r} (a file cut short?)")
    for column in dates:
        parsed = pd.to_datetime(frame[column], errors="coerce", format="ISO8601")
        _refuse_rows(path, parsed.isna(), f"column {column!r} is not a date")
        frame[column] = parsed
    for column in numbers:
        if pd.api.types.is_numeric_dtype(frame[column]):  # pandas read every value as a number: kept as read
            continue
        parsed = pd.to_numeric(frame[column], errors="coerce")
        _refuse_rows(path, parsed.isna() & frame[column].notna(), f"column {column!r} is not a number")
        frame[column] = parsed.astype(float)
    return frame


def read_jsonl(path: Path, **options: Any) -> pd.DataFrame:
    """A JSON-lines file (``.gz`` too) as a frame; a malformed line is named by number."""
    try:
        frame = pd.read_json(path, lines=True, **options)
    except BROKEN as exc:
        raise DataError(f"{path}: {_first_bad_line(path, _json_line) or _reason(exc)}") from None
    if frame.empty:
        raise DataError(f"{path} holds no JSON lines; restore the file")
    return frame


def refuse_duplicates(frame: pd.DataFrame, keys: Sequence[str], source: Path | str) -> None:
    """A table keyed by ``keys`` holds each key once; duplicates are refused with their count and an example."""
    repeated = frame.duplicated(list(keys))
    if repeated.any():
        example = ", ".join(f"{k}={frame.loc[repeated, k].iloc[0]}" for k in keys)
        raise DataError(
            f"{source}: {int(repeated.sum())} duplicated ({', '.join(keys)}) rows, e.g. {example}; "
            "each key must appear once: remove the repeats"
        )


def _refuse_rows(path: Path, bad: pd.Series, problem: str) -> None:
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0])
        raise DataError(f"{path}: line {row + 2}: {problem} ({int(bad.sum())} rows in all)")  # + header, 1-based


def _lines(path: Path) -> Iterator[bytes]:
    with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as f:
        yield from f


def _utf8(line: bytes) -> None:
    line.decode("utf-8")


def _json_line(line: bytes) -> None:
    if line.strip():
        json.loads(line.decode("utf-8"))


def _first_bad_line(path: Path, check: Callable[[bytes], None]) -> str | None:
    """``line N: why`` for the first line ``check`` rejects (searched only after the fast parser failed)."""
    try:
        for number, line in enumerate(_lines(path), start=1):
            try:
                check(line)
            except ValueError as exc:
                return f"line {number}: {_reason(exc)}"
    except BROKEN:
        return None
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at column {exc.start + 1})"
    if isinstance(exc, json.JSONDecodeError):
        return f"malformed JSON ({exc.msg} at character {exc.pos + 1})"
    return "unreadable: " + (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
