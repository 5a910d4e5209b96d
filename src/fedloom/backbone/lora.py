"""The adapter bank: LoRA slots on frozen linear layers, with values bound per forward.

Each adapted linear layer computes (HF-PEFT notation, ``s = alpha / r``)::

    h = W0 x + ΔW x + Σ_k w_k · s · B_k A_k dropout(x)

``W0`` frozen; ``ΔW`` an optional dense base delta (FLoRA / FedEx-LoRA fold updates into it); ``k``
ranges over the bound slots with per-sample weights ``w`` (soft mixture, or sparse top-k that runs
only the chosen slots). A dense mixture runs as one low-rank product: the slots' A stacked along the rank,
one dropout mask for all of them. The layers hold no adapter values: a `Binding` supplies named tensors for
one forward, so one frozen backbone serves every simulated client and swapping is a lookup.

Keys follow PEFT's in-model names, e.g. ``model.layers.29.self_attn.q_proj.lora_A.default.weight``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedloom.backbone.layout import TensorLayout
from fedloom.errors import ConfigError

DEFAULT_SLOT = "default"


class _DroppedDown(torch.autograd.Function):
    """``A dropout_p(x)`` with ``x`` cast to A's dtype, keeping for the backward pass only ``x`` (already
    alive, in the frozen model's dtype) and a one-byte dropout mask instead of the full-width fp32
    dropped copy; the copy is rebuilt from them, without drawing the mask again."""

    @staticmethod
    def forward(ctx, x: Tensor, A: Tensor, p: float) -> Tensor:  # noqa: ANN001
        h = x.to(A.dtype)
        keep = None
        if p > 0.0:  # F.dropout's CPU arithmetic: a Bernoulli(1 − p) draw, scaled by 1 / (1 − p)
            noise = torch.empty_like(h).bernoulli_(1.0 - p)
            keep = noise.bool()
            h = h * noise.div_(1.0 - p)
        ctx.p = p
        ctx.save_for_backward(x, A, keep)
        return F.linear(h, A)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:  # noqa: ANN001
        x, A, keep = ctx.saved_tensors
        scale = keep.to(A.dtype).div_(1.0 - ctx.p) if keep is not None else None
        grad_x = grad_A = None
        if ctx.needs_input_grad[0]:
            grad_h = grad @ A
            grad_x = (grad_h if scale is None else grad_h * scale).to(x.dtype)
        if ctx.needs_input_grad[1]:
            h = x.to(A.dtype) if scale is None else x.to(A.dtype) * scale
            grad_A = grad.reshape(-1, grad.shape[-1]).T @ h.reshape(-1, h.shape[-1])
        return grad_x, grad_A, None


def lora_a_key(path: str, slot: str = DEFAULT_SLOT) -> str:
    return f"{path}.lora_A.{slot}.weight"


def lora_b_key(path: str, slot: str = DEFAULT_SLOT) -> str:
    return f"{path}.lora_B.{slot}.weight"


def base_delta_key(path: str) -> str:
    return f"{path}.base_delta"


def lora_scaling(alpha: float, rank: int) -> float:
    """PEFT's LoRA scaling s = α / r: the adapter adds s · B A."""
    return alpha / rank


@dataclass(frozen=True)
class LoraSpec:
    """Which linear layers get LoRA, and its rank / alpha / dropout. ``layers=None`` means all."""

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.05
    targets: tuple[str, ...] = ("q_proj", "v_proj")
    layers: tuple[int, ...] | None = None

    def scaling(self, rank: int | None = None) -> float:
        return lora_scaling(self.alpha, rank or self.rank)


@dataclass(frozen=True)
class AdaptedModule:
    """One frozen linear layer that carries adapters."""

    path: str
    layer: int
    d_in: int
    d_out: int


