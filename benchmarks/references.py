"""Training cost of the neural references at the full CSI300 panel's size (issue 18): seconds per
optimizer step at each model's Qlib batch size, times the steps of one epoch over the 335,441 training
rows of `configs/csi300-full.yaml` (Alpha360 without vwap: 5 fields × 60 days); GATs steps one day
of ~290 stocks at a time, 1,155 training days, as do MASTER (8 days × 157 Alpha158 features + 63
market columns) and HIST (Alpha360 + 166 concept columns). Random inputs (no training signal is
needed to time a step). Run: ``python benchmarks/references.py [--out FILE.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from fedloom.references.config import ReferenceOptions
from fedloom.references.graph import StockAttention
from fedloom.references.hist import HIST
from fedloom.references.master import MASTER
from fedloom.references.mlp import mlp
from fedloom.references.sequence import sequence_network

TRAIN_ROWS, TRAIN_DAYS, FIELDS, STEPS, WARMUP, TIMED = 335_441, 1155, 5, 60, 2, 5


def step_seconds(net: torch.nn.Module, batch: int, inputs: int) -> float:
    """Mean seconds of ``TIMED`` Adam steps after ``WARMUP`` (one MSE step on a random batch)."""
    optimizer = torch.optim.Adam(net.parameters(), 1e-3)
    x, y = torch.randn(batch, inputs), torch.randn(batch)
    for i in range(WARMUP + TIMED):
        if i == WARMUP:
            start = time.perf_counter()
        optimizer.zero_grad()
        ((net(x).squeeze(1) - y) ** 2).mean().backward()
        optimizer.step()
    return (time.perf_counter() - start) / TIMED


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    options, rows = ReferenceOptions(), {}
    g = torch.Generator().manual_seed(0)
    nets = {"mlp (157 Alpha158 features)": (mlp(157, 1, options.mlp, g), options.mlp.batch_rows, 157)}
    for name in ("lstm", "gru", "alstm", "tcn", "transformer"):
        cfg = getattr(options, name)
        nets[name] = (sequence_network(FIELDS, STEPS, 1, cfg), cfg.batch_rows, FIELDS * STEPS)
    day = TRAIN_ROWS // TRAIN_DAYS
    nets["gat (one day)"] = (StockAttention(FIELDS, 1, options.gat), day, FIELDS * STEPS)
    series, market = torch.arange(8 * 157).reshape(8, 157), torch.arange(8 * 157, 8 * 157 + 63)
    nets["master (one day)"] = (MASTER(series, market, 1, options.master), day, 8 * 157 + 63)
    concepts = torch.arange(FIELDS * STEPS, FIELDS * STEPS + 166)
    nets["hist (one day)"] = (HIST(FIELDS, torch.arange(FIELDS * STEPS), concepts, 1, options.hist), day,
                              FIELDS * STEPS + 166)  # fmt: skip
    for name, (net, batch, inputs) in nets.items():
        seconds = step_seconds(net, batch, inputs)
        steps = TRAIN_DAYS if name.endswith("(one day)") else -(-TRAIN_ROWS // batch)
        rows[name] = {"batch": batch, "seconds_per_step": seconds, "steps_per_epoch": steps,
                      "seconds_per_epoch": seconds * steps}  # fmt: skip
        print(f"{name:28s} batch {batch:5d}  {seconds * 1e3:8.0f} ms/step  {seconds * steps:8.0f} s/epoch")
    result = {"cpu_count": os.cpu_count(), "threads": torch.get_num_threads(), "machine": platform.processor(),
              "date": time.strftime("%Y-%m-%d"), "models": rows}  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
