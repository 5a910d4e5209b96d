"""Where fedloom keeps its caches, and the one way it writes a file that a reader may open at any moment:
to a temporary file beside it, then an atomic rename, so a reader (or a run killed mid-write) sees the
old file or the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_root() -> Path:
    """Where converted models and feature caches live: ``$FEDLOOM_CACHE`` or ``~/.cache/fedloom``."""
    return Path(os.environ.get("FEDLOOM_CACHE", Path.home() / ".cache" / "fedloom")).expanduser()


@contextmanager
def staged(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to (by any writer: ``to_parquet``, ``json.dump``); renamed
    over ``path`` when the block ends without an error, removed when it raises. Concurrent writers never
    mix: each stages its own file, the last rename wins."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    os.close(fd)
    staging = Path(name)
    try:
        yield staging
        staging.replace(path)
    finally:
        staging.unlink(missing_ok=True)


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through a staged file."""
    with staged(path) as staging:
        staging.write_bytes(data.encode() if isinstance(data, str) else data)
