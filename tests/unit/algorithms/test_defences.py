"""Robust aggregation and DP uploads of the FedAvg family: rules on hand-computed cases, one
malicious client against each rule, the noise scale σ·C on a fixed seed, and the accountant."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedloom.algorithms.config import RobustConfig
from fedloom.algorithms.fedavg import FedAvg
from fedloom.algorithms.privacy import epsilon, privatize
from fedloom.algorithms.registry import build_algorithm
from fedloom.algorithms.robust import (
    capped_weights,
    clip_update,
    coordinate_median,
    krum_scores,
    krum_select,
    robust_average,
    robust_problem,
    robust_report,
    trimmed_mean,
)
from fedloom.errors import ConfigError
from fedloom.runs.methods import method_context
from tests.conftest import small_config


def test_trimmed_mean_by_hand():
    values = [{"w": torch.tensor([1.0, 10.0])}, {"w": torch.tensor([2.0, -50.0])},
              {"w": torch.tensor([3.0, 20.0])}, {"w": torch.tensor([400.0, 30.0])}]  # fmt: skip
    # per coordinate, drop 1 smallest and 1 largest: [2, 3] → 2.5 and [10, 20] → 15
    assert torch.equal(trimmed_mean(values, 0.25)["w"], torch.tensor([2.5, 15.0]))
    assert torch.equal(trimmed_mean(values, 0.0)["w"], torch.tensor([101.5, 2.5]))


def test_norm_bound_by_hand():
    current = {"w": torch.zeros(2)}
    values = [{"w": torch.tensor([3.0, 4.0])}, {"w": torch.tensor([0.1, 0.0])}]  # update norms 5 and 0.1
    out = robust_average(current, values, [1.0, 3.0], RobustConfig(rule="norm_bound", norm_bound=1.0))
    # [3, 4] is clipped to [0.6, 0.8]; weighted 1:3 with [0.1, 0]
    torch.testing.assert_close(out["w"], torch.tensor([(0.6 + 0.3) / 4, 0.8 / 4]))
    assert torch.equal(clip_update({"a": torch.tensor([0.3, 0.4])}, 1.0)["a"], torch.tensor([0.3, 0.4]))


def test_adaptive_norm_bound_is_a_multiple_of_the_median_norm():
    current = {"w": torch.zeros(2)}
    values = [{"w": torch.tensor([3.0, 4.0])}, {"w": torch.tensor([1.0, 0.0])}, {"w": torch.tensor([0.0, 2.0])}]
    cfg = RobustConfig(rule="norm_bound")  # norms 5, 1, 2: median 2, so M = 2
    out = robust_average(current, values, [1.0, 1.0, 1.0], cfg)
    torch.testing.assert_close(out["w"], torch.tensor([(1.2 + 1.0) / 3, (1.6 + 2.0) / 3]))
    report = robust_report(current, values, [1.0, 1.0, 1.0], cfg)
    assert report == {"robust_capped": 0, "robust_bound": 2.0, "robust_clipped": 1}


def test_claimed_counts_are_capped_at_a_multiple_of_the_median():
    assert capped_weights([10, 12, 1e9], 2.0) == [10, 12, 24.0]
    current = {"w": torch.zeros(1)}
    values = [{"w": torch.tensor([1.0])}, {"w": torch.tensor([1.0])}, {"w": torch.tensor([-1.0])}]
    out = robust_average(current, values, [10.0, 10.0, 1e9], RobustConfig(rule="norm_bound", norm_bound=5.0))
    # the liar's weight is 20 = 2 × median, not 1e9: (10 + 10 − 20) / 40
    torch.testing.assert_close(out["w"], torch.tensor([0.0]))
    plain = robust_average(current, values, [10.0, 10.0, 1e9], RobustConfig())
    assert float(plain["w"]) < -0.99  # the plain mean trusts the claim


def test_coordinate_median_by_hand():
    values = [{"w": torch.tensor([1.0, 10.0])}, {"w": torch.tensor([2.0, -50.0])},
              {"w": torch.tensor([3.0, 20.0])}, {"w": torch.tensor([400.0, 30.0])}]  # fmt: skip
    assert torch.equal(coordinate_median(values)["w"], torch.tensor([2.5, 15.0]))
    assert torch.equal(coordinate_median(values[:3])["w"], torch.tensor([2.0, 10.0]))


def test_krum_by_hand():
    # points 0, 1, 2 on a line and one far away; n = 4, f = 1: each scores its n − f − 2 = 1 nearest
    values = [{"w": torch.tensor([x])} for x in (0.0, 1.0, 3.0, 100.0)]
    assert krum_scores(values, 1) == [1.0, 1.0, 4.0, 97.0**2]
    assert krum_select(values, 1, 1) == [0]
    assert krum_select(values, 1, 3) == [0, 1, 2]
    cfg = RobustConfig(rule="multi_krum", byzantine=1)  # keeps n − f = 3
    torch.testing.assert_close(
        robust_average({"w": torch.zeros(1)}, values, [1, 1, 1, 1], cfg)["w"], torch.tensor([4 / 3])
    )


def test_rules_that_cannot_act_are_refused():
    assert "trims nothing" in robust_problem(RobustConfig(rule="trimmed_mean", trim_fraction=0.2), 4)
    assert robust_problem(RobustConfig(rule="trimmed_mean", trim_fraction=0.2), 5) is None
    assert "2f + 2" in robust_problem(RobustConfig(rule="krum", byzantine=1), 4)
    assert robust_problem(RobustConfig(rule="krum", byzantine=1), 5) is None
    algo = FedAvg(small_config().train, robust=RobustConfig(rule="trimmed_mean"))
    with pytest.raises(ConfigError, match="trims nothing at 3 clients per round"):
        algo.init_server({}, ["a", "b", "c"])


_updates = st.lists(st.lists(st.floats(-10, 10), min_size=3, max_size=3), min_size=5, max_size=9)


@settings(max_examples=60, deadline=None)
@given(_updates, st.floats(-1e3, 1e3))
def test_order_statistics_are_translation_equivariant_and_bounded(rows, shift):
    values = [{"w": torch.tensor(r, dtype=torch.float64)} for r in rows]
    shifted = [{"w": v["w"] + shift} for v in values]
    stacked = torch.stack([v["w"] for v in values])
    for rule in ("median", "trimmed_mean", "krum", "multi_krum"):
        cfg = RobustConfig(rule=rule, byzantine=1)
        out = robust_average({"w": torch.zeros(3)}, values, [1.0] * len(values), cfg)["w"].double()
        # every coordinate stays inside the clients' range (weighted means accumulate in float32)
        assert bool((out >= stacked.min(0).values - 1e-5).all() and (out <= stacked.max(0).values + 1e-5).all())
        if rule in ("median", "trimmed_mean"):  # order statistics commute with a shift (Krum may break ties anew)
            moved = robust_average({"w": torch.zeros(3)}, shifted, [1.0] * len(values), cfg)["w"]
            torch.testing.assert_close(moved, out + shift, rtol=0, atol=1e-9)


class Attacker(FedAvg):
    """FedAvg whose client ``energy`` scales its update by 100 (a model-replacement attempt)."""

    def local_update(self, download, state, ctx):
        update = super().local_update(download, state, ctx)
        if ctx.learner.client_id != "energy":
            return update
        scaled = {k: download.tensors[k] + 100 * (v - download.tensors[k]) for k, v in update.upload.tensors.items()}
        return type(update)(type(update.upload)(scaled, update.upload.scalars), update.state, update.metrics)


@pytest.fixture(scope="module")
def workspace():
    from fedloom.runs.workspace import prepare_workspace

    return prepare_workspace(small_config())


def _one_round(workspace, algo):
    from fedloom.runtime.config import FederationConfig
    from fedloom.runtime.simulation import InProcessRuntime

    return InProcessRuntime(algo, workspace.learners, FederationConfig(), seed=0).run(workspace.shared_init, 1)


def _distance(a, b):
    return math.sqrt(sum(float((a[k] - b[k]).pow(2).sum()) for k in b))


@pytest.mark.parametrize(("rule", "bound"), [("trimmed_mean", None), ("norm_bound", 0.05), ("norm_bound", None),
                                             ("median", None), ("krum", None)])  # fmt: skip
def test_a_scaled_update_is_contained(workspace, rule, bound):
    local = small_config().train
    honest = _one_round(workspace, FedAvg(local)).server.tensors
    attacked = _one_round(workspace, Attacker(local)).server.tensors
    cfg = RobustConfig(rule=rule, trim_fraction=0.34, norm_bound=bound, byzantine=0)  # default M: the median norm
    defended = _one_round(workspace, Attacker(local, robust=cfg)).server.tensors
    start = {k: v for k, v in workspace.shared_init.items() if k in honest}
    damage, left = _distance(attacked, honest), _distance(defended, honest)
    assert damage > 10 * _distance(honest, start)  # the attack works on the plain mean
    assert left < 0.2 * damage
    if bound is not None:  # every update is at most M long, so their weighted mean is too
        assert _distance(defended, start) <= 0.05 * (1 + 1e-3) + 0.01  # + bf16 rounding of the wire


def test_noise_scale_is_sigma_times_clip_on_a_fixed_seed():
    zeros = {"w": torch.zeros(200_000)}
    g = torch.Generator().manual_seed(7)
    out = privatize(zeros, clip=0.5, noise_multiplier=2.0, generator=g)["w"]
    expected = 0.5 * 2.0 * torch.randn(200_000, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(out, expected)
    assert float(out.std()) == pytest.approx(1.0, rel=0.01)
    big = {"w": torch.full((4,), 10.0)}
    clipped = privatize(big, clip=1.0, noise_multiplier=0.0, generator=g)["w"]
    assert float(clipped.norm()) == pytest.approx(1.0)


def test_accountant_is_opacus_rdp():
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    for _ in range(10):
        acc.step(noise_multiplier=1.1, sample_rate=0.3)
    assert epsilon(1.1, 0.3, 10, 1e-5) == pytest.approx(acc.get_epsilon(1e-5))
    assert epsilon(1.1, 0.3, 20, 1e-5) > epsilon(1.1, 0.3, 10, 1e-5) > epsilon(2.0, 0.3, 10, 1e-5)
    assert epsilon(1.0, 0.3, 0, 1e-5) == 0.0


def test_dp_run_reports_epsilon_every_round(workspace):
    from fedloom.runtime.simulation import InProcessRuntime

    cfg = small_config(**{"privacy.clip": 0.1, "privacy.noise_multiplier": 1.0, "federation.fraction": 0.67})
    algo = build_algorithm("fedavg", method_context(cfg))
    hist = InProcessRuntime(algo, workspace.learners, cfg.federation, seed=0).run(workspace.shared_init, 3).history
    eps = [r.diagnostics["dp_epsilon"] for r in hist]
    assert eps == sorted(eps) and eps[0] > 0
    assert eps[-1] == pytest.approx(epsilon(1.0, 0.67, 3, 1e-5))


def test_defences_are_refused_where_the_server_step_is_not_a_mean():
    cfg = small_config(**{"privacy.clip": 0.1})
    with pytest.raises(ConfigError, match="FedAvg family"):
        build_algorithm("rpa", method_context(cfg))
