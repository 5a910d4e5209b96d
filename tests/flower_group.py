"""Under `pytest -n 2 --dist loadgroup` (make test) the Flower and Ray tests run one after another on
one worker while the other worker takes the rest: two Flower fleets or Ray clusters starting at once
on 2 cores starve each other's start-up. A module of its own (no torch) so that
tests/unit/test_flower_group.py can check the grouping in a small pytest session."""

from __future__ import annotations

import pytest

# Files whose tests start Flower processes (SuperLink, SuperNodes) or a Ray simulation; a test elsewhere
# that does carries `@pytest.mark.xdist_group("flower")` itself.
FLOWER_FILES = {"test_flower_sim.py", "test_deployment.py", "test_across_namespaces.py", "test_app_approval.py",
                "test_node_worker.py"}  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which turns the marks into work units
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of ``FLOWER_FILES`` with the "flower" xdist group."""
    for item in items:
        if item.path.name in FLOWER_FILES:
            item.add_marker(pytest.mark.xdist_group("flower"))
