"""Plain-line progress (output that is not a terminal): a line per round, a line per tenth of a long task."""

from __future__ import annotations

from fedloom.progress import LineProgress


def test_a_short_task_logs_every_step_and_a_long_one_every_tenth():
    lines: list[str] = []
    ticks = iter(range(100))
    progress = LineProgress(lines.append, clock=lambda: float(next(ticks)))
    rounds = progress.task("fedavg: rounds", 3)
    for _ in range(3):
        rounds(1)
    assert lines == ["fedavg: rounds: 1/3 (1.0 s)", "fedavg: rounds: 2/3 (2.0 s)", "fedavg: rounds: 3/3 (3.0 s)"]
    lines.clear()
    features = progress.task("frozen features", 105)
    for _ in range(105):
        features(1)
    assert [line.split(": ")[1].split(" ")[0] for line in lines] == [f"{10 * k}/105" for k in range(1, 11)] + [
        "105/105"
    ]
