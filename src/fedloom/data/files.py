"""Where real datasets live, checking that a dataset's files are there, and the derived-table cache.

The data folder is resolved in one place, in this order: an explicit argument (``--data-dir``,
``data.data_dir``), then ``$FEDLOOM_DATA_DIR``, then ``<repo>/../shared/data`` when it exists::

    shared/data/
      acl18/        prices.csv  tweets.jsonl  sectors.csv  ...
      qlib_cn/      csi300_daily.csv.gz  membership.csv.gz  ...

Expensive derived tables (CSI300 features) are cached under ``$FEDLOOM_CACHE/data/`` as Parquet,
keyed by the size and mtime of every source file plus the config that shaped them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fedloom.data.manifest import verify_folder
from fedloom.errors import DataError
from fedloom.paths import cache_root, staged

REPO_ROOT = Path(__file__).resolve().parents[3]
DATA_DIR_ENV = "FEDLOOM_DATA_DIR"


@dataclass(frozen=True)
class DataPath:
    """Marks a config field that names a file or folder inside the data folder (``Annotated[str,
    DATA_PATH]``), so a data owner's node can confine every such field to its own folder without a list
    that a new field could miss (`fedloom.apps.confine`). ``cwd``: the field's reader also looks in the
    working directory, so a node anchors the value in its data folder instead."""

    cwd: bool = False


DATA_PATH = DataPath()


def resolve_data_dir(explicit: Path | str | None = None) -> Path | None:
    """The data folder: ``explicit``, else ``$FEDLOOM_DATA_DIR``, else ``<repo>/../shared/data`` if present."""
    if explicit is not None:
        return Path(explicit).expanduser()
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV]).expanduser()
    default = REPO_ROOT.parent / "shared" / "data"
    return default if default.is_dir() else None


def dataset_dir(data_dir: Path | str | None, folder: str, files: Sequence[str]) -> Path:
    """``<data_dir>/<folder>``, after checking that every expected file is there and that the files
    ``MANIFEST.tsv`` lists match it (`fedloom.data.manifest`).

    The error names the folder looked in and every missing file, so a user knows what to provide.
    """
    root = resolve_data_dir(data_dir)
    if root is None:
        raise DataError(
            f"no data folder for dataset {folder!r}: pass --data-dir, set data.data_dir or ${DATA_DIR_ENV} "
            f"(expected {folder}/ with {', '.join(files)})"
        )
    path = root / folder
    missing = [f for f in files if not (path / f).is_file()]
    if missing:
        raise DataError(f"dataset folder {path} is missing {', '.join(missing)} (expected: {', '.join(files)})")
    verify_folder(root, folder)
    return path


def file_stamp(paths: Sequence[Path]) -> list[tuple[str, int, int]]:
    """(name, size, mtime in ns) of each file: what a cache key must change with."""
    return [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in paths]


def cached_frame(
    kind: str, sources: Sequence[Path], config: dict[str, object], build: Callable[[], pd.DataFrame]
) -> pd.DataFrame:
    """``build()``, or its earlier result from ``$FEDLOOM_CACHE/data/<kind>-<key>.parquet``.

    The key hashes the source files' size and mtime with ``config``; a change to either rebuilds.
    The file is written atomically, so an interrupted build never leaves a half-written cache.
    """
    key = json.dumps({"sources": file_stamp(sources), "config": config}, sort_keys=True, default=str)
    path = cache_root() / "data" / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.parquet"
    if path.is_file():
        return pd.read_parquet(path)
    frame = build()
    with staged(path) as staging:
        frame.to_parquet(staging)
    return frame