@dataclass(frozen=True)
class AdapterLayout:
    """What adapters exist (pure data, no modules): the shapes every algorithm and payload agree on."""

    spec: LoraSpec
    modules: tuple[AdaptedModule, ...]

    @property
    def lowest_layer(self) -> int:
        return min(m.layer for m in self.modules)

    def slot(self, slot: str = DEFAULT_SLOT, rank: int | None = None) -> TensorLayout:
        """Layout of one LoRA slot: per module A [r, d_in] then B [d_out, r], in module order."""
        r = rank or self.spec.rank
        entries: list[tuple[str, tuple[int, ...]]] = []
        for m in self.modules:
            entries.append((lora_a_key(m.path, slot), (r, m.d_in)))
            entries.append((lora_b_key(m.path, slot), (m.d_out, r)))
        return TensorLayout(tuple(entries))

    def init_slot(
        self, generator: torch.Generator, slot: str = DEFAULT_SLOT, rank: int | None = None
    ) -> dict[str, Tensor]:
        """PEFT's default init: A ~ kaiming_uniform(a=√5), B = 0, so a fresh slot leaves the model unchanged."""
        out: dict[str, Tensor] = {}
        for key, shape in self.slot(slot, rank).entries:
            if ".lora_A." in key:
                bound = 1.0 / math.sqrt(shape[1])  # kaiming_uniform(a=√5) on [r, d_in]
                out[key] = (torch.rand(shape, generator=generator) * 2 - 1) * bound
            else:
                out[key] = torch.zeros(shape)
        return out


@dataclass
class Binding:
    """Adapter values for one forward pass.

    ``weights`` [N, S] are per-sample mixture weights over ``slots`` (None: every slot with weight 1);
    with ``top_k`` only each sample's k largest weights are kept, renormalized, and only those slots run.
    """

    params: Mapping[str, Tensor]
    slots: tuple[str, ...] = (DEFAULT_SLOT,)
    weights: Tensor | None = None
    top_k: int | None = None
    train: bool = False


class _BindingSlot:
    """Shared mutable cell through which a bank hands its binding to its layers."""

    binding: Binding | None = None


class LoraLinear(nn.Module):
    """A frozen ``nn.Linear`` plus the LoRA slots and base delta of the current binding."""

    def __init__(self, base: nn.Linear, path: str, spec: LoraSpec, cell: _BindingSlot) -> None:
        super().__init__()
        self.base = base
        self.path = path
        self.spec = spec
        self._cell = cell

    def forward(self, x: Tensor) -> Tensor:
        y = self.base(x)
        b = self._cell.binding
        if b is None:
            return y
        delta = b.params.get(base_delta_key(self.path))
        if delta is not None:
            y = y + F.linear(x, delta.to(x.device, x.dtype))
        if not b.slots:
            return y
        if b.weights is not None and b.top_k is not None:
            return self._sparse(x, y, b, b.weights.to(x.device))
        if len(b.slots) == 1 and b.weights is None:
            return y + self._slot_output(x, b.slots[0], b).to(y.dtype)
        return y + self._mixture(x, b).to(y.dtype)

    def _mixture(self, x: Tensor, b: Binding) -> Tensor:
        """Σ_k w_k s_k B_k A_k dropout(x) for every bound slot at once: the slots' A stacked along the rank
        (one ``x @ A``), the per-row scale and per-sample weight applied to the rank activations, the B
        stacked alike (one ``@ B``); one dropout mask shared by all slots."""
        As = [b.params[lora_a_key(self.path, slot)] for slot in b.slots]
        Bs = [b.params[lora_b_key(self.path, slot)] for slot in b.slots]
        ranks = torch.tensor([a.shape[0] for a in As], device=x.device)
        A, B = torch.cat(As).to(x.device), torch.cat(Bs, dim=1).to(x.device)
        scales = torch.tensor([self.spec.scaling(a.shape[0]) for a in As], dtype=A.dtype, device=x.device)
        z = self._down(x, A, b.train) * scales.repeat_interleave(ranks)  # α/r_k on slot k's rank rows
        if b.weights is not None:  # [N, S] → a weight per rank row, broadcast over the token axes
            weights = b.weights.to(x.device, A.dtype).repeat_interleave(ranks, dim=1)
            z = z * weights.view(x.shape[0], *([1] * (x.dim() - 2)), -1)
        return F.linear(z, B)

    def _sparse(self, x: Tensor, y: Tensor, b: Binding, weights: Tensor) -> Tensor:
        """Top-k routing: each sample runs only its k chosen slots, weights renormalized over them."""
        assert b.top_k is not None
        top_w, top_i = weights.topk(b.top_k, dim=1)
        top_w = top_w / top_w.sum(dim=1, keepdim=True)
        for k, slot in enumerate(b.slots):
            rows, pos = (top_i == k).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            w = top_w[rows, pos].view(-1, *([1] * (x.dim() - 1)))
            y = y.index_add(0, rows, (w * self._slot_output(x[rows], slot, b)).to(y.dtype))
        return y

    def _slot_output(self, x: Tensor, slot: str, b: Binding) -> Tensor:
        A = b.params[lora_a_key(self.path, slot)].to(x.device)  # adapters live on the CPU; copies are
        B = b.params[lora_b_key(self.path, slot)].to(x.device)  # differentiable and free when devices match
        return self.spec.scaling(A.shape[0]) * F.linear(self._down(x, A, b.train), B)

    def _down(self, x: Tensor, A: Tensor, train: bool) -> Tensor:
        """``A dropout(x)`` in the adapters' precision. Where that makes a new copy of ``x`` (dropout, or bf16
        frozen activations cast to fp32 adapters) and gradients are on, `_DroppedDown` keeps a one-byte
        mask instead of that copy: the same mask and values, two fewer full-width fp32 tensors per adapted
        layer held through the backward pass."""
        p = self.spec.dropout if train else 0.0
        if not torch.is_grad_enabled() or (p == 0.0 and x.dtype == A.dtype):
            return F.linear(F.dropout(x.to(A.dtype), p=p, training=train), A)
        return _DroppedDown.apply(x, A, p)


