"""Every method's typed hyperparameters (the ``train``, ``privacy``, ``robust`` and ``methods:`` sections).

Kept apart from the algorithms and free of torch, so that validating a config, printing its schema
(``fedloom config``) and listing methods never load the tensor stack.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ProjectionKind = Literal["rademacher", "gaussian", "srht", "full", "learned"]
Clusterer = Literal["kmeans", "agglomerative", "spectral"]


class LocalTrainingConfig(BaseModel):
    """Local work per client per round (the same budget for every method)."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(8, ge=1, description="optimizer steps per client per round")
    batch_size: int = Field(16, ge=1, description="training mini-batch size")
    lr: float = Field(2e-4, gt=0, description="AdamW learning rate of adapter tensors")
    head_lr: float = Field(1e-3, gt=0, description="AdamW learning rate of the private head")
    head_init: Literal["client", "shared"] = Field(
        "client",
        description="private heads start from each client's own random init, or all from one seeded init "
        "(like a broadcast global model) and then train privately",
    )
    head_start: Literal["uniform", "zero", "ridge"] = Field(
        "uniform",
        description="where a private head starts: uniform (nn.Linear's random init, seed 000's recipe), zero "
        "(predicts the training mean), ridge (the penalized optimum of the task's loss on the client's training "
        "rows of the frozen features, α on its validation rows: the closed-form ridge fit for a regression head, "
        "ridge logistic regression for a classifier; beyond the seed)",
    )
    head_input: Literal["raw", "standardized"] = Field(
        "raw",
        description="what the private head reads: raw (the pooled hidden state, seed 000's recipe) or standardized "
        "(each dimension shifted and scaled by the client's own training-row statistics of the frozen model's "
        "pooled state, private like the head; beyond the seed)",
    )
    head_intercept: Literal["local", "shrunk"] = Field(
        "local",
        description="where a regression head's predictions centre at the start: local (the client's training mean, "
        "seed 000's recipe) or shrunk (that mean shrunk toward the federation's by empirical Bayes, from five sums "
        "per client sent once before round 1; Local-only, which communicates nothing, keeps its own; beyond the seed)",
    )
    head_update: Literal["adam", "ridge"] = Field(
        "adam",
        description="how a private linear head learns each round: adam (AdamW steps at head_lr, seed 000's recipe) "
        "or ridge (refitted to the penalized optimum on the client's training rows under the current adapters, before "
        "and after the adapter steps, α chosen once on validation: closed-form ridge, or ridge logistic regression "
        "for a classifier; beyond the seed)",
    )
    step_alpha: float | None = Field(
        None,
        gt=0,
        description="with head_update ridge, the ridge penalty (per standardized feature, as the validation grid's) "
        "of the head the adapter steps differentiate through: null, the validated α (the head the model predicts "
        "with); a number, a less-shrunk head for the steps' gradients only — validation can shrink the head to its "
        "intercept, and the head's weight sets the direction of every adapter gradient (AdamW's steps do not scale "
        "with its size); the head returned and predicted with keeps the validated α (beyond the seed)",
    )
    alpha_choice: Literal["once", "every_fit"] = Field(
        "once",
        description="with head_update ridge, when the refitted head's ridge α is chosen on the client's validation "
        "rows: once (on the frozen model's pooled state, before round 1) or every_fit (on the features the adapters "
        "give, at each refit: a head can then follow adapters that learned what the frozen state lacks; one more "
        "pass over the validation rows per refit; beyond the seed)",
    )
    train_loss: Literal["steps", "fitted"] = Field(
        "steps",
        description="what a client reports as its train loss: steps (the mean of its local steps' mini-batch losses, "
        "seed 000's recipe) or fitted (the loss of the parameters it returns on all its training rows, without "
        "dropout: the measure comparable with the constant's baseline/train_loss; free with head_update ridge, whose "
        "refit already has those rows' features, one extra pass over them otherwise; beyond the seed). Results "
        "do not change, only the number reported",
    )
    optimizer_state: Literal["reset", "keep"] = Field(
        "reset",
        description="reset: a fresh AdamW every round; keep: each client's AdamW moments carry over to its next "
        "round, kept in its private state, never sent (seed 000: 'maintained locally')",
    )
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay of adapter tensors")
    grad_clip: float | None = Field(None, gt=0, description="clip the global gradient norm (None: off)")
    length_buckets: bool = Field(
        False, description="mini-batches of similar token length (less padding; changes the draws, so results)"
    )

    @model_validator(mode="after")
    def _penalties_need_a_refitted_head(self) -> LocalTrainingConfig:
        if self.step_alpha is not None and self.head_update != "ridge":
            raise ValueError("step_alpha is the penalty of the refitted head the adapter steps train through; "
                             "it needs head_update: ridge (an AdamW-stepped head has no penalty)")  # fmt: skip
        if self.alpha_choice != "once" and self.head_update != "ridge":
            raise ValueError("alpha_choice: every_fit chooses the penalty of the refitted head at each refit; it "
                             "needs head_update: ridge (an AdamW-stepped head has no penalty)")  # fmt: skip
        return self


