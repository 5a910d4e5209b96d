"""Method names → algorithm objects.

Adding a method: one module, its ``MethodConfig`` in `fedloom.algorithms.config` if it has
hyperparameters (one field in ``MethodOptions``), one builder and one line in ``METHODS`` (builder +
one-line summary); the contract tests are parametrized over ``METHODS`` and take it up. Builders import
their algorithm module when called, so listing methods and validating a config never load torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fedloom.algorithms.config import LocalTrainingConfig, MethodOptions, PrivacyConfig, RobustConfig
from fedloom.errors import ConfigError

if TYPE_CHECKING:
    from fedloom.algorithms.base import Algorithm
    from fedloom.algorithms.fedavg import FedAvg
    from fedloom.backbone.features import Ragged
    from fedloom.backbone.layout import TensorLayout
    from fedloom.backbone.model import AdaptedLM


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


@dataclass(frozen=True)
class Method:
    """How to build a method from the build context, and what it is in one line (``fedloom methods``)."""

    build: Callable[[BuildContext], Algorithm]
    summary: str


def _fedavg(b: BuildContext, name: str, sharing: dict[str, Any] | None = None, **switches: Any) -> FedAvg:
    """A FedAvg-family method with the run's defences (robust aggregation, DP uploads); ``sharing``
    holds the `Sharing` switches (which tensors are federated, frozen or kept local)."""
    from fedloom.algorithms.fedavg import FedAvg, Sharing

    return FedAvg(b.local, robust=b.robust, privacy=b.privacy, participation=(b.fraction, b.clients_per_round),
                  sharing=Sharing(**(sharing or {})), name=name, **switches)  # fmt: skip


def _local(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.local import LocalOnly

    return LocalOnly(b.local)


def _scaffold(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.scaffold import Scaffold

    return Scaffold(b.local, b.options.scaffold)


def _fedrep(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.fedrep import FedRep

    return FedRep(b.local, b.options.fedrep)


def _ditto(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.ditto import Ditto

    return Ditto(b.local, b.options.ditto)


def _fedex(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.fedex import FedExLoRA

    return FedExLoRA(b.local, alpha=b.alpha)


def _flora(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.flora import FLoRA

    return FLoRA(b.local, b.alpha, b.rank, b.options.flora)


def _flexlora(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.flexlora import FlexLoRA

    return FlexLoRA(b.local, b.alpha, b.rank, b.options.flexlora)


def _feddpa(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.feddpa import FedDPA

    return FedDPA(b.local, b.options.feddpa)


def _fdlora(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.fdlora import FDLoRA

    return FDLoRA(b.local, b.options.fdlora)


def _fedbiot(b: BuildContext) -> Algorithm:
    """Clients build it without the backbone (they never align); the server with backbone and public text."""
    from fedloom.algorithms.fedbiot import FedBiOT
    from fedloom.backbone.emulator import Aligner, emulator_of

    cfg, aligner = b.options.fedbiot, None
    if b.lm is not None:
        if b.public is None:
            raise ConfigError("fedbiot's server needs public text to align the emulator on")
        public = b.public(cfg.public_size, cfg.public_max_tokens)
        aligner = Aligner(emulator_of(b.lm, cfg.drop_ratio), public, cfg.align_batch, cfg.align_lr, cfg.kd_weight)
    return FedBiOT(b.local, cfg, b.seed, aligner)


def _fwdllm(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.fwdllm import FwdLLM

    return FwdLLM(b.local, b.options.fwdllm, b.rounds)


def _rpa(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.rpa.algorithm import RPA

    return RPA(b.local, b.options.rpa, seed=b.seed, layout=_needs_layout(b, "rpa"))


def _fedweave(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.fedweave.algorithm import FedWeave

    return FedWeave(b.local, b.options.fedweave, seed=b.seed, layout=_needs_layout(b, "fedweave"))


def _fedlease(b: BuildContext) -> Algorithm:
    from fedloom.algorithms.fedlease import FedLEASE

    return FedLEASE(b.local, b.options.fedlease, seed=b.seed, layout=_needs_layout(b, "fedlease"))


FEDAVG_FAMILY = ("fedavg", "fedavgm", "fedprox", "fedper", "fedit", "ffa-lora", "fedsa-lora")

METHODS: dict[str, Method] = {
    "local": Method(_local, "Local-only: every client trains its own LoRA and head; nothing is shared"),
    "fedavg": Method(
        lambda b: _fedavg(b, "fedavg"),
        "FedAvg: sample-weighted mean of the LoRA factors; heads stay private",
    ),
    "fedavgm": Method(
        lambda b: _fedavg(
            b, "fedavgm", server_momentum=b.options.fedavgm.momentum, server_lr=b.options.fedavgm.server_lr
        ),
        "FedAvgM: FedAvg with heavy-ball server momentum",
    ),
    "fedprox": Method(
        lambda b: _fedavg(b, "fedprox", prox_mu=b.options.fedprox.mu),
        "FedProx: FedAvg with a proximal pull toward the global adapter in the local loss",
    ),
    "scaffold": Method(_scaffold, "SCAFFOLD: local steps corrected by control variates (option II)"),
    "fedper": Method(
        lambda b: _fedavg(b, "fedper", {"personal_layers": b.options.fedper.personal_layers}),
        "FedPer: the LoRA of the top adapted layers stays local",
    ),
    "fedrep": Method(_fedrep, "FedRep: local head phase, then shared body phase"),
    "ditto": Method(_ditto, "Ditto: a global adapter plus a personal one pulled toward it"),
    "fedit": Method(
        lambda b: _fedavg(b, "fedit"),
        "FedIT: FedAvg of LoRA factors, as in federated instruction tuning",
    ),
    "ffa-lora": Method(
        lambda b: _fedavg(b, "ffa-lora", {"shared": "B", "frozen": "A"}),
        "FFA-LoRA: A frozen at the shared init, only B trained and averaged",
    ),
    "fedsa-lora": Method(
        lambda b: _fedavg(b, "fedsa-lora", {"shared": "A"}),
        "FedSA-LoRA: A averaged, B kept local",
    ),
    "fedex-lora": Method(
        _fedex, "FedEx-LoRA: exact aggregation, the averaging residual folded into the frozen weight"
    ),
    "flora": Method(_flora, "FLoRA: stacked client LoRAs give the exact sum of updates; heterogeneous ranks"),
    "flexlora": Method(_flexlora, "FlexLoRA: SVD of the mean product redistributed to each client's rank"),
    "feddpa": Method(_feddpa, "FedDPA: global and local adapters mixed by test-time instance weights"),
    "fdlora": Method(_fdlora, "FDLoRA: personal + global LoRA with adaptive fusion (documented reconstruction)"),
    "fedbiot": Method(_fedbiot, "FedBiOT: adapter tuned on a layer-dropped emulator the server aligns on public text"),
    "fwdllm": Method(_fwdllm, "FwdLLM: backprop-free forward gradients with variance control"),
    "rpa": Method(_rpa, "Routed prototype adapters (seed 000): prototype pool, projected routing, residuals"),
    "fedweave": Method(
        _fedweave, "FedWeave (seed 002): prototype discovery, signature alignment, mixture of LoRA experts"
    ),
    "fedlease": Method(_fedlease, "FedLEASE: clustered LoRA experts with an adaptive top-M router"),
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
