"""The parameters a client trains in a round: seed 000 Table 2's count (summary.json ``trainable_params``).

A parameter is one tensor of the client's model however many fits step it: a fit's outputs continue its
inputs (FedRep's body after its head, FedWeave's buckets one after another, a head carried from one fit
into the next), while two tensors of one name handed to separate fits are two parameters (Ditto's global
and personal adapters, FDLoRA's and FedDPA's global and local ones). Tensors are told apart by identity,
and held for the round so that an identity is never reused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from torch import Tensor


class TrainedTensors:
    """Counts the elements of the distinct tensors a client's fits train in one round."""

    def __init__(self) -> None:
        self._parameter: dict[int, tuple[Tensor, int]] = {}  # id(tensor) → (the tensor, its parameter)
        self._numel: dict[int, int] = {}  # parameter → elements, for the trained ones

    def _of(self, tensor: Tensor) -> int:
        known = self._parameter.get(id(tensor))
        if known is not None:
            return known[1]
        parameter = len(self._parameter)
        self._parameter[id(tensor)] = (tensor, parameter)
        return parameter

    def record(self, params: Mapping[str, Tensor], trainable: Iterable[str]) -> None:
        """A fit about to train ``trainable`` of ``params``."""
        for key in trainable:
            self._numel[self._of(params[key])] = params[key].numel()

    def follow(self, inputs: Mapping[str, Tensor], outputs: Mapping[str, Tensor]) -> None:
        """A fit's ``outputs`` continue its ``inputs`` of the same key: the same parameters."""
        for key, out in outputs.items():
            if key in inputs:
                self._parameter[id(out)] = (out, self._of(inputs[key]))

    @property
    def total(self) -> int:
        return sum(self._numel.values())
