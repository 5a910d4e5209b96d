"""L2-penalized (ridge) logistic regression: the classification head's counterpart of the ridge fit.

``train.head_start: ridge`` and ``head_update: ridge`` give a head the penalized optimum of its task's loss on
the client's training rows. For a regression head that is the closed-form ridge solution (`fedloom.tasks.ridge`);
for a classifier the loss is cross-entropy, whose penalized optimum has no closed form but is a convex problem
scikit-learn solves to tolerance (L-BFGS). Before this module a classifier took the least-squares fit on one-hot
classes as its logits: scores that rank rows well but are not log-odds (their differences stay within ±1), so
its cross-entropy on its own training rows was above the class prior's, the constant it must beat (beyond seed
000, which starts the head at random).

As in the ridge fit, the features are standardized with the training rows' mean and std before the solve (the
penalty then treats every feature alike; the intercept is not penalized) and the solution is mapped back to the
raw features, so the head stays logits = W x + b on what the model computes:

    min_{w, b}  Σ_i CE(softmax(w z_i + b), y_i) + (α / 2) ‖w‖²,   z = (x − μ) / σ

At the optimum the intercept's gradient vanishes, Σ_i (p_i − onehot(y_i)) = 0: the fitted probabilities
average to the training class frequencies, so with w = 0 among the candidates the in-sample cross-entropy is at
most the prior's. Two classes come back as symmetric logits (−s/2, s/2), whose softmax is the binary fit's
σ(s).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from fedloom.tasks.ridge import feature_scale

MAX_ITER = 5000  # L-BFGS iterations; the fits here converge in ~10-100 (tolerance below)
TOL = 1e-8


def logistic(x: Tensor, classes: Tensor, alpha: float, num_classes: int) -> tuple[Tensor, Tensor]:
    """The penalized logistic fit of class indices ``classes`` [n] on ``x`` [n, d] with penalty ``alpha`` per
    standardized feature: (W [num_classes, d], b [num_classes]) as logits on the raw features, float64. A class
    absent from the rows gets a logit log(n + 1) below the lowest present one (a probability below 1 / (n + 1)
    where the fit would send it to zero); with a single class present the weights are 0."""
    from sklearn.linear_model import LogisticRegression  # on use: importing a task stays light

    xd = x.double()
    y = classes.long().numpy()
    n, d = xd.shape
    if n == 0:
        return torch.zeros(num_classes, d, dtype=torch.float64), torch.zeros(num_classes, dtype=torch.float64)
    mu = xd.mean(0)
    scale = feature_scale(mu, xd.std(0, correction=0))
    present = np.unique(y)
    w = torch.zeros(num_classes, d, dtype=torch.float64)
    b = torch.zeros(num_classes, dtype=torch.float64)
    if len(present) > 1:
        model = LogisticRegression(C=1.0 / alpha, max_iter=MAX_ITER, tol=TOL)
        model.fit(((xd - mu) / scale).numpy(), y)
        coef, intercept = torch.from_numpy(model.coef_), torch.from_numpy(model.intercept_)
        if len(present) == 2:  # one score s for the second class: symmetric logits (−s/2, s/2)
            coef = torch.cat([-coef / 2, coef / 2])
            intercept = torch.cat([-intercept / 2, intercept / 2])
        rows = torch.as_tensor(present)
        w[rows], b[rows] = coef / scale, intercept - (coef / scale) @ mu
    absent = np.setdiff1d(np.arange(num_classes), present)
    if len(absent):
        b[torch.as_tensor(absent)] = float(b[torch.as_tensor(present)].min()) - math.log(n + 1)
    return w, b
