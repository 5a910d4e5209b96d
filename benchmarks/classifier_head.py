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
from torch import Tensor

from fedloom.metrics.classification import matthews_corrcoef
from fedloom.runs.config import load_config
from fedloom.runs.workspace import prepare_workspace
from fedloom.tasks.classification import ClassificationTask
from fedloom.tasks.ridge import choose_alpha, ridge_path

SPLITS = ("train", "val", "test")


HEADS = ("prior", "least squares as logits", "ridge logistic")


def client_heads(task: ClassificationTask, xs: dict[str, Tensor], ys: dict[str, Tensor]) -> dict[str, list[float]]:
    """Each head's cross-entropy on train / val / test and its test MCC, for one client's rows."""

    def ce(head: dict[str, Tensor], split: str) -> float:
        return float(F.cross_entropy(task.logits(head, xs[split].float()), ys[split]))

    prior = torch.bincount(ys["train"], minlength=task.num_classes).double() / len(ys["train"])
    constant = task.head_from(torch.zeros(task.num_classes, xs["train"].shape[1]), prior.clamp_min(1e-12).log())
    one_hot = F.one_hot(ys["train"], task.num_classes).double()
    w, b, _ = ridge_path(xs["train"], one_hot, lambda w, b: ce(task.head_from(w, b), "val"))
    logistic, _ = choose_alpha(task.head_fit(xs["train"], ys["train"]), lambda head: ce(head, "val"))
    out = {}
    for name, head in zip(HEADS, (constant, task.head_from(w, b), logistic), strict=True):
        predicted = task.predict(head, xs["test"].float()).numpy()
        mcc = matthews_corrcoef(ys["test"].numpy(), predicted, task.num_classes)
        out[name] = [ce(head, split) for split in SPLITS] + [mcc]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/acl18.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    ws = prepare_workspace(load_config(args.config, None, args.overrides))
    x = next(iter(ws.learners.values())).features.embedding.double()  # the frozen pooled state (cached)
    y = torch.as_tensor(ws.table.targets).long()
    results = []
    for learner in ws.learners.values():
        assert isinstance(learner.task, ClassificationTask), "a classification config (ACL18, BigData22)"
        rows = {s: torch.as_tensor(learner.data.split(s)) for s in SPLITS}
        results.append(
            client_heads(learner.task, {s: x[r] for s, r in rows.items()}, {s: y[r] for s, r in rows.items()})
        )
    k = len(results)
    print(f"{k} clients; mean cross-entropy over clients (train / val / test), clients below the prior in sample, "
          "test MCC (client macro)")  # fmt: skip
    for name in HEADS:
        table = np.array([r[name] for r in results])  # [clients, train / val / test / MCC]
        beats = int(sum(r[name][0] < r["prior"][0] - 1e-9 for r in results))
        parts = " / ".join(f"{v:.4f}" for v in table[:, :3].mean(0))
        print(f"{name:26s} {parts}   {beats}/{k}   MCC {table[:, 3].mean():+.4f}")


if __name__ == "__main__":
    main()
