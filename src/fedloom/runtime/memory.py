"""A client's optimizer memory inside its private state: the AdamW moments a client keeps from round to
round (``train.optimizer_state: keep``; seed 000: optimizer states are "maintained locally … not
transmitted"). They ride in the client's state `Record` under `PREFIX`, so checkpoints and a node's state
folder keep them and a resumed run continues exactly, and they are taken out before any algorithm sees the
state: algorithms never know they exist, and nothing of them is ever uploaded."""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor

from fedloom.algorithms.base import Record

PREFIX = "optim/"


def split_memory(state: Record) -> tuple[Record, dict[str, Tensor]]:
    """The algorithm's own state and the optimizer memory (keys without `PREFIX`)."""
    own = {k: v for k, v in state.tensors.items() if not k.startswith(PREFIX)}
    if len(own) == len(state.tensors):
        return state, {}
    memory = {k.removeprefix(PREFIX): v for k, v in state.tensors.items() if k.startswith(PREFIX)}
    return Record(own, state.scalars), memory


def algorithm_state(state: Record) -> Record:
    """``state`` as its algorithm wrote it (the optimizer memory taken out)."""
    return split_memory(state)[0]


def with_memory(state: Record, memory: Mapping[str, Tensor]) -> Record:
    """``state`` with ``memory`` stored beside the algorithm's tensors."""
    if not memory:
        return state
    return Record({**state.tensors, **{PREFIX + k: v for k, v in memory.items()}}, state.scalars)