class MethodConfig(BaseModel):
    """Base of every method's hyperparameters (a ``methods:`` section): strict, so a misspelt key fails."""

    model_config = ConfigDict(extra="forbid")
    # settings read only when a finished model is evaluated: `fedloom evaluate` may change them
    evaluation_settings: ClassVar[tuple[str, ...]] = ()


class PrivacyConfig(BaseModel):
    """Client-level DP on uploads (FedAvg-family methods); off unless ``clip`` is set."""

    model_config = ConfigDict(extra="forbid")

    clip: float | None = Field(None, gt=0, description="L2 bound C of a client's update (None: DP off)")
    noise_multiplier: float = Field(1.0, ge=0, description="σ: noise std is σ·C per coordinate")
    delta: float = Field(1e-5, gt=0, lt=1, description="δ of the reported (ε, δ)")


class RobustConfig(BaseModel):
    """How a FedAvg-family server combines uploads (trust model: ``fedloom.algorithms.robust``)."""

    model_config = ConfigDict(extra="forbid")

    rule: Literal["mean", "trimmed_mean", "median", "norm_bound", "krum", "multi_krum"] = Field(
        "mean", description="aggregation rule (mean: FedAvg, trusts every claimed sample count)"
    )
    trim_fraction: float = Field(0.2, ge=0, lt=0.5, description="trimmed mean: fraction β cut at each end")
    norm_bound: float | None = Field(
        None, gt=0, description="norm bounding: fixed L2 bound M of a client update (None: norm_multiple × median)"
    )
    norm_multiple: float = Field(1.0, gt=0, description="norm bounding: M = this × the round's median update norm")
    byzantine: int = Field(1, ge=0, description="krum / multi_krum: attackers f tolerated per round")
    krum_keep: int | None = Field(None, ge=1, description="multi_krum: updates averaged m (None: n − f)")
    weight_cap: float = Field(
        2.0, ge=1, description="robust rules: a client's weight is at most this × the round's median sample count"
    )


class FedProxConfig(MethodConfig):
    mu: float = Field(0.01, ge=0, description="FedProx proximal weight μ")


class FedAvgMConfig(MethodConfig):
    momentum: float = Field(0.9, ge=0, lt=1, description="FedAvgM server momentum β")
    server_lr: float = Field(1.0, gt=0, description="FedAvgM server learning rate η_g")


class FedPerConfig(MethodConfig):
    personal_layers: int = Field(1, ge=1, description="FedPer: LoRA of the top K_P adapted layers stays local")


class ScaffoldConfig(MethodConfig):
    server_lr: float = Field(1.0, gt=0, description="SCAFFOLD global step size η_g")


class FedRepConfig(MethodConfig):
    head_fraction: float = Field(0.5, gt=0, lt=1, description="FedRep: share of the step budget for the head phase")


class DittoConfig(MethodConfig):
    lam: float = Field(0.1, ge=0, description="Ditto: pull λ of the personal adapter toward the global one")
    personal_steps: int | None = Field(None, ge=1, description="Ditto: personal steps per round (None: train.steps)")


class RankConfig(MethodConfig):
    """Client ranks of the heterogeneous-rank methods (FLoRA, FlexLoRA)."""

    ranks: list[int] | None = Field(None, description="heterogeneous client ranks, cycled over sorted client ids")


class FedDPAConfig(MethodConfig):
    local_weight: float = Field(0.5, ge=0, le=1, description="FedDPA: weight a of the local adapter in training")
    max_weight: float = Field(0.5, ge=0, le=1, description="FedDPA: w_max of the test-time weight λ(x)")
    instances: int = Field(5, ge=1, description="FedDPA: local training instances behind λ(x)")
    personal_steps: int | None = Field(None, ge=1, description="FedDPA: local-adapter steps (None: train.steps)")
    uniform: bool = Field(True, description="FedDPA: uniform server average (as its code) instead of by n_k")


