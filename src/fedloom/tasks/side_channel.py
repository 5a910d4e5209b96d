"""The numeric side channel of seed 000's input-modality ablation (Table 13, "text + numeric"):
structured covariates enter the private head through a small MLP instead of the prompt.

    features = [ MeanPool(f(x)) ; ReLU(W₁ z + b₁) ]      z = covariates standardized per client

W₁, b₁ are private head tensors (``head.side.*``) and train with the head.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

SIDE_WEIGHT, SIDE_BIAS = "head.side.weight", "head.side.bias"


@dataclass(frozen=True)
class SideChannel:
    """Covariates of every row (standardized with the client's training mean and std) and the MLP width."""

    inputs: Tensor  # [N, F]
    width: int = 32

    @classmethod
    def fitted(cls, covariates: np.ndarray, train_rows: np.ndarray, width: int = 32) -> SideChannel:
        mean = covariates[train_rows].mean(0)
        std = covariates[train_rows].std(0)
        z = (covariates - mean) / np.where(std > 0, std, 1.0)
        return cls(torch.as_tensor(np.nan_to_num(z), dtype=torch.float32), width)

    def init(self, generator: torch.Generator) -> dict[str, Tensor]:
        """``nn.Linear``'s default init for W₁ [width, F] and b₁."""
        fan_in = self.inputs.shape[1]
        bound = 1.0 / fan_in**0.5
        return {
            SIDE_WEIGHT: (torch.rand(self.width, fan_in, generator=generator) * 2 - 1) * bound,
            SIDE_BIAS: (torch.rand(self.width, generator=generator) * 2 - 1) * bound,
        }

    def features(self, head: Mapping[str, Tensor], pooled: Tensor, rows: np.ndarray) -> Tensor:
        """[pooled ; ReLU(W₁ z + b₁)] for the given rows."""
        z = self.inputs[torch.as_tensor(rows)]
        side = torch.relu(z @ head[SIDE_WEIGHT].T + head[SIDE_BIAS])
        return torch.cat([pooled, side], dim=1)
