"""An exclusive file lock per cache entry, so that concurrent processes (a suite's workers) build an
entry once: the first builds it, the others wait and then read what it wrote."""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def entry_lock(entry: Path) -> Iterator[None]:
    """Hold ``fcntl.flock`` on ``.<entry>.lock`` beside ``entry`` (the lock file is left in place:
    removing it would let a waiting process lock a file a newcomer no longer sees)."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    with (entry.parent / f".{entry.name}.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_once(entry: Path, complete: Callable[[], bool], read: Callable[[], T], build: Callable[[], T]) -> T:
    """``read()`` when the entry is ``complete()``, else ``build()`` it under the entry's lock — after
    checking again, since another process may have finished it while this one waited."""
    if complete():
        return read()
    with entry_lock(entry):
        if complete():
            return read()
        return build()
