"""Where a short `fedloom run` spends the time that is not rounds (issue 21). Not a test.

Runs what ``fedloom run --config CONFIG`` runs, in this process, with a timer between the phases —
``import torch``, fedloom's config layer, the run layer's imports (transformers, peft), the workspace
(data, token cache, model load), the rounds, the outputs after them — and then lets the interpreter
exit normally or, with ``--hard-exit``, by ``os._exit`` after the last timer. Run both under
``/usr/bin/time`` and compare the process's wall time with the last timer to see the interpreter's
teardown:

    /usr/bin/time -f "process %e s" python benchmarks/startup.py CONFIG
    /usr/bin/time -f "process %e s" python benchmarks/startup.py CONFIG --hard-exit

The peers' workload (`peer.py`) as CONFIG: ``python benchmarks/peer.py --dtype auto --write-to /tmp/peer``
writes its table and ``/tmp/peer/peer-auto-top2.json``.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402 - the timer starts before every import
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

MARKS: list[tuple[str, float]] = []


def mark(phase: str) -> None:
    MARKS.append((phase, time.perf_counter()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path)
    parser.add_argument("--hard-exit", action="store_true", help="end with os._exit after the last timer")
    args = parser.parse_args()
    import torch  # noqa: F401

    mark("import torch")
    from fedloom.runs.config import load_config

    mark("import the config layer")
    from fedloom.runs.llm import run_method
    from fedloom.runs.workspace import prepare_workspace

    mark("import the run layer")
    cfg = load_config(args.config, {}, [])
    ws = prepare_workspace(cfg, None)
    mark("workspace")
    with tempfile.TemporaryDirectory() as out:
        summary = run_method(cfg, ws, Path(out), None)
        mark("rounds and outputs")
    previous = STARTED
    for phase, at in MARKS:
        print(f"{phase:26s} {at - previous:6.2f} s")
        previous = at
    print(f"{'(of which the rounds)':26s} {summary['wall_seconds']:6.2f} s")
    print(f"{'last timer':26s} {time.perf_counter() - STARTED:6.2f} s after the first line", flush=True)
    if args.hard_exit:
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
