"""The wire between a ClientApp process and its node's persistent worker: length-prefixed frames on
a Unix socket carrying the message type, the node config and the message content (Flower's own
protobuf encoding of the RecordDict). Standard library and Flower only, so that the per-message
ClientApp process that imports it stays light."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Mapping
from typing import Any

from flwr.app import RecordDict
from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict

_LENGTH = struct.Struct("!Q")
OK, FAILED = b"ok", b"failed"


class WorkerUnavailableError(RuntimeError):
    """No node worker listens on the configured socket."""


class WorkerError(RuntimeError):
    """The node worker raised while answering; carries what `Node.answer` lets leave the node."""


def send_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(_LENGTH.pack(len(data)) + data)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
    return _recv_exact(sock, size)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the other end closed the connection mid-frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def encode(content: RecordDict) -> bytes:
    return recorddict_to_proto(content).SerializeToString()


def decode(data: bytes) -> RecordDict:
    proto = ProtoRecordDict()
    proto.ParseFromString(data)
    return recorddict_from_proto(proto)


def relay(path: str, kind: str, content: RecordDict, node: Mapping[str, Any]) -> RecordDict:
    """Hand one message to the worker listening on ``path`` and return its reply content."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(path)
        except OSError as err:
            raise WorkerUnavailableError(
                f"no fedloom node worker at {path} ({err.strerror}); start one with "
                f"`fedloom node-worker --socket {path}` or drop `worker` from the node config"
            ) from err
        send_frame(sock, json.dumps({"kind": kind, "node": dict(node)}).encode())
        send_frame(sock, encode(content))
        status, body = recv_frame(sock), recv_frame(sock)
    if status != OK:
        raise WorkerError(f"the node worker failed: {body.decode(errors='replace')}")
    return decode(body)
