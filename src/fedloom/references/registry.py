"""Reference names → their models: what ``fedloom run --method lightgbm`` builds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from fedloom.references.base import Objective, Reference
from fedloom.references.config import ReferenceOptions

Builder = Callable[[ReferenceOptions, Objective, Sequence[str], int], Reference]  # options, objective, features, seed


@dataclass(frozen=True)
class ReferenceModel:
    """A reference's builder, what ``fedloom methods`` says about it and the feature layout it reads:
    ``rows`` any numeric columns; ``series`` Alpha360-style lags (`sequence_layout`); ``market`` day t's
    features at lags (``NAME@k``) plus MASTER's market status (`master_layout`); ``concepts`` Alpha360
    lags plus 0/1 concept memberships (`hist_layout`). ``one_pass_federated``: ``references.mode:
    federated`` fits it in one pass from the clients' sufficient statistics (`federated_fit`) instead of
    training a network round by round."""

    build: Builder
    summary: str
    reads: Literal["rows", "series", "market", "concepts"] = "rows"
    one_pass_federated: bool = False


def _linear(o: ReferenceOptions, objective: Objective, features: Sequence[str], seed: int) -> Reference:
    from fedloom.references.linear import LinearReference

    return LinearReference(o.linear, objective, seed)


def _ridge_probe(o: ReferenceOptions, objective: Objective, features: Sequence[str], seed: int) -> Reference:
    from fedloom.references.ridge_probe import RidgeProbe

    return RidgeProbe(objective)


def _lightgbm(o: ReferenceOptions, objective: Objective, features: Sequence[str], seed: int) -> Reference:
    from fedloom.references.boosting import LightGBMReference

    return LightGBMReference(o.lightgbm, objective, seed, o.threads)


def _xgboost(o: ReferenceOptions, objective: Objective, features: Sequence[str], seed: int) -> Reference:
    from fedloom.references.boosting import XGBoostReference

    return XGBoostReference(o.xgboost, objective, seed, o.threads)


def _catboost(o: ReferenceOptions, objective: Objective, features: Sequence[str], seed: int) -> Reference:
    from fedloom.references.boosting import CatBoostReference

    return CatBoostReference(o.catboost, objective, seed, o.threads)


def _mlp(o: ReferenceOptions, objective: Objective, features: Sequence[str], seed: int) -> Reference:
    from fedloom.references.mlp import mlp_reference

    return mlp_reference(o.mlp, objective, seed, federated=o.mode == "federated")


def _sequence(name: str) -> Builder:
    def build(o: ReferenceOptions, objective: Objective, features: Sequence[str], seed: int) -> Reference:
        from fedloom.references.sequence import sequence_reference

        return sequence_reference(getattr(o, name), objective, features, seed)

    return build


def _gat(o: ReferenceOptions, objective: Objective, features: Sequence[str], seed: int) -> Reference:
    from fedloom.references.graph import gat_reference

    return gat_reference(o.gat, objective, features, seed)


def _dtml(o: ReferenceOptions, objective: Objective, features: Sequence[str], seed: int) -> Reference:
    from fedloom.references.dtml import dtml_reference

    return dtml_reference(o.dtml, objective, features, seed)


def _hist(o: ReferenceOptions, objective: Objective, features: Sequence[str], seed: int) -> Reference:
    from fedloom.references.hist import hist_reference

    return hist_reference(o.hist, objective, features, seed)


def _master(o: ReferenceOptions, objective: Objective, features: Sequence[str], seed: int) -> Reference:
    from fedloom.references.master import master_reference

    return master_reference(o.master, objective, features, seed)


REFERENCES: dict[str, ReferenceModel] = {
    "linear": ReferenceModel(_linear, "reference: OLS / ridge on the numeric features (Qlib Linear)"),
    "ridge-probe": ReferenceModel(
        _ridge_probe,
        "reference: ridge on covariates / the frozen LLM state / both, α on val; federated: exact in one round",
        one_pass_federated=True,
    ),
    "lightgbm": ReferenceModel(_lightgbm, "reference: LightGBM, Qlib Alpha158 settings, early-stopped on val"),
    "xgboost": ReferenceModel(_xgboost, "reference: XGBoost, Qlib Alpha158 settings, early-stopped on val"),
    "catboost": ReferenceModel(_catboost, "reference: CatBoost, Qlib Alpha158 settings, early-stopped on val"),
    "mlp": ReferenceModel(_mlp, "reference: Qlib's DNN (MLP) on the numeric features"),
    "lstm": ReferenceModel(_sequence("lstm"), "reference: LSTM over Alpha360's 60-day series (Qlib)", "series"),
    "gru": ReferenceModel(_sequence("gru"), "reference: GRU over Alpha360's 60-day series (Qlib)", "series"),
    "alstm": ReferenceModel(_sequence("alstm"), "reference: attentive GRU (Qlib ALSTM) over Alpha360", "series"),
    "tcn": ReferenceModel(
        _sequence("tcn"), "reference: temporal convolutional network over Alpha360 (Qlib)", "series"
    ),
    "transformer": ReferenceModel(
        _sequence("transformer"), "reference: transformer encoder over Alpha360 (Qlib)", "series"
    ),
    "gat": ReferenceModel(
        _gat, "reference: LSTM + attention across a day's stocks (Qlib GATs) over Alpha360", "series"
    ),
    "dtml": ReferenceModel(
        _dtml, "reference: DTML, attention-LSTM contexts + market context + attention across stocks", "series"
    ),
    "hist": ReferenceModel(
        _hist, "reference: HIST, shared + hidden concepts over Alpha360 (SW industries as concepts)", "concepts"
    ),
    "master": ReferenceModel(
        _master, "reference: MASTER, market-guided stock transformer (8-day Alpha158 + market)", "market"
    ),
}
SEQUENCE_REFERENCES = tuple(name for name, r in REFERENCES.items() if r.reads == "series")
