"""Atomic round checkpoints: everything needed to continue a run exactly where it stopped.

    RUN_DIR/checkpoints/
      LATEST                 name of the newest complete checkpoint and its state.json's sha256
                             (replaced atomically)
      round-00003/
        state.json           round, config digest, scalars of every record, client index, history, RNG,
                             and the sha256 of every tensor file beside it (checked on load)
        state.sha256         the sha256 of state.json: an edited state (a client id, a digit of the
                             history) is refused like a flipped bit in a tensor
        server.safetensors   server tensors
        client-00000.safetensors ...   one file per client (ids may not be valid file names)
        rng_torch.safetensors          torch's global RNG state

A checkpoint directory is written under a temporary name and renamed when complete; LATEST is
updated only after that, so a kill at any moment leaves the previous checkpoint usable. Older
checkpoints are pruned by round number, never the one just written; LATEST must name a checkpoint
folder inside this store, with that folder's digest. Without LATEST (deleted), the newest round folder
is the checkpoint, after the same checks.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, ValidationError
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from fedloom.algorithms.base import Record, Scalar
from fedloom.errors import FedloomError
from fedloom.paths import atomic_write

LATEST = "LATEST"
STATE_DIGEST = "state.sha256"
NAME = re.compile(r"round-(\d{5,})")
Scalars = dict[str, Scalar]


class CheckpointState(BaseModel):
    """The schema of ``state.json``: a file missing a field is refused by name."""

    round: int
    config_digest: str
    server_scalars: Scalars
    clients: list[str]
    client_scalars: list[Scalars]
    history: list[dict[str, Any]]
    rng: dict[str, list[Any]]
    sha256: dict[str, str]  # tensor file name → hex digest


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
    """Saves and loads round checkpoints under one folder, keeping the newest ``keep`` by round."""

    def __init__(self, folder: Path, keep: int = 1) -> None:
        self.folder = folder
        self.keep = keep
        self.protected: str | None = None  # a round kept beside the newest ones (the round chosen on validation)

    def protect(self, round: int) -> None:
        """Keep round ``round``'s checkpoint when newer ones are saved; a round protected before is let go."""
        self.protected = f"round-{round:05d}"
        self._prune()

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
            state = CheckpointState(
                round=ckpt.round,
                config_digest=ckpt.config_digest,
                server_scalars=dict(ckpt.server.scalars),
                clients=clients,
                client_scalars=[dict(ckpt.clients[c].scalars) for c in clients],
                history=ckpt.history,
                rng=capture_rng(),
                sha256={p.name: file_sha256(p) for p in sorted(staging.glob("*.safetensors"))},
            )
            (staging / "state.json").write_text(json.dumps(state.model_dump()))  # NaN scalars stay NaN
            digest = file_sha256(staging / "state.json")
            (staging / STATE_DIGEST).write_text(digest)
            shutil.rmtree(self.folder / name, ignore_errors=True)
            staging.rename(self.folder / name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        atomic_write(self.folder / LATEST, f"{name} {digest}")
        self._prune(ckpt.round)

    def _prune(self, newest: int | None = None) -> None:
        """Keep ``newest`` (default: the newest present), the ``keep - 1`` rounds before it and the
        protected round; later rounds belong to no live run."""
        if not self.folder.is_dir():  # nothing saved yet, or never (checkpoint_every: 0)
            return
        rounds = sorted(int(m.group(1)) for p in self.folder.iterdir() if (m := NAME.fullmatch(p.name)))
        if not rounds:
            return
        newest = rounds[-1] if newest is None else newest
        earlier = [r for r in rounds if r < newest]
        kept = {newest, *earlier[len(earlier) - (self.keep - 1) :]} if self.keep > 1 else {newest}
        for r in rounds:
            if r not in kept and f"round-{r:05d}" != self.protected:
                shutil.rmtree(self.folder / f"round-{r:05d}", ignore_errors=True)

    def newest(self) -> tuple[int, str] | None:
        """(round, config digest) of the newest checkpoint without reading its tensors (None: no
        checkpoint); `load` still checks every file."""
        try:
            found = self._newest()
            if found is None:
                return None
            state = json.loads((found[0] / "state.json").read_text())
            return int(state["round"]), str(state["config_digest"])
        except (FedloomError, OSError, KeyError, TypeError, ValueError):
            return None  # `load` names what is wrong

    def _newest(self) -> tuple[Path, str | None] | None:
        """The newest checkpoint folder and the state digest LATEST gives for it (None without LATEST:
        then the newest round folder present); None when there is no checkpoint."""
        pointer = self.folder / LATEST
        if not pointer.is_file():
            rounds = sorted(p for p in self.folder.glob("round-*") if NAME.fullmatch(p.name) and p.is_dir())
            return (rounds[-1], None) if rounds else None
        text = pointer.read_text().strip()
        parts = text.split()
        if len(parts) != 2 or not NAME.fullmatch(parts[0]) or not (self.folder / parts[0]).is_dir():
            raise FedloomError(
                f"{pointer} holds {text[:80]!r}, not a checkpoint folder in {self.folder} with its state digest "
                "('round-NNNNN SHA256'); delete LATEST to resume from the newest round folder"
            )
        return self.folder / parts[0], parts[1]

    def load(self, restore_random_state: bool = True, round: int | None = None) -> Checkpoint | None:
        """The newest complete checkpoint (or that of ``round``), or None when there is none; every file
        is checked first."""
        if round is not None:
            folder, expected = self.folder / f"round-{round:05d}", None
            if not folder.is_dir():
                return None
        elif (newest := self._newest()) is None:
            return None
        else:
            folder, expected = newest
        try:
            _verify_state(folder, expected)
            state = CheckpointState.model_validate(json.loads((folder / "state.json").read_text()))
            _verify(folder, state)
            server = Record(load_file(folder / "server.safetensors"), state.server_scalars)
            clients = {
                cid: Record(load_file(folder / f"client-{i:05d}.safetensors"), state.client_scalars[i])
                for i, cid in enumerate(state.clients)
            }
            torch_state = load_file(folder / "rng_torch.safetensors")["state"]
            if restore_random_state:
                restore_rng(state.rng, torch_state)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
            raise FedloomError(f"checkpoint {folder / 'state.json'} is malformed ({problems}); "
                               "delete the checkpoint to restart the run") from None  # fmt: skip
        except (OSError, KeyError, IndexError, TypeError, ValueError, SafetensorError, RuntimeError) as exc:
            raise FedloomError(f"checkpoint {folder} is unreadable ({exc}); delete it to restart the run") from None
        return Checkpoint(state.round, server, clients, state.history, state.config_digest)


def file_sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _verify_state(folder: Path, expected: str | None) -> None:
    """state.json matches the digest saved beside it (and ``expected``, LATEST's, when given)."""
    saved = folder / STATE_DIGEST
    if not saved.is_file():
        raise FedloomError(f"checkpoint {folder} has no {STATE_DIGEST} (written before state digests, or cut "
                           "short); delete it to restart the run")  # fmt: skip
    digest = file_sha256(folder / "state.json")
    if digest != saved.read_text().strip() or (expected is not None and digest != expected):
        raise FedloomError(f"checkpoint file {folder / 'state.json'} does not match its sha256 (edited or "
                           "corrupted); delete the checkpoint to restart the run")  # fmt: skip


def _verify(folder: Path, state: CheckpointState) -> None:
    """Every tensor file the checkpoint needs is listed in ``state.sha256`` and matches it."""
    needed = [
        "server.safetensors",
        "rng_torch.safetensors",
        *(f"client-{i:05d}.safetensors" for i in range(len(state.clients))),
    ]
    for file in needed:
        expected = state.sha256.get(file)
        if expected is None:
            raise FedloomError(f"checkpoint {folder}: state.json has no sha256 for {file}; "
                               "delete the checkpoint to restart the run")  # fmt: skip
        if not (folder / file).is_file() or file_sha256(folder / file) != expected:
            raise FedloomError(
                f"checkpoint file {folder / file} is missing or does not match its sha256 in state.json "
                "(corrupted or replaced); delete the checkpoint to restart the run"
            )


def _save_tensors(path: Path, tensors: dict[str, torch.Tensor] | Any) -> None:
    save_file({k: v.detach().contiguous() for k, v in tensors.items()}, path)
