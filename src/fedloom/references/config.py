"""Settings of the reference models. Each default is Qlib's, with the file it comes from."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# the fedloom methods that treat a model's tensors as opaque (no LoRA factors, backbone or embeddings):
# the ones a federated reference can run under
FederatedAlgorithm = Literal["local", "fedavg", "fedprox", "fedavgm", "ditto", "scaffold"]


def _check_heads(width: int, *heads: int) -> None:
    """Multi-head attention splits the width evenly: every head count must divide it."""
    for h in heads:
        if width % h:
            raise ValueError(f"hidden_size {width} is not divisible by {h} heads")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LinearConfig(_Strict):
    """qlib/contrib/model/linear.py and examples/benchmarks/Linear/workflow_config_linear_Alpha158.yaml."""

    estimator: Literal["ols", "ridge"] = Field("ols", description="ols: least squares; ridge: + alpha·|w|²")
    alpha: float = Field(0.0, ge=0, description="ridge penalty (ols ignores it)")
    fit_intercept: bool = Field(False, description="Qlib's LinearModel default: no intercept")


class RidgeProbeConfig(_Strict):
    """The frozen-feature probe (issue 42, beyond the seed): ridge with an intercept on standardized inputs, α
    chosen on the validation rows from a fixed grid (`fedloom.tasks.ridge.ALPHAS`)."""

    inputs: Literal["covariates", "state", "both"] = Field(
        "both",
        description="covariates: the table's numeric features; state: the frozen LLM's mean-pooled final "
        "hidden state of each row's prompt (what an LLM row's head reads before any adapter moves); both",
    )


class BoostingConfig(_Strict):
    """Rounds and early stopping shared by the three boosting libraries (Qlib's gbdt.py, xgboost.py,
    catboost_model.py: ``num_boost_round=1000, early_stopping_rounds=50`` on the validation split)."""

    num_boost_round: int = Field(1000, ge=1, description="boosting rounds at most")
    early_stopping_rounds: int = Field(50, ge=1, description="stop after this many rounds without a better val loss")


class LightGBMConfig(BoostingConfig):
    """examples/benchmarks/LightGBM/workflow_config_lightgbm_Alpha158.yaml."""

    learning_rate: float = Field(0.2, gt=0)
    num_leaves: int = Field(210, ge=2)
    max_depth: int = Field(8)
    colsample_bytree: float = Field(0.8879, gt=0, le=1)
    subsample: float = Field(0.8789, gt=0, le=1)
    lambda_l1: float = Field(205.6999, ge=0)
    lambda_l2: float = Field(580.9768, ge=0)


class XGBoostConfig(BoostingConfig):
    """examples/benchmarks/XGBoost/workflow_config_xgboost_Alpha158.yaml."""

    eta: float = Field(0.0421, gt=0)
    max_depth: int = Field(8, ge=1)
    colsample_bytree: float = Field(0.8879, gt=0, le=1)
    subsample: float = Field(0.8789, gt=0, le=1)


class CatBoostConfig(BoostingConfig):
    """examples/benchmarks/CatBoost/workflow_config_catboost_Alpha158.yaml (``bootstrap_type: Poisson``
    exists on GPU only; Qlib's catboost_model.py falls back to Bernoulli on CPU, as here)."""

    learning_rate: float = Field(0.0421, gt=0)
    max_depth: int = Field(6, ge=1)
    num_leaves: int = Field(100, ge=2)
    subsample: float = Field(0.8789, gt=0, le=1)
    grow_policy: Literal["Lossguide", "SymmetricTree", "Depthwise"] = Field("Lossguide")


class MLPConfig(_Strict):
    """qlib/contrib/model/pytorch_nn.py (DNNModelPytorch, Net) with
    examples/benchmarks/MLP/workflow_config_mlp_Alpha158.yaml. (Names differ from the LLM's ``train``
    keys so that ``--set lr=…`` and the other leaf shorthands keep meaning the LLM's.)"""

    hidden_sizes: list[int] = Field([256], min_length=1, description="Linear → norm → LeakyReLU(0.1) blocks")
    norm: Literal["auto", "batch", "layer"] = Field(
        "auto",
        description="normalization of each block: batch (Qlib's BatchNorm), layer (LayerNorm: no running "
        "statistics, the usual federated substitute); auto: batch pooled or local, layer federated",
    )
    dropout_rate: float = Field(0.05, ge=0, lt=1, description="dropout on the input and before the output layer")
    learning_rate: float = Field(0.002, gt=0, description="Adam learning rate")
    adam_weight_decay: float = Field(0.0002, ge=0, description="Adam's L2 weight decay")
    batch_rows: int = Field(8192, ge=1, description="rows per step, drawn with replacement")
    max_steps: int = Field(8000, ge=1)
    eval_steps: int = Field(20, ge=1, description="validate every this many steps")
    early_stop_rounds: int = Field(50, ge=1, description="stop after this many validations without improvement")


class EncoderConfig(_Strict):
    """What every neural series encoder shares (examples/benchmarks/<Model>/workflow_config_<model>_Alpha360.yaml;
    each subclass sets its file's values). Trained in epochs, gradient values clipped at 3, stopped on
    the validation loss."""

    hidden_size: int = Field(64, ge=2, description="hidden width (RNN state, TCN channels, transformer d_model)")
    num_layers: int = Field(2, ge=1, description="stacked layers / blocks")
    dropout_rate: float = Field(0.0, ge=0, lt=1)
    learning_rate: float = Field(1e-3, gt=0, description="Adam learning rate")
    adam_weight_decay: float = Field(0.0, ge=0, description="Adam's L2 weight decay")
    max_epochs: int = Field(200, ge=1, description="passes over the training rows at most")
    early_stop: int = Field(20, ge=1, description="epochs without a lower validation loss before stopping")


class SequenceConfig(EncoderConfig):
    """A sequence reference: shuffled mini-batches of rows."""

    batch_rows: int = Field(800, ge=1, description="rows per step")


class LSTMConfig(SequenceConfig):
    """workflow_config_lstm_Alpha360.yaml (qlib/contrib/model/pytorch_lstm.py)."""


class GRUConfig(SequenceConfig):
    """workflow_config_gru_Alpha360.yaml (qlib/contrib/model/pytorch_gru.py)."""


class ALSTMConfig(SequenceConfig):
    """workflow_config_alstm_Alpha360.yaml (qlib/contrib/model/pytorch_alstm.py: a GRU with attention;
    the yaml's ``rnn_type`` never reaches the network)."""


class TCNConfig(SequenceConfig):
    """workflow_config_tcn_Alpha360.yaml (qlib/contrib/model/pytorch_tcn.py + tcn.py)."""

    hidden_size: int = Field(128, ge=2, description="channels of every causal block (Qlib's n_chans)")
    num_layers: int = Field(5, ge=1, description="causal blocks, dilations 1, 2, 4, …")
    dropout_rate: float = Field(0.5, ge=0, lt=1)
    batch_rows: int = Field(2000, ge=1)
    kernel_size: int = Field(3, ge=2)


class TransformerConfig(SequenceConfig):
    """qlib/contrib/model/pytorch_transformer.py defaults (its Alpha360 yaml sets only d_feat and seed)."""

    learning_rate: float = Field(1e-4, gt=0)
    adam_weight_decay: float = Field(1e-3, ge=0, description="Qlib's ``reg``, passed to Adam as weight decay")
    batch_rows: int = Field(2048, ge=1)
    max_epochs: int = Field(100, ge=1)
    early_stop: int = Field(5, ge=1)
    heads: int = Field(2, ge=1, description="attention heads (d_model must be divisible by them)")

    @model_validator(mode="after")
    def _heads_divide_width(self) -> TransformerConfig:
        _check_heads(self.hidden_size, self.heads)
        return self


class GATConfig(EncoderConfig):
    """workflow_config_gats_Alpha360.yaml (qlib/contrib/model/pytorch_gats.py): an LSTM encoder, then
    attention across one day's stocks; one step is one day. Qlib starts the encoder from its
    pretrained LSTM checkpoint; here it starts from scratch."""

    encoder: Literal["lstm", "gru"] = Field("lstm", description="Qlib's base_model")
    dropout_rate: float = Field(0.7, ge=0, lt=1)
    learning_rate: float = Field(1e-4, gt=0)


class DTMLConfig(EncoderConfig):
    """DTML (Yoo et al., KDD 2021; `fedloom.references.dtml`): attention-LSTM contexts, a market context
    added with weight β, self-attention across the day's stocks; one step is one day. The paper's code is
    not bundled: the values below are this project's choices in the paper's ranges, not its tuned ones."""

    num_layers: int = Field(1, ge=1, description="one LSTM layer per context encoder")
    beta: float = Field(0.1, ge=0, description="weight β of the market context (0: stock contexts only)")
    heads: int = Field(4, ge=1, description="attention heads across stocks (hidden_size must divide by them)")
    dropout_rate: float = Field(0.15, ge=0, lt=1)
    learning_rate: float = Field(1e-3, gt=0)
    max_epochs: int = Field(100, ge=1)
    early_stop: int = Field(10, ge=1)

    @model_validator(mode="after")
    def _heads_divide_width(self) -> DTMLConfig:
        _check_heads(self.hidden_size, self.heads)
        return self


class HISTConfig(EncoderConfig):
    """examples/benchmarks/HIST/workflow_config_hist_Alpha360.yaml (qlib/contrib/model/pytorch_hist.py):
    an LSTM encoder over Alpha360, one day per step, early stopping on the validation IC. Qlib starts
    the encoder from its pretrained LSTM and reads a stock-to-concept matrix of concept boards; here the
    encoder starts from scratch and SW industries stand in for concepts (``data.qlib_cn.concepts=true``)."""

    encoder: Literal["lstm", "gru"] = Field("lstm", description="Qlib's base_model")
    learning_rate: float = Field(1e-4, gt=0)


class MASTERConfig(_Strict):
    """MASTER (Li et al., AAAI 2024): SJTU-Quant/MASTER main.py and master.py (d_model 256, t_nhead 4,
    s_nhead 2, dropout 0.5, β 5 on CSI300 / 2 on CSI800, lr 1e-5, 40 epochs, stop once the training
    loss is ≤ 0.95; one day per step, each day's top and bottom 2.5 % labels left out and the rest
    z-scored). Inputs: ``data.qlib_cn.step_len=8`` and ``data.qlib_cn.market=true``."""

    hidden_size: int = Field(256, ge=2, description="d_model")
    temporal_heads: int = Field(4, ge=1, description="heads of the intra-stock (over time) attention")
    stock_heads: int = Field(2, ge=1, description="heads of the inter-stock (over the day's stocks) attention")
    dropout_rate: float = Field(0.5, ge=0, lt=1, description="attention and feed-forward dropout")
    beta: float = Field(5.0, gt=0, description="gate temperature β (MASTER: 5 on CSI300, 2 on CSI800)")
    learning_rate: float = Field(1e-5, gt=0, description="Adam learning rate")
    max_epochs: int = Field(40, ge=1, description="passes over the training days at most")
    train_loss_stop: float = Field(0.95, gt=0, description="stop after an epoch whose mean training MSE is ≤ this")
    drop_extreme: float = Field(0.025, ge=0, lt=0.5, description="share of each day's top and bottom labels left out")

    @model_validator(mode="after")
    def _heads_divide_width(self) -> MASTERConfig:
        _check_heads(self.hidden_size, self.temporal_heads, self.stock_heads)
        return self


class ReferenceOptions(_Strict):
    """How reference models train (``method`` = one of `fedloom methods`' references)."""

    mode: Literal["pooled", "local", "federated"] = Field(
        "pooled",
        description="pooled: one model on every client's rows (centralized); local: one model per client; "
        "federated: a neural reference's network trained by `algorithm` over `rounds`, or the ridge probe "
        "solved once from the clients' summed moments (beyond seed 000)",
    )
    algorithm: FederatedAlgorithm = Field(
        "fedavg",
        description="federated mode: the fedloom method that trains the network in place of a LoRA adapter "
        "(its `methods.<name>` settings apply; heads stay private)",
    )
    threads: int | None = Field(None, ge=1, description="threads of the boosting libraries (None: every core)")
    linear: LinearConfig = LinearConfig()
    ridge_probe: RidgeProbeConfig = RidgeProbeConfig()
    lightgbm: LightGBMConfig = LightGBMConfig()
    xgboost: XGBoostConfig = XGBoostConfig()
    catboost: CatBoostConfig = CatBoostConfig()
    mlp: MLPConfig = MLPConfig()
    lstm: LSTMConfig = LSTMConfig()
    gru: GRUConfig = GRUConfig()
    alstm: ALSTMConfig = ALSTMConfig()
    tcn: TCNConfig = TCNConfig()
    transformer: TransformerConfig = TransformerConfig()
    gat: GATConfig = GATConfig()
    dtml: DTMLConfig = DTMLConfig()
    hist: HISTConfig = HISTConfig()
    master: MASTERConfig = MASTERConfig()
