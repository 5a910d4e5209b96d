"""Which owner a SuperNode is, proven by its key rather than claimed by its config (issue 19).

A node names its client through ``partition-id`` / ``client-id`` in its own ``--node-config``, so by
itself nothing stops one node from claiming another owner's slot. When the operator lists each
client's public key (``federation.identities``: the OpenSSH public key the owner registered with
``flwr supernode register``, or a path to its ``.pub`` file), the server sends every new node a fresh
nonce with its QUERY, and the node signs ``(run key, client id, nonce)`` with the private key named by
its ``identity-key`` node config (the file it gives ``--auth-supernode-private-key``). A claim whose
signature does not verify against that client's key is refused and logged; the node gets no slot.
ECDSA (what ``ssh-keygen -t ecdsa`` and Flower use) and Ed25519 keys are accepted.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from fedloom.errors import ConfigError

PublicKey = ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey
KEY_TYPES = ("ecdsa-sha2-", "ssh-ed25519")


def new_nonce() -> str:
    """A fresh challenge for one node's QUERY."""
    return secrets.token_hex(16)


def claim(run_key: str, client: str, nonce: str) -> bytes:
    """The bytes a node signs: bound to this run, this client and this challenge (no replay elsewhere)."""
    return f"fedloom-identity\n{run_key}\n{client}\n{nonce}".encode()


def public_key(spec: str, client: str) -> PublicKey:
    """``spec`` as a public key: an OpenSSH public key line, or the path of a file holding one."""
    text = spec.strip()
    if not text.startswith(KEY_TYPES):
        try:
            text = Path(text).expanduser().read_text().strip()
        except OSError as exc:
            raise ConfigError(f"federation.identities.{client}: cannot read {spec!r} ({exc.strerror})") from None
    if "PRIVATE KEY" in text.split("\n", 1)[0]:  # never echo it: its first line says enough
        raise ConfigError(f"federation.identities.{client}: {spec!r} is a private key; list the owner's public "
                          "key (.pub) here, and leave the private key on the owner's node")  # fmt: skip
    try:
        key = serialization.load_ssh_public_key(text.encode())
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ConfigError(f"federation.identities.{client}: not an OpenSSH public key") from None
    if not isinstance(key, PublicKey):
        raise ConfigError(f"federation.identities.{client}: use an ECDSA or Ed25519 key, not {type(key).__name__}")
    return key


def sign(private_key_path: str, message: bytes) -> str:
    """Hex signature of ``message`` with the node's OpenSSH private key (unencrypted, as Flower needs it)."""
    try:
        key = serialization.load_ssh_private_key(Path(private_key_path).expanduser().read_bytes(), password=None)
    except OSError as exc:
        raise ConfigError(f"node identity-key {private_key_path!r}: cannot read it ({exc.strerror})") from None
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ConfigError(f"node identity-key {private_key_path!r}: not an unencrypted OpenSSH private key") from None
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(message, ec.ECDSA(hashes.SHA256())).hex()
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(message).hex()
    raise ConfigError(f"node identity-key {private_key_path!r}: use an ECDSA or Ed25519 key")


def verify(key: PublicKey, message: bytes, signature: str) -> bool:
    """Whether ``signature`` (hex) is ``key``'s signature of ``message``."""
    try:
        raw = bytes.fromhex(signature)
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(raw, message, ec.ECDSA(hashes.SHA256()))
        else:
            key.verify(raw, message)
    except (InvalidSignature, ValueError):
        return False
    return True
