"""The ``federation:`` section of the run config: how rounds run, and secure aggregation.

Free of torch, so that validating a config and printing its schema never load the tensor stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    import torch


class SecureAggregationConfig(BaseModel):
    """SecAgg+ settings; defaults are Flower's except the shares (every sampled client)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(False, description="aggregate with SecAgg+ (Flower) / its arithmetic (in process)")
    num_shares: float = Field(1.0, gt=0, le=1, description="key shares per client, as a fraction of the sample")
    reconstruction_threshold: float = Field(0.67, gt=0, le=1, description="shares needed, as a fraction")
    clipping_range: float = Field(
        8.0, gt=0, description="secure-form entries are clipped to ±this, then quantized (2·range/levels steps)"
    )
    quantization_range: int = Field(2**22, gt=0, description="quantization levels over the clipping range")
    max_weight: float | None = Field(
        None, gt=0, description="largest sample count a client may weigh in with (default: the largest train split)"
    )


class FederationConfig(BaseModel):
    """How rounds run."""

    model_config = ConfigDict(extra="forbid")

    fraction: float = Field(1.0, gt=0, le=1, description="fraction of clients sampled each round")
    clients_per_round: int | None = Field(None, ge=1, description="sample this many clients (overrides fraction)")
    min_clients: int = Field(1, ge=1, description="fewest accepted uploads for a round to aggregate")
    eval_every: int = Field(1, ge=1, description="evaluate every N rounds (and always after the last)")
    test_rounds: Literal["all", "chosen"] = Field(
        "all",
        description="all: test metrics at every evaluation (a test curve; one test pass each); chosen: validation "
        "only each evaluation, the test split once for the round chosen on validation and once for the last, "
        "from their checkpoints at the end (the same numbers, 1-2 test passes; `fedloom run` only)",
    )
    select_metric: str | None = Field(
        None,
        description="the validation metric (client macro) that chooses the reported round, e.g. mse (null: the "
        "task's primary metric; its direction is the metric's own)",
    )
    wire_dtype: Literal["bfloat16", "float32"] = Field("bfloat16", description="dtype of floating tensors on the wire")
    max_update_norm: float | None = Field(None, gt=0, description="reject uploads whose update L2 norm exceeds this")
    checkpoint_every: int = Field(1, ge=0, description="checkpoint every N rounds (0: never)")
    round_timeout: float = Field(
        3600.0, gt=0, description="Flower: seconds to wait for a round's replies; stragglers are left out"
    )
    secure_aggregation: SecureAggregationConfig = Field(default_factory=SecureAggregationConfig)
    identities: dict[str, str] = Field(
        default_factory=dict,
        description="Flower: client id → its owner's OpenSSH public key (or .pub path); nodes must sign their "
        "claim with the matching private key (node config identity-key). Empty: node claims are trusted",
    )

    @model_validator(mode="after")
    def _chosen_round_checkpointed(self) -> FederationConfig:
        every = self.checkpoint_every
        if self.test_rounds == "chosen" and (every == 0 or self.eval_every % every):
            raise ValueError(
                "federation.test_rounds=chosen evaluates the chosen round's models from its checkpoint, so every "
                f"evaluated round needs one: checkpoint_every={every} must divide eval_every={self.eval_every}"
            )
        return self

    @property
    def wire(self) -> torch.dtype:
        """The dtype floating tensors travel (and are counted) in."""
        from fedloom.runtime.communication import WIRE_DTYPES

        return WIRE_DTYPES[self.wire_dtype]
