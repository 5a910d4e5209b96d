"""Robust aggregation and DP uploads of the FedAvg family: rules on hand-computed cases, one
malicious client against each rule, the noise scale σ·C on a fixed seed, and the accountant."""

from __future__ import annotations

import math

import pytest
import torch

from fedloom.algorithms.config import RobustConfig
from fedloom.algorithms.fedavg import FedAvg
from fedloom.algorithms.privacy import epsilon, privatize
from fedloom.algorithms.registry import build_algorithm
from fedloom.algorithms.robust import clip_update, robust_average, trimmed_mean
from fedloom.errors import ConfigError
from fedloom.experiments.methods import method_context
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
    from fedloom.experiments.workspace import prepare_workspace

    return prepare_workspace(small_config())


def _one_round(workspace, algo):
    from fedloom.runtime.config import FederationConfig
    from fedloom.runtime.simulation import InProcessRuntime

    return InProcessRuntime(algo, workspace.learners, FederationConfig(), seed=0).run(workspace.shared_init, 1)


def _distance(a, b):
    return math.sqrt(sum(float((a[k] - b[k]).pow(2).sum()) for k in b))


@pytest.mark.parametrize("rule", ["trimmed_mean", "norm_bound"])
def test_a_scaled_update_is_contained(workspace, rule):
    local = small_config().train
    honest = _one_round(workspace, FedAvg(local)).server.tensors
    attacked = _one_round(workspace, Attacker(local)).server.tensors
    cfg = RobustConfig(rule=rule, trim_fraction=0.34, norm_bound=0.05)
    defended = _one_round(workspace, Attacker(local, robust=cfg)).server.tensors
    start = {k: v for k, v in workspace.shared_init.items() if k in honest}
    damage, left = _distance(attacked, honest), _distance(defended, honest)
    assert damage > 10 * _distance(honest, start)  # the attack works on the plain mean
    assert left < 0.2 * damage
    if rule == "norm_bound":  # every update is at most M long, so their weighted mean is too
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