class FDLoRAConfig(MethodConfig):
    outer_lr: float = Field(0.7, gt=0, description="FDLoRA: Nesterov outer learning rate")
    outer_momentum: float = Field(0.9, ge=0, lt=1, description="FDLoRA: Nesterov outer momentum")
    personal_steps: int | None = Field(None, ge=1, description="FDLoRA: personal steps (None: train.steps)")
    fusion_samples: int = Field(32, ge=1, description="FDLoRA: local samples scoring AdaFusion")
    fusion_evals: int = Field(20, ge=3, description="FDLoRA: Nelder-Mead loss evaluations")
    l1: float = Field(0.05, ge=0, description="FDLoRA: L1 penalty on the fusion weights")


class FwdLLMConfig(MethodConfig):
    server_lr: float = Field(0.01, gt=0, description="FwdLLM: peak server learning rate η")
    h: float = Field(0.01, gt=0, description="FwdLLM: central-difference step")
    warmup_ratio: float = Field(0.1, ge=0, le=1, description="FwdLLM: share of rounds warming η up")
    perturbation_sampling: bool = Field(True, description="FwdLLM: align perturbations with the last gradient")
    candidates: int = Field(10, ge=1, description="FwdLLM: Gaussian candidates per perturbation")
    var_threshold: float | None = Field(None, gt=0, description="FwdLLM: revert-and-cache above this variance")


class FedBiOTConfig(MethodConfig):
    """FedBiOT: paper config ``offsite_adpt2_dp2`` where CPU allows, CPU-sized alignment otherwise."""

    drop_ratio: float = Field(0.2, ge=0, lt=1, description="share of the layers below the adapter dropped (dp2)")
    prox: float = Field(1.0, ge=0, description="lm_loss_weight: pull of the adapter toward the received one")
    kd_weight: float = Field(0.0, ge=0, description="weight of the distillation KL in the server's alignment")
    pre_align_steps: int = Field(20, ge=0, description="alignment steps before round 1 (paper: 50 × 10 on GPU)")
    align_steps: int = Field(4, ge=0, description="alignment steps before every broadcast (paper: 10)")
    align_lr: float = Field(0.01, gt=0, description="SGD learning rate of the alignment")
    align_batch: int = Field(8, ge=1, description="public sequences per alignment step")
    public_size: int = Field(64, ge=1, description="public sequences the server aligns on (GSM8K train)")
    public_max_tokens: int = Field(128, ge=8, description="tokens kept per public sequence")


# The routing settings behind ``methods.rpa.routing``: seed 000 as published, and the routing built beside
# it (issue 17; choices measured on the routing testbed's validation split, benchmarks/RESULTS.md).
RPA_ROUTING: dict[str, dict[str, Any]] = {  # what each routing sets; the fields' own defaults are the paper's
    "paper": {},
    "improved": {"score": "prototype", "score_scale": "standardized", "route_step": 0.5, "warm_start": "residuals",
                 "warm_start_rounds": 8, "prototype_momentum": 0.9},
}  # fmt: skip


