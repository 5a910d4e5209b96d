"""A node must prove which owner it is with the owner's key when the operator lists identities (issue 19):
a node that claims another owner's client, or signs with a key the operator did not list, gets no slot."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from flwr.app import ConfigRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from fedloom.errors import ConfigError
from fedloom.runtime.flower.identity import claim, public_key, sign, verify
from fedloom.runtime.flower.node import IDENTITY, RUN, Federation, Node
from fedloom.runtime.flower.pool import FlowerClients
from fedloom.runtime.rounds import FederationConfig


def _keypair(folder: Path, name: str, kind: str = "ecdsa") -> tuple[str, str]:
    """An unencrypted OpenSSH private key file (as ssh-keygen writes it) and its public key line."""
    key = ec.generate_private_key(ec.SECP384R1()) if kind == "ecdsa" else ed25519.Ed25519PrivateKey.generate()
    path = folder / name
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))  # fmt: skip
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    (folder / f"{name}.pub").write_bytes(public + b" owner@host\n")
    return str(path), public.decode()


@pytest.mark.parametrize("kind", ["ecdsa", "ed25519"])
def test_a_signature_verifies_only_for_its_key_run_client_and_nonce(tmp_path, kind):
    private, public = _keypair(tmp_path, "owner", kind)
    _, other = _keypair(tmp_path, "other", kind)
    sig = sign(private, claim("run", "alice", "n1"))
    assert verify(public_key(public, "alice"), claim("run", "alice", "n1"), sig)
    assert verify(public_key(str(tmp_path / "owner.pub"), "alice"), claim("run", "alice", "n1"), sig)  # a .pub path
    assert not verify(public_key(other, "alice"), claim("run", "alice", "n1"), sig)
    for changed in (claim("run2", "alice", "n1"), claim("run", "bob", "n1"), claim("run", "alice", "n2")):
        assert not verify(public_key(public, "alice"), changed, sig)
    assert not verify(public_key(public, "alice"), claim("run", "alice", "n1"), "zz")


def test_bad_keys_are_one_line_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"identities\.alice: cannot read"):
        public_key(str(tmp_path / "missing.pub"), "alice")
    with pytest.raises(ConfigError, match=r"identities\.alice: not an OpenSSH public key"):
        public_key("ecdsa-sha2-nistp384 garbage", "alice")
    (tmp_path / "k").write_text("not a key")
    with pytest.raises(ConfigError, match="not an unencrypted OpenSSH private key"):
        sign(str(tmp_path / "k"), b"m")


class ClaimingGrid:
    """Nodes that each claim a client and sign the QUERY nonce with some key file (or none)."""

    def __init__(self, claims: dict[int, tuple[str, str | None]]) -> None:
        self.claims = claims

    def get_node_ids(self) -> list[int]:
        return list(self.claims)

    def send_and_receive(self, messages, timeout=None):
        self.asked = [m.metadata.dst_node_id for m in messages]
        replies = []
        for msg in messages:
            node = msg.metadata.dst_node_id
            cid, key = self.claims[node]
            info = {"client_id": cid, "primary_metric": "ic", "synthetic": True, "size/train": 4, "size/val": 2,
                    "size/test": 2}  # fmt: skip
            if key is not None:
                nonce = str(msg.content.config_records[IDENTITY]["nonce"])
                info["signature"] = sign(key, claim(str(msg.content.config_records[RUN]["run_key"]), cid, nonce))
            content, sender = RecordDict({"client": ConfigRecord(info)}), SimpleNamespace(src_node_id=node)
            replies.append(SimpleNamespace(content=content, metadata=sender, has_error=lambda: False))
        return replies


@pytest.fixture
def server_process(monkeypatch):
    for key in ("_run_id", "_node_id", "_task_id"):  # what a ServerApp process has set
        monkeypatch.setattr(TaskIdentity, key, 1)


def test_only_nodes_holding_the_listed_key_get_their_clients_slot(tmp_path, server_process, caplog):
    alice, alice_pub = _keypair(tmp_path, "alice")
    bob, bob_pub = _keypair(tmp_path, "bob")
    rogue, _ = _keypair(tmp_path, "rogue")  # registered with the SuperLink, maybe, but not listed for any client
    grid = ClaimingGrid({1: ("alice", alice), 2: ("bob", rogue), 3: ("bob", None), 4: ("carol", rogue)})
    fed = FederationConfig(identities={"alice": alice_pub, "bob": bob_pub})
    pool = FlowerClients(grid, "", fed, "run-key", num_nodes=4, connect_timeout=5)
    assert pool.nodes == {"alice": 1}
    assert "node 2 claims client 'bob' but did not sign with its registered key: refused" in caplog.text
    assert (
        "node 3 claims client 'bob'" in caplog.text and "node 4 claims client 'carol', which has no key" in caplog.text
    )
    grid.claims[5] = ("bob", bob)  # the owner's own node joins later and takes its slot
    grid.claims[6] = ("alice", rogue)  # a rogue node cannot take a slot that is already held either
    pool.refresh()
    assert pool.nodes == {"alice": 1, "bob": 5}
    assert sorted(grid.asked) == [5, 6]  # refused nodes are not asked again every round


def test_without_identities_the_claim_is_trusted_as_before(server_process):
    pool = FlowerClients(ClaimingGrid({1: ("alice", None)}), "", FederationConfig(), "k", num_nodes=1,
                         connect_timeout=5)  # fmt: skip
    assert pool.nodes == {"alice": 1}


def test_a_node_with_an_identity_key_signs_the_querys_nonce(tmp_path):
    key, public = _keypair(tmp_path, "alice")
    learner = SimpleNamespace(task=SimpleNamespace(primary_metric="ic"), data=SimpleNamespace(split=lambda s: [0, 1]))
    fed = Federation(algorithm=None, learners={"alice": learner, "bob": learner}, shared_init={}, seed=0,  # type: ignore[arg-type]
                     wire=None, synthetic=True)  # type: ignore[arg-type]  # fmt: skip
    node = Node(lambda config, node_config: fed)
    query = RecordDict({RUN: ConfigRecord({"round": 0, "config": "", "run_key": "rk"}),
                        IDENTITY: ConfigRecord({"nonce": "abc"})})  # fmt: skip
    info = node.query(query, {"partition-id": 0, "identity-key": key}).config_records["client"]
    assert info["client_id"] == "alice"
    assert verify(public_key(public, "alice"), claim("rk", "alice", "abc"), str(info["signature"]))
    assert "signature" not in node.query(query, {"partition-id": 0}).config_records["client"]
