"""Method names → algorithm objects, and the typed hyperparameters of every method.

Adding a method: one module, one options class here (if it has hyperparameters), one line in
``METHODS`` (builder + one-line summary), one row in the contract tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fedloom.algorithms.base import Algorithm, LocalTrainingConfig
from fedloom.algorithms.ditto import Ditto
from fedloom.algorithms.fdlora import FDLoRA
from fedloom.algorithms.fedavg import FedAvg, Sharing
from fedloom.algorithms.fedbiot import FedBiOT, FedBiOTConfig
from fedloom.algorithms.feddpa import FedDPA
from fedloom.algorithms.fedex import FedExLoRA
from fedloom.algorithms.fedlease import FedLEASE, FedLEASEConfig
from fedloom.algorithms.fedrep import FedRep
from fedloom.algorithms.fedweave import FedWeave, FedWeaveConfig
from fedloom.algorithms.flexlora import FlexLoRA
from fedloom.algorithms.flora import FLoRA
from fedloom.algorithms.fwdllm import FwdLLM
from fedloom.algorithms.local import LocalOnly
from fedloom.algorithms.privacy import PrivacyConfig
from fedloom.algorithms.robust import RobustConfig
from fedloom.algorithms.rpa import RPA, RPAConfig
from fedloom.algorithms.scaffold import Scaffold
from fedloom.backbone.emulator import Aligner, emulator_of
from fedloom.backbone.features import Ragged
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.model import AdaptedLM
from fedloom.errors import ConfigError


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FedProxOptions(_Options):
    mu: float = Field(0.01, ge=0, description="FedProx proximal weight μ")


class FedAvgMOptions(_Options):
    momentum: float = Field(0.9, ge=0, lt=1, description="FedAvgM server momentum β")
    server_lr: float = Field(1.0, gt=0, description="FedAvgM server learning rate η_g")


class ScaffoldOptions(_Options):
    server_lr: float = Field(1.0, gt=0, description="SCAFFOLD global step size η_g")


class FedPerOptions(_Options):
    personal_layers: int = Field(1, ge=1, description="FedPer: LoRA of the top K_P adapted layers stays local")


class FedRepOptions(_Options):
    head_fraction: float = Field(0.5, gt=0, lt=1, description="FedRep: share of the step budget for the head phase")


class DittoOptions(_Options):
    lam: float = Field(0.1, ge=0, description="Ditto: pull λ of the personal adapter toward the global one")
    personal_steps: int | None = Field(None, ge=1, description="Ditto: personal steps per round (None: train.steps)")


class RankOptions(_Options):
    ranks: list[int] | None = Field(None, description="heterogeneous client ranks, cycled over sorted client ids")


class FedDPAOptions(_Options):
    local_weight: float = Field(0.5, ge=0, le=1, description="FedDPA: weight a of the local adapter in training")
    max_weight: float = Field(0.5, ge=0, le=1, description="FedDPA: w_max of the test-time weight λ(x)")
    instances: int = Field(5, ge=1, description="FedDPA: local training instances behind λ(x)")
    personal_steps: int | None = Field(None, ge=1, description="FedDPA: local-adapter steps (None: train.steps)")
    uniform: bool = Field(True, description="FedDPA: uniform server average (as its code) instead of by n_k")


class FDLoRAOptions(_Options):
    outer_lr: float = Field(0.7, gt=0, description="FDLoRA: Nesterov outer learning rate")
    outer_momentum: float = Field(0.9, ge=0, lt=1, description="FDLoRA: Nesterov outer momentum")
    personal_steps: int | None = Field(None, ge=1, description="FDLoRA: personal steps (None: train.steps)")
    fusion_samples: int = Field(32, ge=1, description="FDLoRA: local samples scoring AdaFusion")
    fusion_evals: int = Field(20, ge=3, description="FDLoRA: Nelder-Mead loss evaluations")
    l1: float = Field(0.05, ge=0, description="FDLoRA: L1 penalty on the fusion weights")


class FwdLLMOptions(_Options):
    server_lr: float = Field(0.01, gt=0, description="FwdLLM: peak server learning rate η")
    h: float = Field(0.01, gt=0, description="FwdLLM: central-difference step")
    warmup_ratio: float = Field(0.1, ge=0, le=1, description="FwdLLM: share of rounds warming η up")
    perturbation_sampling: bool = Field(True, description="FwdLLM: align perturbations with the last gradient")
    candidates: int = Field(10, ge=1, description="FwdLLM: Gaussian candidates per perturbation")
    var_threshold: float | None = Field(None, gt=0, description="FwdLLM: revert-and-cache above this variance")


class MethodOptions(_Options):
    """Hyperparameters of the methods that have any (section = method name)."""

    fedprox: FedProxOptions = FedProxOptions()
    fedavgm: FedAvgMOptions = FedAvgMOptions()
    scaffold: ScaffoldOptions = ScaffoldOptions()
    fedper: FedPerOptions = FedPerOptions()
    fedrep: FedRepOptions = FedRepOptions()
    ditto: DittoOptions = DittoOptions()
    flora: RankOptions = RankOptions()
    flexlora: RankOptions = RankOptions()
    feddpa: FedDPAOptions = FedDPAOptions()
    fdlora: FDLoRAOptions = FDLoRAOptions()
    fwdllm: FwdLLMOptions = FwdLLMOptions()
    fedbiot: FedBiOTConfig = FedBiOTConfig()
    rpa: RPAConfig = RPAConfig()
    fedweave: FedWeaveConfig = FedWeaveConfig()
    fedlease: FedLEASEConfig = FedLEASEConfig()


@dataclass(frozen=True)
class BuildContext:
    """What building a method may read: local budget, LoRA rank and alpha, rounds, the run seed,
    method options, and the adapter layout (the order of the flat adapter vector); on the server, the
    backbone and a loader of public token ids, for a method that computes with them (FedBiOT)."""

    local: LocalTrainingConfig
    rank: int
    alpha: float
    rounds: int
    seed: int
    options: MethodOptions
    layout: TensorLayout | None = None
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)
    robust: RobustConfig = field(default_factory=RobustConfig)
    fraction: float = 1.0
    clients_per_round: int | None = None
    lm: AdaptedLM | None = None
    public: Callable[[int, int], Ragged] | None = None  # (sequences, max tokens) → public token ids


def _fedavg(b: BuildContext, **switches: Any) -> FedAvg:
    """A FedAvg-family method with the run's defences (robust aggregation, DP uploads)."""
    return FedAvg(b.local, robust=b.robust, privacy=b.privacy, participation=(b.fraction, b.clients_per_round),
                  **switches)  # fmt: skip


