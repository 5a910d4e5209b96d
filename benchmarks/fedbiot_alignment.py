"""FedBiOT's emulator on SmolLM2: how far the layer-dropped emulator is from the full model, and how
much the server's alignment closes the gap. Not a test.

    python benchmarks/fedbiot_alignment.py [--steps 20] [--lr 0.01] [--drop-ratio 0.2]

Adapter on the top 2 of 30 layers (as configs/acl18.yaml); the emulator stands in for layers 0..27.
Reports gap_l2 on held-out public sequences (not the ones aligned on) before and after ``--steps``
SGD steps, the seconds per step, and writes benchmarks/results/fedbiot-alignment-<date>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import numpy as np
import torch

from fedloom.backbone.emulator import Aligner, Emulator, gap_l2
from fedloom.backbone.features import Ragged
from fedloom.backbone.loading import load_backbone
from fedloom.backbone.lora import LoraSpec
from fedloom.backbone.model import AdaptedLM
from fedloom.data.instructions import public_corpus


def held_out_gap(emulator: Emulator, public: Ragged, lora: dict[str, torch.Tensor]) -> float:
    ids, mask = public.pad(np.arange(len(public)), emulator.lm.pad_id)
    with torch.no_grad():
        return float(gap_l2(emulator.lm.prefix(ids, mask), emulator.prefix(ids, mask, lora), mask))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--drop-ratio", type=float, default=0.2)
    parser.add_argument("--public", type=int, default=64, help="public sequences aligned on")
    args = parser.parse_args()
    lm = AdaptedLM(load_backbone("smollm2-135m"), LoraSpec(rank=8, alpha=16, layers=(28, 29)))
    tok = lm.backbone.tokenizer
    text = public_corpus(None, args.public + 16, seed=0)
    rows = tok(text, truncation=True, max_length=128)["input_ids"]
    train, held = (
        Ragged.from_rows(rows[: args.public], torch.int64),
        Ragged.from_rows(rows[args.public :], torch.int64),
    )
    emulator = Emulator(lm, args.drop_ratio)
    aligner = Aligner(emulator, train, batch_size=8, lr=args.lr, kd_weight=0.0)
    lora = emulator.init(torch.Generator().manual_seed(0))
    before = held_out_gap(emulator, held, lora)
    t0 = time.perf_counter()
    aligned, train_loss = aligner(lora, {}, args.steps, torch.Generator().manual_seed(1))
    seconds = (time.perf_counter() - t0) / max(args.steps, 1)
    after = held_out_gap(emulator, held, aligned)
    result = {
        "date": datetime.date.today().isoformat(),
        "kept_layers": list(emulator.layers),
        "steps": args.steps,
        "lr": args.lr,
        "held_out_gap_before": before,
        "held_out_gap_after": after,
        "mean_train_loss": train_loss,
        "seconds_per_step": seconds,
        "torch_threads": torch.get_num_threads(),
    }
    print(json.dumps(result, indent=2))
    out = Path(__file__).parent / "results" / f"fedbiot-alignment-{result['date']}.json"
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
