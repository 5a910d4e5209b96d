"""Greedy generations of a finished instruction run's adapter beside the base model's. Not a test.

    python benchmarks/generations.py RUN_DIR [--per-task 3]

Loads the frozen backbone the run names (fp32), decodes the first ``--per-task`` test prompts of each task
with the task's token budget (the run's config), once without and once with the run's final adapter
(``RUN_DIR/adapter``, PEFT format, loaded with ``peft``), and prints both beside the reference: whether the
adapter changed what the model answers at all.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from peft import PeftModel

from fedloom.backbone.loading import load_backbone
from fedloom.data.prompts import chat_prompt
from fedloom.data.registry import load_dataset
from fedloom.runs.config import load_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--per-task", type=int, default=3)
    args = parser.parse_args()
    cfg = load_config(args.run / "config.yaml")
    frame = load_dataset(cfg.dataset, cfg.data).frame
    test = frame[frame["split"] == "test"]
    backbone = load_backbone(cfg.backbone, "float32")
    tokenizer = backbone.tokenizer
    prompts = [
        (task, row) for task, rows in test.groupby("task", sort=True) for _, row in rows.head(args.per_task).iterrows()
    ]
    answers: dict[str, list[str]] = {}
    for name in ("base", "adapted"):
        model = (
            backbone.model if name == "base" else PeftModel.from_pretrained(backbone.model, str(args.run / "adapter"))
        )
        answers[name] = []
        for task, row in prompts:
            ids = tokenizer(chat_prompt(tokenizer, row["prompt"]), return_tensors="pt")["input_ids"]
            with torch.no_grad():
                out = model.generate(ids, max_new_tokens=cfg.generation.max_new_tokens[task], do_sample=False)
            answers[name].append(tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))
    for k, (task, row) in enumerate(prompts):
        same = "same" if answers["base"][k] == answers["adapted"][k] else "changed"
        print(f"{task:14s} {same:8s} base {answers['base'][k][:70]!r}")
        print(f"{'':23s} adapted {answers['adapted'][k][:70]!r}  reference {row['references'][0][:40]!r}")


if __name__ == "__main__":
    main()
