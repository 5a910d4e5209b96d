"""How far each robust rule lets f of N = 10 clients move the model (issue 19, item 5).

Synthetic updates (labelled as such: no model is trained): every honest client sends
Δ_k = s·(μ + ε_k) with ‖μ‖ = 1, ε_k ~ N(0, σ²I), σ√d = 1, d = 4096, claiming 100 samples; the
scale s = 1/150 puts the old fixed default M = 1.0 at ~150× an honest step, as measured on SmolLM2
(issue 19). Attackers:

* scaled: 100 × an honest-looking update (model replacement);
* sign_flip: −Δ_k;
* constant: every coordinate 10/√d (norm 10, a fixed direction);
* count_inflation: −Δ_k claiming 10⁹ samples.

Reported: ‖aggregate − honest mean‖ / ‖honest mean‖, the damage in units of the honest step,
median over 20 seeded draws. Run: ``python benchmarks/robust.py [--out FILE.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from fedloom.algorithms.config import RobustConfig
from fedloom.algorithms.robust import robust_average

N, D, SIGMA, SCALE, DRAWS = 10, 4096, 1.0 / 64, 1.0 / 150, 20  # honest noise norm σ√d = 1 = ‖μ‖
RULES = {
    "mean": RobustConfig(),
    "trimmed_mean β=0.2": RobustConfig(rule="trimmed_mean", trim_fraction=0.2),
    "median": RobustConfig(rule="median"),
    "norm_bound (M = median norm)": RobustConfig(rule="norm_bound"),
    "norm_bound M=1.0 (old default)": RobustConfig(rule="norm_bound", norm_bound=1.0, weight_cap=1e12),
    "krum f=3": RobustConfig(rule="krum", byzantine=3),
    "multi_krum f=3": RobustConfig(rule="multi_krum", byzantine=3),
}
ATTACKS = ("scaled", "sign_flip", "constant", "count_inflation")


def attack(kind: str, honest: torch.Tensor) -> tuple[torch.Tensor, float]:
    """An attacker's update and claimed sample count, given the update it would honestly send."""
    if kind == "scaled":
        return 100 * honest, 100.0
    if kind == "sign_flip":
        return -honest, 100.0
    if kind == "constant":
        return torch.full_like(honest, 10 * SCALE / D**0.5), 100.0
    return -honest, 1e9


def damage(rule: RobustConfig, kind: str, f: int, seed: int) -> float:
    g = torch.Generator().manual_seed(seed)
    mu = torch.randn(D, generator=g)
    mu /= mu.norm()
    updates = [SCALE * (mu + SIGMA * torch.randn(D, generator=g)) for _ in range(N)]
    honest_mean = torch.stack(updates[f:]).mean(0)
    sent = [attack(kind, u) for u in updates[:f]] + [(u, 100.0) for u in updates[f:]]
    current = {"w": torch.zeros(D)}
    out = robust_average(current, [{"w": u} for u, _ in sent], [w for _, w in sent], rule)["w"]
    return float((out - honest_mean).norm() / honest_mean.norm())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    args = parser.parse_args()
    results = {
        name: {kind: [statistics.median(damage(cfg, kind, f, s) for s in range(DRAWS)) for f in range(5)]
               for kind in ATTACKS}
        for name, cfg in RULES.items()
    }  # fmt: skip
    print(f"damage ‖aggregate − honest mean‖ / ‖honest mean‖, N = {N}, median of {DRAWS} draws; f = 0 1 2 3 4")
    for kind in ATTACKS:
        print(f"\n{kind}\n| rule | f=0 | f=1 | f=2 | f=3 | f=4 |\n|---|---|---|---|---|---|")
        for name in RULES:
            print(f"| {name} | " + " | ".join(f"{v:.3g}" for v in results[name][kind]) + " |")
    if args.out:
        args.out.write_text(
            json.dumps({"n": N, "d": D, "sigma": SIGMA, "scale": SCALE, "draws": DRAWS, "damage": results}, indent=1)
        )


if __name__ == "__main__":
    main()
