"""A run killed after round 2 of 4 and resumed with `fedloom run --resume` ends bit-identical to an
uninterrupted run (server adapters and every client's private state)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

pytestmark = pytest.mark.integration

ARGS = ["--method", "fedavg", "--backbone", "tiny-random-llama", "--rounds", "4", "--seed", "1",
        "--set", "train.steps=12", "--set", "train.batch_size=4", "--set", "data.synthetic.sectors=3",
        "--set", "data.synthetic.stocks_per_sector=3", "--set", "data.synthetic.days=15",
        "--set", "data.feature_cache=false", "--set", "adapter.rank=4", "--set", "fraction=0.67"]  # fmt: skip


def _cmd(*extra: str) -> list[str]:
    return [sys.executable, "-m", "fedloom.cli", "run", *extra]


def _final_state(run: Path) -> dict[str, object]:
    folder = run / "checkpoints" / (run / "checkpoints" / "LATEST").read_text().split()[0]
    return {p.name: load_file(p) for p in sorted(folder.glob("*.safetensors")) if p.name != "rng_torch.safetensors"}


def test_kill_after_round_2_then_resume_is_bit_exact(tmp_path: Path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    subprocess.run(_cmd(*ARGS, "--out", str(straight)), check=True, capture_output=True, timeout=300)

    proc = subprocess.Popen(_cmd(*ARGS, "--out", str(killed)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics, deadline = killed / "metrics.jsonl", time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if metrics.is_file() and len(metrics.read_text().splitlines()) >= 2:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    done = len(metrics.read_text().splitlines())
    assert 2 <= done < 4

    resumed = subprocess.run(_cmd("--resume", str(killed)), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a, b = _final_state(straight), _final_state(killed)
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].keys() == b[name].keys()
        for key in a[name]:
            assert a[name][key].equal(b[name][key]), (name, key)
    rounds = [json.loads(line)["round"] for line in metrics.read_text().splitlines()]
    assert rounds == [1, 2, 3, 4]
    env = json.loads((killed / "env.json").read_text())
    assert env["resumed_from_round"] >= 2
