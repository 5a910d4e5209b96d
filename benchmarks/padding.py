"""Padding waste: padded token positions over real ones. Evaluation: rows in order vs length-sorted
batches (what `Learner.predict` does), over every client's validation and test rows. Training: one
epoch of each client's training rows in random batches vs length-bucketed ones (`train.length_buckets`,
`fedloom.tasks.learner.length_bucketed`) at the config's batch size. Not a test; no model forward is
run (tokens only).

    python benchmarks/padding.py configs/default.yaml configs/acl18.yaml configs/fnspid.yaml
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from fedloom.data.registry import load_dataset
from fedloom.runs.config import load_config
from fedloom.runs.workspace import _tokens, data_owners, load_adapted
from fedloom.tasks.learner import length_bucketed


def padding_ratio(lengths: np.ndarray, order: np.ndarray, batch: int) -> tuple[int, int]:
    """(padded positions, real positions) of ``lengths`` batched ``batch`` at a time in ``order``."""
    padded = sum(
        int(lengths[order[s : s + batch]].max()) * len(order[s : s + batch]) for s in range(0, len(order), batch)
    )
    return padded, int(lengths.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--batch", type=int, default=64, help="evaluation batch size (Learner.eval_batch_size)")
    args = parser.parse_args()
    for path in args.configs:
        cfg = load_config(path, None, [])
        table = load_dataset(cfg.dataset, cfg.data)
        lengths = _tokens(cfg, table, load_adapted(cfg))[0].lengths
        totals = {"row order": [0, 0], "length-sorted": [0, 0]}
        for client in data_owners(cfg, table):
            for split in ("val", "test"):
                split_lengths = lengths[client.split(split)]
                orders = {"row order": np.arange(len(split_lengths)), "length-sorted": np.argsort(split_lengths)}
                for name, order in orders.items():
                    padded, real = padding_ratio(split_lengths, order, args.batch)
                    totals[name][0] += padded
                    totals[name][1] += real
            train = client.split("train")
            order = train[torch.randperm(len(train), generator=torch.Generator().manual_seed(0)).numpy()]
            epochs = {"train random": order, "train bucketed": length_bucketed(
                order, lengths, cfg.train.batch_size, torch.Generator().manual_seed(0))}  # fmt: skip
            for name, epoch in epochs.items():
                padded, real = padding_ratio(lengths[epoch], np.arange(len(epoch)), cfg.train.batch_size)
                totals.setdefault(name, [0, 0])
                totals[name][0] += padded
                totals[name][1] += real
        ratios = ", ".join(f"{name} {p / r:.3f}" for name, (p, r) in totals.items())
        print(
            f"{path}: {len(lengths)} prompts, tokens min/median/max {lengths.min()}/{int(np.median(lengths))}/"
            f"{lengths.max()}; padded/real: {ratios}"
        )


if __name__ == "__main__":
    main()
