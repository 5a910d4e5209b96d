"""Atomic checkpoints and exact resume."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from fedloom.algorithms.base import Record
from fedloom.algorithms.fedavg import FedAvg
from fedloom.errors import FedloomError
from fedloom.runs.methods import build_method
from fedloom.runs.workspace import prepare_workspace
from fedloom.runtime.checkpoint import Checkpoint, CheckpointStore, file_sha256
from fedloom.runtime.config import FederationConfig
from fedloom.runtime.simulation import InProcessRuntime
from tests.conftest import small_config


def _ckpt(rnd: int) -> Checkpoint:
    return Checkpoint(
        round=rnd,
        server=Record({"w": torch.randn(3, 2)}, {"step": rnd, "beta": 0.9, "name": "s", "flag": True}),
        clients={"a/b c": Record({"h": torch.randn(4)}, {}), "x": Record({}, {"n": 7})},
        history=[{"round": r} for r in range(1, rnd + 1)],
        config_digest="abc",
    )


def test_round_trip_is_exact_and_restores_rng(tmp_path):
    store = CheckpointStore(tmp_path)
    ck = _ckpt(2)
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    store.save(ck)
    expected = (torch.rand(1), np.random.rand(), random.random())
    torch.manual_seed(99)
    np.random.seed(99)
    random.seed(99)
    back = store.load()
    assert (torch.rand(1), np.random.rand(), random.random()) == expected
    assert back.round == 2 and back.config_digest == "abc" and back.history == ck.history
    assert torch.equal(back.server.tensors["w"], ck.server.tensors["w"])
    assert back.server.scalars == ck.server.scalars
    assert set(back.clients) == {"a/b c", "x"}
    assert torch.equal(back.clients["a/b c"].tensors["h"], ck.clients["a/b c"].tensors["h"])
    assert back.clients["x"].scalars == {"n": 7}


def test_latest_moves_only_after_a_complete_write_and_old_ones_are_pruned(tmp_path):
    store = CheckpointStore(tmp_path)
    assert store.load() is None
    store.save(_ckpt(1))
    store.save(_ckpt(2))
    assert (tmp_path / "LATEST").read_text().split()[0] == "round-00002"
    assert sorted(p.name for p in tmp_path.glob("round-*")) == ["round-00002"]
    (tmp_path / ".round-00003-half").mkdir()  # a write killed half-way leaves only a hidden staging dir
    assert store.load().round == 2


def test_unreadable_checkpoint_is_a_clear_error(tmp_path):
    store = CheckpointStore(tmp_path)
    store.save(_ckpt(1))
    (tmp_path / "round-00001" / "server.safetensors").write_bytes(b"garbage")
    with pytest.raises(FedloomError, match=r"server\.safetensors is missing or does not match its sha256"):
        store.load()


def test_pruning_goes_by_round_number_and_never_removes_the_new_checkpoint(tmp_path):
    store = CheckpointStore(tmp_path)
    store.save(_ckpt(3))  # a longer run left in the same folder
    store.save(_ckpt(2))
    assert store.load().round == 2
    assert sorted(p.name for p in tmp_path.glob("round-*")) == ["round-00002"]
    store.save(_ckpt(99999))
    store.save(_ckpt(100000))  # sorts before round-99999 as text
    assert store.load().round == 100000
    assert sorted(p.name for p in tmp_path.glob("round-*")) == ["round-100000"]


def test_keep_two_keeps_the_two_latest_rounds(tmp_path):
    store = CheckpointStore(tmp_path, keep=2)
    for rnd in (8, 9, 10):
        store.save(_ckpt(rnd))
    assert sorted(p.name for p in tmp_path.glob("round-*")) == ["round-00009", "round-00010"]


@pytest.mark.parametrize("pointer", ["../../other/checkpoints/round-00001", "round-00007", "state.json"])
def test_latest_must_name_a_checkpoint_inside_the_store(tmp_path, pointer):
    other = tmp_path / "other" / "checkpoints"
    CheckpointStore(other).save(_ckpt(1))
    store = CheckpointStore(tmp_path / "run" / "checkpoints")
    store.save(_ckpt(1))
    (store.folder / "LATEST").write_text(pointer)
    with pytest.raises(FedloomError, match="not a checkpoint folder in"):
        store.load()


def test_a_flipped_bit_is_named_by_file(tmp_path):
    store = CheckpointStore(tmp_path)
    store.save(_ckpt(1))
    path = tmp_path / "round-00001" / "client-00000.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # inside the tensor data: the file still loads, with a different value
    path.write_bytes(bytes(data))
    with pytest.raises(FedloomError, match=r"client-00000\.safetensors is missing or does not match its sha256"):
        store.load()


def test_a_wrong_shaped_tensor_is_refused(tmp_path):
    store = CheckpointStore(tmp_path)
    store.save(_ckpt(1))
    save_file({"w": torch.zeros(5)}, tmp_path / "round-00001" / "server.safetensors")
    with pytest.raises(FedloomError, match=r"server\.safetensors is missing or does not match its sha256"):
        store.load()


@pytest.mark.parametrize("field", ["rng", "sha256", "clients"])
def test_a_state_json_without_a_field_names_it(tmp_path, field):
    store = CheckpointStore(tmp_path)
    store.save(_ckpt(1))
    path = tmp_path / "round-00001" / "state.json"
    state = json.loads(path.read_text())
    del state[field]
    path.write_text(json.dumps(state))
    digest = file_sha256(path)  # as a faulty writer would have left it: the digest agrees, the schema not
    (path.parent / "state.sha256").write_text(digest)
    (tmp_path / "LATEST").write_text(f"round-00001 {digest}")
    with pytest.raises(FedloomError, match=rf"state.json is malformed \({field}: Field required"):
        store.load()


def _edit_state(store: CheckpointStore, rnd: int, edit) -> None:
    path = store.folder / f"round-{rnd:05d}" / "state.json"
    state = json.loads(path.read_text())
    edit(state)
    path.write_text(json.dumps(state))


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: s.update(clients=s["clients"][::-1]),  # two client ids swapped: their states would trade places
        lambda s: s["history"][0].update(round=7),  # one digit of the history
        lambda s: s["server_scalars"].update(beta=0.8),
    ],
)
def test_an_edited_state_json_is_refused(tmp_path, edit):
    store = CheckpointStore(tmp_path)
    store.save(_ckpt(1))
    _edit_state(store, 1, edit)
    with pytest.raises(FedloomError, match=r"state\.json does not match its sha256"):
        store.load()
    with pytest.raises(FedloomError, match="does not match its sha256"):
        store.load(round=1)


def test_without_latest_the_newest_intact_round_folder_is_the_checkpoint(tmp_path):
    store = CheckpointStore(tmp_path, keep=2)
    for rnd in (2, 3):
        store.save(_ckpt(rnd))
    (tmp_path / "LATEST").unlink()
    assert store.newest() == (3, "abc") and store.load().round == 3
    _edit_state(store, 3, lambda s: s.update(round=4))  # the newest folder edited: refused, not skipped silently
    with pytest.raises(FedloomError, match=r"round-00003/state\.json does not match"):
        store.load()


def test_latest_pointing_at_another_round_with_the_newest_digest_is_refused(tmp_path):
    store = CheckpointStore(tmp_path, keep=2)
    for rnd in (2, 3):
        store.save(_ckpt(rnd))
    digest = (tmp_path / "LATEST").read_text().split()[1]
    (tmp_path / "LATEST").write_text(f"round-00002 {digest}")  # rewinds the run by a round
    with pytest.raises(FedloomError, match="does not match its sha256"):
        store.load()


@pytest.mark.parametrize("method", ["fedavg", "rpa-improved", "fedavg-kept-optimizer", "fedavg-every-fit"])
def test_resume_after_round_2_of_4_is_bit_exact(tmp_path, method):
    """Also for RPA's improved routing, whose round-2 checkpoint sits inside its 3-round warm-up (summed
    sketches per client, prototype velocity), and for clients that keep their AdamW moments from round to
    round (train.optimizer_state: keep, with ridge heads refitted each round around shrunk intercepts): the moments
    are in the checkpointed states, and the intercepts' exchange is counted once, in round 1; and for heads whose
    α validation re-chooses at every refit (train.alpha_choice: every_fit), a function of the parameters alone."""
    run_cfg = small_config(method="rpa", **{"methods.rpa.routing": "improved", "methods.rpa.warm_start_rounds": 3})
    kept = method == "fedavg-kept-optimizer"
    recipe = {"train.optimizer_state": "keep", "train.head_start": "ridge", "train.head_update": "ridge",
              "train.head_intercept": "shrunk"} if kept else {}  # fmt: skip
    if method == "fedavg-every-fit":
        recipe = {"train.head_start": "ridge", "train.head_update": "ridge", "train.alpha_choice": "every_fit"}
    ws = prepare_workspace(small_config(**recipe))
    cfg = FederationConfig(fraction=0.67, eval_every=2)

    def runtime(learners=ws.learners):
        fedavg = method.startswith("fedavg")
        algorithm = FedAvg(small_config().train) if fedavg else build_method(run_cfg, ws.lm, server=True)
        return InProcessRuntime(algorithm, learners, cfg, seed=3)

    straight = runtime().run(ws.shared_init, rounds=4)
    store = CheckpointStore(tmp_path)
    runtime().run(ws.shared_init, rounds=2, checkpoints=store)
    if kept:  # the moments travel in the private states, under the memory prefix, never in an upload
        assert all(any(k.startswith("optim/") for k in s.tensors) for s in store.load().clients.values())
    if method == "rpa-improved":  # the checkpoint holds the warm-up's per-client sums and the velocity
        saved = store.load().server.tensors
        assert "velocity" in saved and any(k.startswith("sketch/") for k in saved)
    # every_fit: the resumed run's learners are fresh (no α, no refit remembered), as in a new process
    fresh = prepare_workspace(small_config(**recipe)).learners if method == "fedavg-every-fit" else ws.learners
    resumed = runtime(fresh).run(ws.shared_init, rounds=4, resume_from=store.load())
    for key, value in straight.server.tensors.items():
        assert torch.equal(resumed.server.tensors[key], value), key
    for cid, state in straight.clients.items():
        for key, value in state.tensors.items():
            assert torch.equal(resumed.clients[cid].tensors[key], value), (cid, key)
    assert [r.round for r in resumed.history] == [1, 2, 3, 4]
    assert resumed.history[-1].summary == straight.history[-1].summary
    assert [r.upload_bytes for r in resumed.history] == [r.upload_bytes for r in straight.history]
