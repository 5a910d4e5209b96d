"""Secure aggregation's arithmetic: the weighted mean SecAgg+ reveals, each summable method's server
step from that mean alone equal to its ordinary rule, the in-process emulation equal to a plain run,
and clear refusals for methods and options that need individual uploads."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedloom.algorithms.base import NUM_EXAMPLES, Record
from fedloom.algorithms.registry import build_algorithm
from fedloom.errors import ConfigError
from fedloom.runs.methods import method_context
from fedloom.runs.workspace import prepare_workspace
from fedloom.runtime.config import FederationConfig, SecureAggregationConfig
from fedloom.runtime.secure import masked_bytes, weighted_mean
from fedloom.runtime.simulation import InProcessRuntime
from tests.conftest import small_config

SECURE = SecureAggregationConfig(enabled=True)


def test_weighted_mean_by_hand():
    ups = [Record({"w": torch.tensor([1.0, 2.0])}, {NUM_EXAMPLES: 1}),
           Record({"w": torch.tensor([4.0, -1.0])}, {NUM_EXAMPLES: 3})]  # fmt: skip
    mean = weighted_mean(ups)
    assert torch.equal(mean.tensors["w"], torch.tensor([(1 + 12) / 4, (2 - 3) / 4]))
    assert mean.scalars[NUM_EXAMPLES] == 4
    assert masked_bytes(mean) == 4 * 3  # two masked entries and the masked weight, mod 2^32


@pytest.fixture(scope="module")
def workspace():
    return prepare_workspace(small_config())


def _algorithm(workspace, method: str, **options):
    cfg = small_config(method=method, **options)
    return build_algorithm(method, method_context(cfg, workspace.lm.layout.slot(), workspace.lm))


@pytest.mark.parametrize(
    ("method", "options"),
    [("fedavg", {}), ("fedavgm", {}), ("ffa-lora", {}), ("fedsa-lora", {}), ("fedprox", {}), ("fedper", {}),
     ("fedrep", {}), ("ditto", {}), ("fdlora", {}), ("feddpa", {}), ("scaffold", {}), ("fedbiot", {}), ("rpa", {}),
     ("rpa", {"methods.rpa.decomposition": "naive"})],
)  # fmt: skip
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), counts=st.lists(st.integers(1, 50), min_size=1, max_size=4))
def test_step_from_the_mean_equals_the_ordinary_rule(workspace, method, options, seed, counts):
    """aggregate_mean(server, Σ n_i s(u_i) / Σ n_i) == aggregate(server, {u_i}) for random uploads u_i."""
    algo = _algorithm(workspace, method, **options)
    assert algo.summable
    ids = sorted(workspace.learners)
    server = algo.init_server(workspace.shared_init, ids)
    download = algo.configure(server, ids[:1], 1)[ids[0]]
    spec = algo.upload_spec(download, ids[0]).tensors
    g = torch.Generator().manual_seed(seed)
    uploads = {}
    for i, n in enumerate(counts):
        tensors = {k: torch.randn(shape, generator=g) for k, shape in spec.entries}
        if method == "rpa":  # a route lives on the simplex
            tensors["route"] = torch.softmax(torch.randn(tensors["route"].shape, generator=g), 0)
        uploads[f"c{i}"] = Record(tensors, {NUM_EXAMPLES: n})
    want = algo.aggregate(server, uploads, 1)
    got = algo.aggregate_mean(server, weighted_mean([algo.secure_upload(u) for u in uploads.values()]), 1)
    assert set(got.tensors) == set(want.tensors)
    for key, value in want.tensors.items():
        torch.testing.assert_close(got.tensors[key], value, atol=1e-5, rtol=1e-5)


def test_secure_run_in_process_equals_plain_run(workspace):
    """With a float32 wire, FedAvg under the secure arithmetic ends where plain FedAvg does; each
    client is counted as uploading masked entries and the server never holds an individual upload."""
    results = []
    for secure in (SecureAggregationConfig(), SECURE):
        cfg = FederationConfig(wire_dtype="float32", secure_aggregation=secure, eval_every=2)
        algo = _algorithm(workspace, "fedavg")
        results.append(InProcessRuntime(algo, workspace.learners, cfg, seed=0).run(workspace.shared_init, 2))
    plain, secure = results
    for key, value in plain.server.tensors.items():
        torch.testing.assert_close(secure.server.tensors[key], value, atol=1e-6, rtol=1e-5)
    record = secure.history[-1]
    entries = sum(v.numel() for v in workspace.shared_init.values())
    assert record.upload_bytes == {c: 4 * (entries + 1) for c in workspace.learners}
    assert record.bytes_by_group["upload"] == {"masked": 4 * (entries + 1) * len(workspace.learners)}
    assert set(record.train) == set(workspace.learners) and record.aggregated


@pytest.mark.parametrize(
    ("method", "federation", "options", "match"),
    [("fedex-lora", {}, {}, "fedex-lora cannot run with secure aggregation"),
     ("flexlora", {}, {}, "flexlora cannot run with secure aggregation"),
     ("flora", {}, {}, "flora cannot run with secure aggregation"),
     ("fwdllm", {}, {}, "fwdllm cannot run with secure aggregation"),
     ("fedlease", {}, {}, "fedlease cannot run with secure aggregation"),
     ("fedweave", {}, {}, "fedweave cannot run with secure aggregation"),
     ("fedavg", {}, {"robust.rule": "trimmed_mean"}, "fedavg cannot run with secure aggregation"),
     ("fedavg", {"max_update_norm": 1.0}, {}, "max_update_norm")],
)  # fmt: skip
def test_methods_needing_individual_uploads_are_refused(workspace, method, federation, options, match):
    algo = _algorithm(workspace, method, **options)
    cfg = FederationConfig(secure_aggregation=SECURE, **federation)
    with pytest.raises(ConfigError, match=match):
        InProcessRuntime(algo, workspace.learners, cfg, seed=0)