@dataclass(frozen=True)
class Method:
    """How to build a method from the build context, and what it is in one line (``fedloom methods``)."""

    build: Callable[[BuildContext], Algorithm]
    summary: str


def _fedbiot(b: BuildContext) -> FedBiOT:
    """Clients build it without the backbone (they never align); the server with backbone and public text."""
    cfg, aligner = b.options.fedbiot, None
    if b.lm is not None:
        if b.public is None:
            raise ConfigError("fedbiot's server needs public text to align the emulator on")
        public = b.public(cfg.public_size, cfg.public_max_tokens)
        aligner = Aligner(emulator_of(b.lm, cfg.drop_ratio), public, cfg.align_batch, cfg.align_lr, cfg.kd_weight)
    return FedBiOT(b.local, cfg, b.seed, aligner)


FEDAVG_FAMILY = ("fedavg", "fedavgm", "fedprox", "fedper", "fedit", "ffa-lora", "fedsa-lora")

METHODS: dict[str, Method] = {
    "local": Method(
        lambda b: LocalOnly(b.local),
        "Local-only: every client trains its own LoRA and head; nothing is shared",
    ),
    "fedavg": Method(
        lambda b: _fedavg(b, name="fedavg"),
        "FedAvg: sample-weighted mean of the LoRA factors; heads stay private",
    ),
    "fedavgm": Method(
        lambda b: _fedavg(
            b, server_momentum=b.options.fedavgm.momentum, server_lr=b.options.fedavgm.server_lr, name="fedavgm"
        ),
        "FedAvgM: FedAvg with heavy-ball server momentum",
    ),
    "fedprox": Method(
        lambda b: _fedavg(b, prox_mu=b.options.fedprox.mu, name="fedprox"),
        "FedProx: FedAvg with a proximal pull toward the global adapter in the local loss",
    ),
    "scaffold": Method(
        lambda b: Scaffold(b.local, server_lr=b.options.scaffold.server_lr),
        "SCAFFOLD: local steps corrected by control variates (option II)",
    ),
    "fedper": Method(
        lambda b: _fedavg(b, sharing=Sharing(personal_layers=b.options.fedper.personal_layers), name="fedper"),
        "FedPer: the LoRA of the top adapted layers stays local",
    ),
    "fedrep": Method(
        lambda b: FedRep(b.local, head_fraction=b.options.fedrep.head_fraction),
        "FedRep: local head phase, then shared body phase",
    ),
    "ditto": Method(
        lambda b: Ditto(b.local, lam=b.options.ditto.lam, personal_steps=b.options.ditto.personal_steps),
        "Ditto: a global adapter plus a personal one pulled toward it",
    ),
    "fedit": Method(
        lambda b: _fedavg(b, name="fedit"),
        "FedIT: FedAvg of LoRA factors, as in federated instruction tuning",
    ),
    "ffa-lora": Method(
        lambda b: _fedavg(b, sharing=Sharing(shared="B", frozen="A"), name="ffa-lora"),
        "FFA-LoRA: A frozen at the shared init, only B trained and averaged",
    ),
    "fedsa-lora": Method(
        lambda b: _fedavg(b, sharing=Sharing(shared="A"), name="fedsa-lora"),
        "FedSA-LoRA: A averaged, B kept local",
    ),
    "fedex-lora": Method(
        lambda b: FedExLoRA(b.local, alpha=b.alpha),
        "FedEx-LoRA: exact aggregation, the averaging residual folded into the frozen weight",
    ),
    "flora": Method(
        lambda b: FLoRA(b.local, alpha=b.alpha, rank=b.rank, ranks=b.options.flora.ranks),
        "FLoRA: stacked client LoRAs give the exact sum of updates; heterogeneous ranks",
    ),
    "flexlora": Method(
        lambda b: FlexLoRA(b.local, alpha=b.alpha, rank=b.rank, ranks=b.options.flexlora.ranks),
        "FlexLoRA: SVD of the mean product redistributed to each client's rank",
    ),
    "feddpa": Method(
        lambda b: FedDPA(b.local, **b.options.feddpa.model_dump()),
        "FedDPA: global and local adapters mixed by test-time instance weights",
    ),
    "fdlora": Method(
        lambda b: FDLoRA(b.local, **b.options.fdlora.model_dump()),
        "FDLoRA: personal + global LoRA with adaptive fusion (documented reconstruction)",
    ),
    "fedbiot": Method(
        _fedbiot,
        "FedBiOT: adapter tuned on a layer-dropped emulator the server aligns on public text",
    ),
    "fwdllm": Method(
        lambda b: FwdLLM(b.local, rounds=b.rounds, **b.options.fwdllm.model_dump()),
        "FwdLLM: backprop-free forward gradients with variance control",
    ),
    "rpa": Method(
        lambda b: RPA(b.local, b.options.rpa, seed=b.seed, layout=_needs_layout(b, "rpa")),
        "Routed prototype adapters (seed 000): prototype pool, projected routing, residuals",
    ),
    "fedweave": Method(
        lambda b: FedWeave(b.local, b.options.fedweave, seed=b.seed, layout=_needs_layout(b, "fedweave")),
        "FedWeave (seed 002): prototype discovery, signature alignment, mixture of LoRA experts",
    ),
    "fedlease": Method(
        lambda b: FedLEASE(b.local, b.options.fedlease, seed=b.seed, layout=_needs_layout(b, "fedlease")),
        "FedLEASE: clustered LoRA experts with an adaptive top-M router",
    ),
}


def _needs_layout(b: BuildContext, name: str) -> TensorLayout:
    if b.layout is None:
        raise ConfigError(f"method {name!r} needs the adapter layout; build it after the backbone is loaded")
    return b.layout


def build_algorithm(name: str, context: BuildContext) -> Algorithm:
    if name not in METHODS:
        raise ConfigError(f"unknown method {name!r}; available: {', '.join(sorted(METHODS))}")
    defended = context.privacy.clip is not None or context.robust.rule != "mean"
    if defended and name not in FEDAVG_FAMILY:
        raise ConfigError(f"privacy.clip and robust.rule apply to the FedAvg family ({', '.join(FEDAVG_FAMILY)}); "
                          f"{name!r} aggregates differently")  # fmt: skip
    return METHODS[name].build(context)