class AdapterBank:
    """Wraps the target linear layers of a model in `LoraLinear` and binds adapter values to them."""

    def __init__(self, model: nn.Module, spec: LoraSpec) -> None:
        layers = _decoder_layers(model)
        chosen = range(len(layers)) if spec.layers is None else spec.layers
        bad = [i for i in chosen if not 0 <= i < len(layers)]
        if bad:
            raise ConfigError(f"adapter.layers {bad} out of range: the model has {len(layers)} layers")
        taken = [i for i in chosen if any(isinstance(m, LoraLinear) for m in layers[i].modules())]
        if taken:  # banks on disjoint layers coexist (FedBiOT's emulator below the adapter)
            raise ConfigError(f"layers {taken} already carry an adapter bank; load a fresh backbone for a new one")
        self._cell = _BindingSlot()
        modules: list[AdaptedModule] = []
        for i in sorted(set(chosen)):
            for name, child in list(layers[i].named_modules()):
                leaf = name.rsplit(".", 1)[-1]
                if leaf not in spec.targets:
                    continue
                if not isinstance(child, nn.Linear):
                    raise ConfigError(f"adapter target {name!r} in layer {i} is {type(child).__name__}, not Linear")
                path = f"model.layers.{i}.{name}"
                parent = layers[i].get_submodule(name.rsplit(".", 1)[0]) if "." in name else layers[i]
                setattr(parent, leaf, LoraLinear(child, path, spec, self._cell))
                modules.append(AdaptedModule(path, i, child.in_features, child.out_features))
        if not modules:
            raise ConfigError(
                f"adapter.targets {list(spec.targets)} match no Linear layer in layers {list(chosen)}; "
                f"layer 0 has: {sorted({n.rsplit('.', 1)[-1] for n, _ in layers[0].named_modules() if n})}"
            )
        self.layout = AdapterLayout(spec, tuple(modules))

    @property
    def binding(self) -> Binding | None:
        return self._cell.binding

    @contextmanager
    def bind(self, binding: Binding | None) -> Iterator[None]:
        """Make ``binding`` the adapter values of every adapted layer for the duration of the block."""
        previous, self._cell.binding = self._cell.binding, binding
        try:
            yield
        finally:
            self._cell.binding = previous


def _decoder_layers(model: nn.Module) -> nn.ModuleList:
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise ConfigError(
            f"{type(model).__name__} has no model.layers ModuleList; fedloom adapts decoder-only causal LMs "
            "laid out like Llama (model.embed_tokens, model.layers, model.norm)"
        )
    return layers
