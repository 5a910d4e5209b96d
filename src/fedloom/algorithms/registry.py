"""Method names → algorithm objects, and the ``methods:`` section of the run config.

Adding a method: one module (with its ``MethodConfig`` if it has hyperparameters), one field in
``MethodOptions``, one line in ``METHODS`` (builder + one-line summary), one row in the contract tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fedloom.algorithms.base import Algorithm, LocalTrainingConfig, MethodConfig
from fedloom.algorithms.ditto import Ditto, DittoConfig
from fedloom.algorithms.fdlora import FDLoRA, FDLoRAConfig
from fedloom.algorithms.fedavg import FedAvg, FedAvgMConfig, FedPerConfig, FedProxConfig, Sharing
from fedloom.algorithms.fedbiot import FedBiOT, FedBiOTConfig
from fedloom.algorithms.feddpa import FedDPA, FedDPAConfig
from fedloom.algorithms.fedex import FedExLoRA
from fedloom.algorithms.fedlease import FedLEASE, FedLEASEConfig
from fedloom.algorithms.fedrep import FedRep, FedRepConfig
from fedloom.algorithms.fedweave import FedWeave, FedWeaveConfig
from fedloom.algorithms.flexlora import FlexLoRA
from fedloom.algorithms.flora import FLoRA, RankConfig
from fedloom.algorithms.fwdllm import FwdLLM, FwdLLMConfig
from fedloom.algorithms.local import LocalOnly
from fedloom.algorithms.privacy import PrivacyConfig
from fedloom.algorithms.robust import RobustConfig
from fedloom.algorithms.rpa import RPA, RPAConfig
from fedloom.algorithms.scaffold import Scaffold, ScaffoldConfig
from fedloom.backbone.emulator import Aligner, emulator_of
from fedloom.backbone.features import Ragged
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.model import AdaptedLM
from fedloom.errors import ConfigError


class MethodOptions(MethodConfig):
    """Hyperparameters of the methods that have any (section = method name)."""

    fedprox: FedProxConfig = FedProxConfig()
    fedavgm: FedAvgMConfig = FedAvgMConfig()
    scaffold: ScaffoldConfig = ScaffoldConfig()
    fedper: FedPerConfig = FedPerConfig()
    fedrep: FedRepConfig = FedRepConfig()
    ditto: DittoConfig = DittoConfig()
    flora: RankConfig = RankConfig()
    flexlora: RankConfig = RankConfig()
    feddpa: FedDPAConfig = FedDPAConfig()
    fdlora: FDLoRAConfig = FDLoRAConfig()
    fwdllm: FwdLLMConfig = FwdLLMConfig()
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
        lambda b: Scaffold(b.local, b.options.scaffold),
        "SCAFFOLD: local steps corrected by control variates (option II)",
    ),
    "fedper": Method(
        lambda b: _fedavg(b, sharing=Sharing(personal_layers=b.options.fedper.personal_layers), name="fedper"),
        "FedPer: the LoRA of the top adapted layers stays local",
    ),
    "fedrep": Method(
        lambda b: FedRep(b.local, b.options.fedrep),
        "FedRep: local head phase, then shared body phase",
    ),
    "ditto": Method(
        lambda b: Ditto(b.local, b.options.ditto),
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
        lambda b: FLoRA(b.local, b.alpha, b.rank, b.options.flora),
        "FLoRA: stacked client LoRAs give the exact sum of updates; heterogeneous ranks",
    ),
    "flexlora": Method(
        lambda b: FlexLoRA(b.local, b.alpha, b.rank, b.options.flexlora),
        "FlexLoRA: SVD of the mean product redistributed to each client's rank",
    ),
    "feddpa": Method(
        lambda b: FedDPA(b.local, b.options.feddpa),
        "FedDPA: global and local adapters mixed by test-time instance weights",
    ),
    "fdlora": Method(
        lambda b: FDLoRA(b.local, b.options.fdlora),
        "FDLoRA: personal + global LoRA with adaptive fusion (documented reconstruction)",
    ),
    "fedbiot": Method(
        _fedbiot,
        "FedBiOT: adapter tuned on a layer-dropped emulator the server aligns on public text",
    ),
    "fwdllm": Method(
        lambda b: FwdLLM(b.local, b.options.fwdllm, b.rounds),
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
    problem = defence_conflict(name, context.privacy, context.robust)
    if problem:
        raise ConfigError(problem)
    return METHODS[name].build(context)


def defence_conflict(name: str, privacy: PrivacyConfig, robust: RobustConfig) -> str | None:
    """Why DP uploads or a robust rule cannot be combined with method ``name``, or None if they can."""
    defended = privacy.clip is not None or robust.rule != "mean"
    if defended and name not in FEDAVG_FAMILY:
        return (f"privacy.clip and robust.rule apply to the FedAvg family ({', '.join(FEDAVG_FAMILY)}); "
                f"{name!r} aggregates differently")  # fmt: skip
    return None
