"""A classifier's penalized head on the frozen pooled state, client by client: the class prior (the constant a
trained row must beat), the least-squares fit on one-hot classes taken as logits (``head_start: ridge`` before
2026-12-07) and ridge logistic regression (`fedloom.tasks.logistic`, now), each at the α its validation rows'
cross-entropy picks. Prints the mean over clients of the cross-entropy on train / val / test, how many clients
beat the prior in sample, and test MCC (client macro). What a run's head starts from, without a run. Not a test.

    python benchmarks/classifier_head.py --config configs/acl18.yaml
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F

from fedloom.metrics.classification import matthews_corrcoef
from fedloom.runs.config import load_config
from fedloom.runs.workspace import prepare_workspace
from fedloom.tasks.classification import ClassificationTask
from fedloom.tasks.ridge import choose_alpha, ridge_path

SPLITS = ("train", "val", "test")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/acl18.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    ws = prepare_workspace(load_config(args.config, None, args.overrides))
    lm, feats = ws.lm, next(iter(ws.learners.values())).features
    n = len(ws.table)
    with torch.no_grad():
        x = torch.cat([lm.pooled_from_prefix(*feats.prefix_batch(lm, np.arange(s, min(n, s + 64))), None)
                       for s in range(0, n, 64)]).double()  # fmt: skip
    y = torch.as_tensor(ws.table.targets).long()
    heads = ("prior", "least squares as logits", "ridge logistic")
    loss: dict[str, dict[str, list[float]]] = {h: {s: [] for s in SPLITS} for h in heads}
    mcc: dict[str, list[float]] = {h: [] for h in heads}
    beats = dict.fromkeys(heads, 0)
    for learner in ws.learners.values():
        task = learner.task
        assert isinstance(task, ClassificationTask), "a classification config (ACL18, BigData22)"
        rows = {s: torch.as_tensor(learner.data.split(s)) for s in SPLITS}
        xs, ys = {s: x[r] for s, r in rows.items()}, {s: y[r] for s, r in rows.items()}

        def ce(head: dict[str, torch.Tensor], split: str, task: ClassificationTask = task) -> float:
            return float(F.cross_entropy(task.logits(head, xs[split].float()), ys[split]))

        prior = torch.bincount(ys["train"], minlength=task.num_classes).double() / len(ys["train"])
        constant = task.head_from(torch.zeros(task.num_classes, x.shape[1]), prior.clamp_min(1e-12).log())
        one_hot = F.one_hot(ys["train"], task.num_classes).double()
        w, b, _ = ridge_path(xs["train"], one_hot, lambda w, b, t=task: ce(t.head_from(w, b), "val"))
        logistic, _ = choose_alpha(task.head_fit(xs["train"], ys["train"]), lambda head: ce(head, "val"))
        for name, head in zip(heads, (constant, task.head_from(w, b), logistic), strict=True):
            for split in SPLITS:
                loss[name][split].append(ce(head, split))
            beats[name] += loss[name]["train"][-1] < loss["prior"]["train"][-1] - 1e-9
            predicted = task.predict(head, xs["test"].float()).numpy()
            mcc[name].append(matthews_corrcoef(ys["test"].numpy(), predicted, task.num_classes))
    k = len(ws.learners)
    print(f"{k} clients; mean cross-entropy over clients (train / val / test), clients below the prior in sample, "
          "test MCC (client macro)")  # fmt: skip
    for name in heads:
        parts = " / ".join(f"{np.mean(loss[name][s]):.4f}" for s in SPLITS)
        print(f"{name:26s} {parts}   {beats[name]}/{k}   MCC {np.mean(mcc[name]):+.4f}")


if __name__ == "__main__":
    main()
