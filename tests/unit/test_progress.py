"""Plain-line progress (output that is not a terminal): a line per round, a line per tenth of a long task."""

from __future__ import annotations

from fedloom.progress import LineProgress


def test_a_short_task_logs_every_step_and_a_long_one_every_tenth():
    lines: list[str] = []
    ticks = iter(range(1000))  # one tick per clock read (each step reads it)
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


def test_a_short_task_inside_another_adds_no_line_so_a_run_logs_one_line_per_round():
    lines: list[str] = []
    progress = LineProgress(lines.append, clock=lambda: 0.0)
    rounds = progress.task("fedavg: rounds", 2)
    for rnd in (1, 2):
        clients = progress.task(f"round {rnd}: local training", 8)
        for _ in range(8):
            clients(1)
        rounds(1)
    assert lines == ["fedavg: rounds: 1/2 (0.0 s)", "fedavg: rounds: 2/2 (0.0 s)"]
    checks = progress.task("training: checks (30 at most)", 30)  # nothing open: shown, every tenth
    outer = progress.task("fitting mlp", 1)
    inner = progress.task("training: checks (30 at most)", 30)  # long, inside another: still every tenth
    for _ in range(30):
        inner(1)
    outer(1)
    assert sum("checks" in line for line in lines) == 10 and checks is not None


def test_a_long_task_whose_tenth_takes_longer_than_every_logs_on_time():
    """A 1,000-step pass at 100 s a step: a tenth is 2.8 h; a line comes every 300 s instead."""
    lines: list[str] = []
    ticks = iter(range(0, 10**6, 100))
    progress = LineProgress(lines.append, clock=lambda: float(next(ticks)))
    features = progress.task("frozen features", 1000)
    for _ in range(9):
        features(1)
    assert [line.split(": ")[1] for line in lines] == ["3/1000 (300.0 s)", "6/1000 (600.0 s)", "9/1000 (900.0 s)"]
