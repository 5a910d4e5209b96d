"""FedBiOT's emulator: a layer-dropped, LoRA-aligned stand-in for the frozen layers below the adapter.

Clients never hold the full model (algorithms.md §2.9): the hidden states entering the adapter
(layer ``L0``) come from the emulator, an evenly spaced subset of layers ``0..L0-1`` that carries
its own LoRA slot (a second adapter bank, on disjoint layers). The server aligns that LoRA on public
text so the emulator's output matches the full model's:

    gap_l2 = mean( ((h_full − h_emu) / rms(h_full))² )                  over real token positions
    L_srv  = gap_l2 + kd_weight · KL( p_full(·|adapter) ‖ p_emu(·|adapter) )
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from fedloom.backbone.features import Ragged
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.lora import AdapterBank, Binding
from fedloom.backbone.model import AdaptedLM
from fedloom.errors import ConfigError


def kept_layers(num_layers: int, drop_ratio: float) -> tuple[int, ...]:
    """FederatedScope's ``model_drop_layer``: round(n(1 − r)) layers at ``int(i · (n−1)/(k−1))``."""
    keep = round(num_layers * (1 - drop_ratio))
    if keep < 2:
        return tuple(range(min(keep, num_layers)))
    stride = (num_layers - 1) / (keep - 1)
    return tuple(int(i * stride) for i in range(keep))


class Emulator:
    """The kept layers below ``L0`` of one backbone, with a LoRA bank of the adapter's rank and targets."""

    def __init__(self, lm: AdaptedLM, drop_ratio: float) -> None:
        if lm.start_layer == 0:
            raise ConfigError("fedbiot needs frozen layers below the adapter: set adapter.layers below the model's")
        self.lm = lm
        self.layers = kept_layers(lm.start_layer, drop_ratio)
        if not self.layers:
            raise ConfigError(f"fedbiot: drop_ratio {drop_ratio} drops all {lm.start_layer} layers below the adapter")
        self.bank = AdapterBank(lm.model, replace(lm.layout.spec, layers=self.layers))
        self.layout: TensorLayout = self.bank.layout.slot()

    def init(self, generator: torch.Generator) -> dict[str, Tensor]:
        """PEFT's init (B = 0): the fresh emulator is the plain layer-dropped model."""
        return self.bank.layout.init_slot(generator)

    def prefix(self, ids: Tensor, mask: Tensor, params: Mapping[str, Tensor]) -> Tensor:
        """Hidden states entering ``L0`` as the emulator computes them (differentiable in ``params``)."""
        hidden = self.lm.model.model.embed_tokens(ids.to(self.lm.device))
        with self.bank.bind(Binding(params)):
            return self.lm.run_layers(hidden, mask.to(self.lm.device), self.layers)


def gap_l2(teacher: Tensor, student: Tensor, mask: Tensor) -> Tensor:
    """mean(((h_t − h_s) / rms(h_t))²) over real positions; rms over the hidden dimension per token."""
    rms = teacher.float().pow(2).mean(-1, keepdim=True).sqrt().clamp_min(1e-6)
    err = ((teacher.float() - student.float()) / rms).pow(2).mean(-1)
    m = mask.to(err.dtype)
    return (err * m).sum() / m.sum().clamp_min(1.0)


def distillation(teacher_logits: Tensor, student_logits: Tensor, mask: Tensor) -> Tensor:
    """KL(p_teacher ‖ p_student) of next-token distributions, averaged over real positions."""
    t = F.log_softmax(teacher_logits.float(), -1)
    kl = (t.exp() * (t - F.log_softmax(student_logits.float(), -1))).sum(-1)
    m = mask.to(kl.dtype)
    return (kl * m).sum() / m.sum().clamp_min(1.0)


_EMULATORS: weakref.WeakKeyDictionary[AdaptedLM, Emulator] = weakref.WeakKeyDictionary()


def emulator_of(lm: AdaptedLM, drop_ratio: float) -> Emulator:
    """The one emulator of ``lm`` (its LoRA bank wraps layers, so it is built once per backbone)."""
    emulator = _EMULATORS.get(lm)
    if emulator is None:
        emulator = _EMULATORS[lm] = Emulator(lm, drop_ratio)
    elif emulator.layers != kept_layers(lm.start_layer, drop_ratio):
        raise ConfigError(f"this backbone already has an emulator of layers {emulator.layers}; load a fresh one")
    return emulator


class Aligner:
    """The server's lower level: public token batches, the full model's prefix on them (the teacher),
    and SGD on the emulator's LoRA toward it (FederatedScope's ``OTTrainer_server``)."""

    def __init__(self, emulator: Emulator, public: Ragged, batch_size: int, lr: float, kd_weight: float) -> None:
        if len(public) == 0:
            raise ConfigError("fedbiot: the public alignment corpus is empty")
        lm = emulator.lm
        self.emulator, self.lr, self.kd_weight = emulator, lr, kd_weight
        self.batches: list[tuple[Tensor, Tensor, Tensor]] = []
        for start in range(0, len(public), batch_size):
            ids, mask = public.pad(np.arange(start, min(start + batch_size, len(public))), lm.pad_id)
            self.batches.append((ids, mask, lm.prefix(ids, mask)))

    def __call__(
        self, emulator: Mapping[str, Tensor], adapter: Mapping[str, Tensor], steps: int, generator: torch.Generator
    ) -> tuple[dict[str, Tensor], float]:
        """``steps`` SGD steps on L_srv from ``emulator`` with ``adapter`` fixed; new LoRA and mean loss."""
        live = {k: v.detach().clone().requires_grad_(True) for k, v in emulator.items()}
        optimizer = torch.optim.SGD(live.values(), lr=self.lr)
        losses = []
        for i in torch.randint(len(self.batches), (steps,), generator=generator).tolist():
            ids, mask, teacher = self.batches[i]
            student = self.emulator.prefix(ids, mask, live)
            loss = gap_l2(teacher, student, mask)
            if self.kd_weight:
                loss = loss + self.kd_weight * self._kd(teacher, student, mask, adapter)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
        return {k: v.detach() for k, v in live.items()}, float(np.mean(losses)) if losses else float("nan")

    def _kd(self, teacher: Tensor, student: Tensor, mask: Tensor, adapter: Mapping[str, Tensor]) -> Tensor:
        lm, binding = self.emulator.lm, Binding(dict(adapter))
        with torch.no_grad():
            target = lm.logits(lm.hidden_from_prefix(teacher, mask, binding))
        return distillation(target, lm.logits(lm.hidden_from_prefix(student, mask, binding)), mask.to(lm.device))
