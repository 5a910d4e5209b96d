"""The frozen backbone with its adapter bank, runnable from any decoder layer.

Everything below the lowest adapted layer ``L0`` depends only on frozen weights, so its output
(the *prefix*) is computed once per sample and cached; training and evaluation then run layers
``L0..L-1`` only. Heads read the mean-pooled final hidden state and never pay for the vocabulary
projection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor
from transformers import GenerationMixin
from transformers.masking_utils import create_causal_mask

from fedloom.backbone.loading import Backbone
from fedloom.backbone.lora import (
    AdapterBank,
    Binding,
    LoraLinear,
    LoraSpec,
    base_delta_key,
    lora_a_key,
    lora_b_key,
)
from fedloom.errors import ConfigError


class AdaptedLM:
    """One frozen backbone + adapter bank, shared by every simulated client of a process."""

    def __init__(self, backbone: Backbone, spec: LoraSpec) -> None:
        self.backbone = backbone
        self.model = backbone.model
        self.bank = AdapterBank(self.model, spec)
        self.layout = self.bank.layout
        self.start_layer = self.layout.lowest_layer

    @property
    def hidden_size(self) -> int:
        return self.backbone.hidden_size

    @property
    def pad_id(self) -> int:
        """The tokenizer's padding id (0 when it has none): what right-padded batches are filled with."""
        pad = self.backbone.tokenizer.pad_token_id
        return int(pad) if pad is not None else 0

    @property
    def num_layers(self) -> int:
        return len(self.model.model.layers)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def relative_update_norms(self, adapters: Mapping[str, Tensor]) -> list[float]:
        """‖ΔW‖_F / ‖W‖_F of every adapted matrix and slot in ``adapters``: ΔW = s·B A (+ the folded
        ``base_delta`` where a method keeps one), W the frozen weight. How far an adapter moved the model."""
        out = []
        for module in self.layout.modules:
            wrapped = self.model.get_submodule(module.path)
            assert isinstance(wrapped, LoraLinear)
            base = wrapped.base.weight.float()
            folded = adapters.get(base_delta_key(module.path))
            suffix = ".weight"
            slots = [
                k[len(module.path) + 8 : -len(suffix)] for k in adapters if k.startswith(f"{module.path}.lora_A.")
            ]
            deltas = [
                self.layout.spec.scaling(adapters[lora_a_key(module.path, slot)].shape[0])
                * adapters[lora_b_key(module.path, slot)].float()
                @ adapters[lora_a_key(module.path, slot)].float()
                for slot in slots
            ] or ([torch.zeros_like(base)] if folded is not None else [])
            for delta in deltas:
                total = delta if folded is None else delta + folded.float()
                out.append(float(total.norm() / base.norm()))
        return out

    def run_layers(self, hidden: Tensor, mask: Tensor, layers: Sequence[int]) -> Tensor:
        """Apply the decoder layers ``layers`` (in order) to right-padded hidden states [B, T, H]."""
        inner = self.model.model
        position_ids = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0)
        causal_mask = create_causal_mask(
            config=self.model.config,
            inputs_embeds=hidden,
            attention_mask=mask,
            cache=None,
            position_ids=position_ids,
        )
        rope = inner.rotary_emb(hidden, position_ids=position_ids)
        for i in layers:
            hidden = inner.layers[i](
                hidden, attention_mask=causal_mask, position_embeddings=rope, position_ids=position_ids
            )
        return hidden

    @torch.no_grad()
    def prefix(self, input_ids: Tensor, mask: Tensor) -> Tensor:
        """Frozen hidden states entering layer ``L0`` (no adapters are involved below it)."""
        hidden = self.model.model.embed_tokens(input_ids.to(self.device))
        mask = mask.to(self.device)
        with self.bank.bind(None):
            return self.run_layers(hidden, mask, range(self.start_layer))

    def hidden_from_prefix(self, prefix: Tensor, mask: Tensor, binding: Binding | None) -> Tensor:
        """Final (normed) hidden states [B, T, H] from cached prefix states (on the model's device)."""
        with self.bank.bind(binding):
            return self.model.model.norm(
                self.run_layers(prefix.to(self.device), mask.to(self.device), range(self.start_layer, self.num_layers))
            )

    def pooled_from_prefix(self, prefix: Tensor, mask: Tensor, binding: Binding | None) -> Tensor:
        """Mean-pooled final hidden state [B, H] (seed 000, eq. 5) from cached prefix states, on the CPU."""
        return masked_mean(self.hidden_from_prefix(prefix, mask, binding), mask.to(self.device)).cpu()

    def logits(self, hidden: Tensor) -> Tensor:
        """Vocabulary logits of final hidden states (only where a task needs them)."""
        return self.model.lm_head(hidden.to(self.backbone.dtype)).float()

    @torch.no_grad()
    def generate(self, prompts: list[Tensor], binding: Binding | None, max_new_tokens: int) -> list[Tensor]:
        """Greedy continuations of left-padded prompts with the bound adapters (new tokens only)."""
        model = self.model
        if not isinstance(model, GenerationMixin):
            raise ConfigError(f"backbone {self.backbone.identity!r} ({type(model).__name__}) cannot generate text")
        pad = self.backbone.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = p
            mask[i, width - len(p) :] = 1
        with self.bank.bind(binding):
            out = model.generate(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=pad,
            )
        return [row[width:].cpu() for row in out]

    def pooled(self, input_ids: Tensor, mask: Tensor, binding: Binding | None) -> Tensor:
        """The same quantity from token ids with a full forward (the reference the cache must match)."""
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        with self.bank.bind(binding):
            hidden = self.run_layers(self.model.model.embed_tokens(input_ids), mask, range(self.num_layers))
        return masked_mean(self.model.model.norm(hidden), mask).cpu()


def masked_mean(hidden: Tensor, mask: Tensor) -> Tensor:
    """Mean over the real (mask = 1) positions of [B, T, H] → [B, H], in float32."""
    m = mask.to(torch.float32).unsqueeze(-1)
    return (hidden.to(torch.float32) * m).sum(1) / m.sum(1).clamp_min(1.0)
