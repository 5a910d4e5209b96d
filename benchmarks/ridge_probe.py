"""How much signal do the frozen features carry? RidgeCV on the adapter-free pooled hidden states,
fitted per client and on all clients' training rows pooled; macro test IC. Not a test.

    python benchmarks/ridge_probe.py --set data.synthetic.days=48
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from sklearn.linear_model import RidgeCV

from fedloom.metrics.cross_section import daily_ic
from fedloom.runs.config import load_config
from fedloom.runs.workspace import prepare_workspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/default.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    ws = prepare_workspace(load_config(args.config, None, args.overrides))
    lm, feats = ws.lm, next(iter(ws.learners.values())).features
    n = len(ws.table)
    with torch.no_grad():
        X = torch.cat(
            [
                lm.pooled_from_prefix(*feats.prefix_batch(lm, np.arange(s, min(n, s + 64))), None)
                for s in range(0, n, 64)
            ]
        ).numpy()
    y, d = ws.table.targets, ws.table.dates
    alphas = np.logspace(-2, 4, 13)

    def test_ic(model: RidgeCV, rows: np.ndarray) -> float:
        return float(daily_ic(model.predict(X[rows]), y[rows], d[rows]).mean())

    per = [
        test_ic(RidgeCV(alphas=alphas).fit(X[lr.data.train], y[lr.data.train]), lr.data.test)
        for lr in ws.learners.values()
    ]
    union = np.concatenate([lr.data.train for lr in ws.learners.values()])
    pooled = RidgeCV(alphas=alphas).fit(X[union], y[union])
    union_ic = np.mean([test_ic(pooled, lr.data.test) for lr in ws.learners.values()])
    print(f"per-client ridge IC {np.mean(per):.3f}   pooled ridge IC {union_ic:.3f}")


if __name__ == "__main__":
    main()
