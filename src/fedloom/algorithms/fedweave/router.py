"""FedWeave's global router: a 2-layer MLP from the frozen pooled embedding to M* expert logits
(hidden 512, no dropout), softmax over experts."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

ROUTER = "router."
FC1_W, FC1_B, FC2_W, FC2_B = (ROUTER + n for n in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"))


def init_router(features: int, experts: int, hidden: int, generator: torch.Generator) -> dict[str, Tensor]:
    """``nn.Linear``'s default init for both layers."""

    def uniform(shape: tuple[int, ...], fan_in: int) -> Tensor:
        return (torch.rand(shape, generator=generator) * 2 - 1) / fan_in**0.5

    return {
        FC1_W: uniform((hidden, features), features),
        FC1_B: uniform((hidden,), features),
        FC2_W: uniform((experts, hidden), hidden),
        FC2_B: uniform((experts,), hidden),
    }


def route(params: Mapping[str, Tensor], embeddings: Tensor) -> Tensor:
    """Softmax routing weights [N, M*] of embeddings [N, H]."""
    hidden = torch.relu(embeddings @ params[FC1_W].T + params[FC1_B])
    return torch.softmax(hidden @ params[FC2_W].T + params[FC2_B], dim=1)