class RPAConfig(MethodConfig):
    """Routed prototype adapters: defaults from seed 000 §4.1 and specs/rpa.md; ``routing: improved`` swaps
    in the routing built beside the seed (each of its settings still overridable one by one)."""

    # read only when a finished model is evaluated: `fedloom evaluate` may change them without training
    evaluation_settings: ClassVar[tuple[str, ...]] = ("eval_residual",)

    routing: Literal["paper", "improved"] = Field(
        "paper",
        description="paper: seed 000's routing (signature scores, η_π 0.1, β = 1); improved: prototype scores, "
        "standardized, η_π 0.5, residual warm start over 8 rounds, prototype momentum 0.9 (beyond seed 000); "
        "settings given explicitly win over either",
    )

    @model_validator(mode="before")
    @classmethod
    def _routing_preset(cls, data: Any) -> Any:
        """Fill the routing settings not given explicitly from the chosen preset."""
        if not isinstance(data, dict):
            return data
        preset = RPA_ROUTING.get(data.get("routing", "paper"))
        return data if preset is None else {**preset, **data}  # an unknown name fails on the field itself

    prototypes: int = Field(4, ge=1, description="M, the number of adapter prototypes")
    projection_dim: int = Field(256, ge=1, description="q, the projected routing dimension")
    projection: ProjectionKind = Field(
        "rademacher",
        description="public projection P: rademacher, gaussian, srht (fast structured), full, "
        "learned (W·P, W fit by the server)",
    )
    learned_rank: int = Field(16, ge=1, description="rows of W for the learned projection")
    learned_history: int = Field(32, ge=2, description="projected prototype updates the server fits W on")
    route_step: float = Field(0.1, gt=0, description="η_π, the mirror-descent step")
    server_lr: float = Field(1.0, gt=0, description="β, the server step on prototypes")
    signature_momentum: float = Field(0.5, gt=0, le=1, description="λ of the EMA accumulators (eq. 9)")
    calibration_batch: int = Field(16, ge=1, description="rows of the calibration batch")
    route_update: Literal["mirror", "softmax", "fixed"] = Field("mirror", description="route rule (ablations)")
    score_direction: Literal["descent", "gradient"] = Field(
        "descent", description="score −g (the descent direction, default) or +g (eq. 13 read literally)"
    )
    decomposition: Literal["least_norm", "naive"] = Field("least_norm", description="residual → prototypes")
    signature_refresh: bool = Field(True, description="refresh signatures from aggregated residuals")
    local_residual: bool = Field(True, description="learn a residual (False: R ≡ 0, head only)")
    eval_residual: Literal["keep", "drop"] = Field(
        "drop", description="add the client's last residual at inference (keep) or not (drop)"
    )
    symmetric_init: bool = Field(False, description="identical prototypes and zero accumulators (ablation)")
    # beyond seed 000 (see the module docstring): what routes are scored against, and on what scale
    score: Literal["signature", "prototype", "loss"] = Field(
        "signature",
        description="signature (eq. 13, the seed), prototype (cos(−g, A_m − A_i): mirror descent on eq. 24) "
        "or loss (−calibration loss of each prototype, IFCA-style)",
    )
    score_scale: Literal["cosine", "standardized"] = Field(
        "cosine", description="scores as computed (the seed), or standardized across prototypes (unit spread)"
    )
    prototype_b_std: float = Field(
        0.0, ge=0, description="std of the B factors of prototypes m > 0 at init (0: B = 0, the seed)"
    )
    warm_start: Literal["none", "residuals"] = Field(
        "none",
        description="none (the seed), or residuals: the first aggregating round clusters the clients' projected "
        "residual sketches P·R and sets each prototype to its cluster's model",
    )
    warm_start_rounds: int = Field(
        1,
        ge=1,
        description="aggregating rounds whose residual sketches the warm start sums before clustering "
        "(routes stay put until then; > 1 averages the noise of short local runs away)",
    )
    prototype_momentum: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="server momentum μ on the prototype step: V ← μV + Δ̄, A ← A + βV "
        "(0: eq. 23, the seed; beyond seed 000, as FedAvgM for the pool)",
    )
    score_centring: Literal["none", "population"] = Field(
        "none",
        description="none (the seed), or subtract the population's mean score of each prototype (the last "
        "round's participants), so a prototype that helps every client alike draws no one",
    )

    @property
    def centred(self) -> bool:
        return self.score_centring == "population"


class FedWeaveConfig(MethodConfig):
    """FedWeave: defaults from seed 002 §4 and specs/fedweave.md."""

    # read only when a finished model is evaluated: `fedloom evaluate` may change them without training
    evaluation_settings: ClassVar[tuple[str, ...]] = ("inference",)

    max_buckets: int = Field(6, ge=1, description="C_max, the most local buckets per client")
    silhouette_threshold: float = Field(0.1, description="C = 1 unless some C ≥ 2 beats this silhouette")
    clusterer: Clusterer = Field("kmeans", description="local clusterer: kmeans, agglomerative, spectral")
    warmup_steps: int = Field(5, ge=1, description="LoRA warmup steps per bucket (signatures)")
    expert_counts: list[int] = Field([2, 3, 4, 5, 6], min_length=1, description="K_g, candidate expert counts")
    router_hidden: int = Field(512, ge=1, description="hidden width of the 2-layer router")
    router_lr: float = Field(5e-5, gt=0, description="router learning rate (experts use train.lr)")
    granularity: Literal["prototype/client", "client/client", "prototype/prototype"] = Field(
        "prototype/client", description="expert / router aggregation unit (ablations)"
    )
    inference: Literal["soft", "top1", "top2"] = Field("top1", description="mixture at evaluation")


class FedLEASEConfig(MethodConfig):
    """FedLEASE: defaults from its code (warm-up 5 rounds, at most 4 clusters)."""

    warmup_rounds: int = Field(5, ge=1, description="E_w, rounds of local-only LoRA before clustering")
    max_clusters: int = Field(4, ge=2, description="largest k tried by the silhouette search")


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
