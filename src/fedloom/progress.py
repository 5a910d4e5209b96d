"""Progress reporting without a UI dependency: layers report, the CLI decides how to show it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

Advance = Callable[[int], None]


class Progress(Protocol):
    def task(self, description: str, total: int) -> Advance:
        """Start a task with ``total`` units; call the returned function with units done."""
        ...


class SilentProgress:
    """Reports nothing (library use, tests)."""

    def task(self, description: str, total: int) -> Advance:
        return lambda n: None
