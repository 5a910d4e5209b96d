"""A neural reference trained federated (issue 18): the network without its output layer is the shared
model, a private head takes the output layer's place, and the unchanged algorithms train it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedloom.algorithms.base import LocalContext
from fedloom.algorithms.config import LocalTrainingConfig
from fedloom.algorithms.fedavg import FedAvg
from fedloom.data.schema import ClientData
from fedloom.errors import ConfigError
from fedloom.references.config import GRUConfig, MLPConfig
from fedloom.references.federated import NET_PREFIX, NetLearner, body_of, body_tensors
from fedloom.references.mlp import mlp
from fedloom.references.sequence import sequence_network
from fedloom.tasks.regression import HEAD_BIAS, HEAD_WEIGHT, RegressionTask


def _networks() -> list[nn.Module]:
    g = torch.Generator().manual_seed(0)
    return [
        mlp(6, 1, MLPConfig(hidden_sizes=[16, 8]), g, federated=True),
        sequence_network(2, 3, 1, GRUConfig(hidden_size=8, num_layers=2)),  # 2 fields × 3 lags
    ]


@pytest.mark.parametrize("net", _networks(), ids=["mlp", "gru"])
def test_body_and_the_output_layer_as_a_head_reproduce_the_network(net: nn.Module) -> None:
    """Split off the output Linear; its weights as the head give the whole network's output exactly."""
    net.eval()
    body, width = body_of(net)
    out_layer = net[-1] if isinstance(net, nn.Sequential) else net.head
    assert width == out_layer.in_features
    x = torch.randn(5, 6)
    head = {HEAD_WEIGHT: out_layer.weight.detach(), HEAD_BIAS: out_layer.bias.detach()}
    body.eval()
    scores = RegressionTask().scores(head, body(x))
    torch.testing.assert_close(scores, net(x).squeeze(1))
    assert not any(k.startswith("head") for k in body_tensors(body))  # the output layer left the shared tensors


def test_federated_mlp_has_no_running_statistics_and_batch_norm_is_refused() -> None:
    g = torch.Generator().manual_seed(0)
    federated = mlp(6, 1, MLPConfig(), g, federated=True)
    pooled = mlp(6, 1, MLPConfig(), g)
    assert any(isinstance(m, nn.LayerNorm) for m in federated.modules())
    assert not any(isinstance(m, nn.BatchNorm1d) for m in federated.modules())
    assert any(isinstance(m, nn.BatchNorm1d) for m in pooled.modules())  # Qlib's own, pooled or local
    forced = mlp(6, 1, MLPConfig(norm="batch"), g, federated=True)
    with pytest.raises(ConfigError, match="norm=layer"):
        body_tensors(body_of(forced)[0])


def _learner(seed: int, rows: int = 96) -> NetLearner:
    """A client whose target is a fixed linear rule of its 6 features, plus noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 6)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0, 0.5, 0.0, 0.0, 0.0]) + 0.1 * rng.normal(size=rows)).astype(np.float32)
    body, width = body_of(mlp(6, 1, MLPConfig(hidden_sizes=[16], dropout_rate=0.0), torch.Generator().manual_seed(1),
                              federated=True))  # fmt: skip
    data = ClientData(f"c{seed}", np.arange(64), np.arange(64, 80), np.arange(80, rows))
    dates = np.repeat(np.arange(rows // 8), 8).astype("datetime64[D]")
    return NetLearner(body, width, torch.from_numpy(x), y, dates, data, RegressionTask.fitted(y[:64]))


def test_fedavg_trains_the_whole_network_and_keeps_the_head_private() -> None:
    """FedAvg, unchanged, on a network: the download is every body tensor, the upload the trained ones,
    the head stays in the client's state; local training lowers the validation loss."""
    learner = _learner(0)
    init = body_tensors(learner.body)
    algo = FedAvg(LocalTrainingConfig(steps=60, batch_size=16, lr=1e-2, head_lr=1e-2))
    server = algo.init_server(init, ["c0"])
    assert set(server.tensors) == set(init) and all(k.startswith(NET_PREFIX) for k in init)
    state = algo.init_client(init, learner, torch.Generator().manual_seed(0))
    assert set(state.tensors) == {HEAD_WEIGHT, HEAD_BIAS}
    download = algo.configure(server, ["c0"], 1)["c0"]
    before = float(learner.loss(algo.client_model(download, state).params, learner.data.val))
    update = algo.local_update(download, state, LocalContext(learner, 1, torch.Generator().manual_seed(0)))
    assert set(update.upload.tensors) == set(init)
    assert any(not torch.equal(update.upload.tensors[k], init[k]) for k in init)  # the network trained
    after_params = algo.client_model(algo.configure(algo.aggregate(server, {"c0": update.upload}, 1), ["c0"], 2)["c0"],
                                     update.state).params  # fmt: skip
    after = float(learner.loss(after_params, learner.data.val))
    assert after < 0.5 * before
    predictions = learner.predict(after_params, "test")
    assert predictions.shape == (16,) and np.isfinite(predictions).all()
    ic = np.corrcoef(predictions, learner.eval_targets[learner.data.test].numpy())[0, 1]
    assert ic > 0.8


def test_a_cross_sectional_or_tree_reference_is_not_a_network_to_federate() -> None:
    from fedloom.runs.config import load_config
    from fedloom.runs.reference import federated_workspace

    for method in ("lightgbm", "linear"):
        cfg = load_config(None, {"method": method, "dataset": "synthetic"}, ["references.mode=federated"])
        with pytest.raises(ConfigError, match="scores one row at a time"):
            federated_workspace(cfg)
