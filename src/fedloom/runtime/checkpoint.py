"""Atomic round checkpoints: everything needed to continue a run exactly where it stopped.

    RUN_DIR/checkpoints/
      LATEST                 name of the newest complete checkpoint (replaced atomically)
      round-00003/
        state.json           round, config digest, scalars of every record, client index, history, RNG
        server.safetensors   server tensors
        client-00000.safetensors ...   one file per client (ids may not be valid file names)
        rng_torch.safetensors          torch's global RNG state

A checkpoint directory is written under a temporary name and renamed when complete; LATEST is
updated only after that, so a kill at any moment leaves the previous checkpoint usable.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from fedloom.algorithms.base import Record
from fedloom.errors import FedloomError

LATEST = "LATEST"


@dataclass
class Checkpoint:
    """State after ``round`` completed rounds."""

    round: int
    server: Record
    clients: dict[str, Record]
    history: list[dict[str, Any]]
    config_digest: str


def capture_rng() -> dict[str, Any]:
    state: tuple[Any, ...] = np.random.get_state()  # type: ignore[assignment]  # legacy=True: the tuple form
    return {
        "numpy": [state[0], state[1].tolist(), *state[2:]],
        "python": [random.getstate()[0], list(random.getstate()[1]), random.getstate()[2]],
    }


def restore_rng(saved: dict[str, Any], torch_state: torch.Tensor) -> None:
    n = saved["numpy"]
    np.random.set_state((n[0], np.array(n[1], dtype=np.uint32), *n[2:]))
    p = saved["python"]
    random.setstate((p[0], tuple(p[1]), p[2]))
    torch.set_rng_state(torch_state)


class CheckpointStore:
    """Saves and loads round checkpoints under one folder, keeping the newest ``keep``."""

    def __init__(self, folder: Path, keep: int = 1) -> None:
        self.folder = folder
        self.keep = keep

    def save(self, ckpt: Checkpoint) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"round-{ckpt.round:05d}"
        staging = Path(tempfile.mkdtemp(dir=self.folder, prefix=f".{name}-"))
        try:
            clients = sorted(ckpt.clients)
            _save_tensors(staging / "server.safetensors", ckpt.server.tensors)
            for i, cid in enumerate(clients):
                _save_tensors(staging / f"client-{i:05d}.safetensors", ckpt.clients[cid].tensors)
            save_file({"state": torch.get_rng_state()}, staging / "rng_torch.safetensors")
            state = {
                "round": ckpt.round,
                "config_digest": ckpt.config_digest,
                "server_scalars": dict(ckpt.server.scalars),
                "clients": clients,
                "client_scalars": [dict(ckpt.clients[c].scalars) for c in clients],
                "history": ckpt.history,
                "rng": capture_rng(),
            }
            (staging / "state.json").write_text(json.dumps(state))
            shutil.rmtree(self.folder / name, ignore_errors=True)
            staging.rename(self.folder / name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        pointer = self.folder / f".{LATEST}.tmp"
        pointer.write_text(name)
        pointer.replace(self.folder / LATEST)
        for old in sorted(self.folder.glob("round-*"))[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)

    def load(self, restore_random_state: bool = True) -> Checkpoint | None:
        """The newest complete checkpoint, or None when there is none."""
        pointer = self.folder / LATEST
        if not pointer.is_file():
            return None
        folder = self.folder / pointer.read_text().strip()
        try:
            state = json.loads((folder / "state.json").read_text())
            server = Record(load_file(folder / "server.safetensors"), state["server_scalars"])
            clients = {
                cid: Record(load_file(folder / f"client-{i:05d}.safetensors"), state["client_scalars"][i])
                for i, cid in enumerate(state["clients"])
            }
            torch_state = load_file(folder / "rng_torch.safetensors")["state"]
        except (OSError, KeyError, ValueError, SafetensorError) as exc:
            raise FedloomError(f"checkpoint {folder} is unreadable ({exc}); delete it to restart the run") from None
        if restore_random_state:
            restore_rng(state["rng"], torch_state)
        return Checkpoint(state["round"], server, clients, state["history"], state["config_digest"])


def _save_tensors(path: Path, tensors: dict[str, torch.Tensor] | Any) -> None:
    save_file({k: v.detach().contiguous() for k, v in tensors.items()}, path)
