"""Gradient-boosted trees from their own libraries (LightGBM, XGBoost, CatBoost) with Qlib's Alpha158
settings: up to ``num_boost_round`` rounds, stopped when the validation loss has not improved for
``early_stopping_rounds``; the model of the best round predicts."""

from __future__ import annotations

import os

import numpy as np

from fedloom.progress import Progress
from fedloom.references.base import Fold, Objective, class_index
from fedloom.references.config import CatBoostConfig, LightGBMConfig, XGBoostConfig


def threads(requested: int | None) -> int:
    return requested or os.cpu_count() or 1


class LightGBMReference:
    """``lgb.train`` on the training fold with the validation fold as its early-stopping set."""

    def __init__(self, cfg: LightGBMConfig, objective: Objective, seed: int, num_threads: int | None) -> None:
        self.cfg, self.objective = cfg, objective
        params = cfg.model_dump(exclude={"num_boost_round", "early_stopping_rounds"})
        if objective.classes:
            binary = objective.num_classes == 2
            params |= (
                {"objective": "binary"} if binary else {"objective": "multiclass", "num_class": objective.num_classes}
            )
        else:
            params |= {"objective": "regression"}  # Qlib's loss "mse"
        self.params = params | {
            "seed": seed,
            "num_threads": threads(num_threads),
            "verbosity": -1,
            "deterministic": True,
        }

    def fit(self, train: Fold, valid: Fold, progress: Progress | None = None) -> dict[str, float]:
        import lightgbm as lgb

        dtrain = lgb.Dataset(train.x, label=train.y)
        dvalid = lgb.Dataset(valid.x, label=valid.y, reference=dtrain)
        stop = lgb.early_stopping(self.cfg.early_stopping_rounds, verbose=False)
        self.model = lgb.train(self.params, dtrain, self.cfg.num_boost_round, valid_sets=[dvalid],
                               valid_names=["valid"], callbacks=[stop])  # fmt: skip
        return {"best_iteration": float(self.model.best_iteration)}

    def predict(self, x: np.ndarray, days: np.ndarray | None = None) -> np.ndarray:
        out = np.asarray(self.model.predict(x, num_iteration=self.model.best_iteration))
        return class_index(out) if self.objective.classes else np.asarray(out, dtype=np.float32)


class XGBoostReference:
    """``xgb.train`` (histogram trees) with early stopping on the validation fold."""

    def __init__(self, cfg: XGBoostConfig, objective: Objective, seed: int, num_threads: int | None) -> None:
        self.cfg, self.objective = cfg, objective
        params = cfg.model_dump(exclude={"num_boost_round", "early_stopping_rounds"})
        if objective.classes and objective.num_classes == 2:
            params |= {"objective": "binary:logistic", "eval_metric": "logloss"}
        elif objective.classes:
            params |= {"objective": "multi:softprob", "num_class": objective.num_classes, "eval_metric": "mlogloss"}
        else:
            params |= {"objective": "reg:squarederror", "eval_metric": "rmse"}
        self.params = params | {"seed": seed, "nthread": threads(num_threads), "tree_method": "hist"}

    def fit(self, train: Fold, valid: Fold, progress: Progress | None = None) -> dict[str, float]:
        import xgboost as xgb

        dtrain, dvalid = xgb.DMatrix(train.x, label=train.y), xgb.DMatrix(valid.x, label=valid.y)
        self.model = xgb.train(self.params, dtrain, self.cfg.num_boost_round, evals=[(dvalid, "valid")],
                               early_stopping_rounds=self.cfg.early_stopping_rounds, verbose_eval=False)  # fmt: skip
        return {"best_iteration": float(self.model.best_iteration)}

    def predict(self, x: np.ndarray, days: np.ndarray | None = None) -> np.ndarray:
        import xgboost as xgb

        out = self.model.predict(xgb.DMatrix(x), iteration_range=(0, self.model.best_iteration + 1))
        return class_index(out) if self.objective.classes else np.asarray(out, dtype=np.float32)


class CatBoostReference:
    """``CatBoostRegressor`` / ``CatBoostClassifier`` with the validation fold as ``eval_set``."""

    def __init__(self, cfg: CatBoostConfig, objective: Objective, seed: int, num_threads: int | None) -> None:
        self.cfg, self.objective = cfg, objective
        loss = ("Logloss" if objective.num_classes == 2 else "MultiClass") if objective.classes else "RMSE"
        self.params = {
            "loss_function": loss,
            "iterations": cfg.num_boost_round,
            "learning_rate": cfg.learning_rate,
            "max_depth": cfg.max_depth,
            "max_leaves": cfg.num_leaves,
            "subsample": cfg.subsample,
            "grow_policy": cfg.grow_policy,
            "bootstrap_type": "Bernoulli",
            "random_seed": seed,
            "thread_count": threads(num_threads),
            "allow_writing_files": False,
            "verbose": False,
        }
        if cfg.grow_policy != "Lossguide":
            del self.params["max_leaves"]  # CatBoost takes a leaf cap only with Lossguide trees

    def fit(self, train: Fold, valid: Fold, progress: Progress | None = None) -> dict[str, float]:
        from catboost import CatBoostClassifier, CatBoostRegressor

        kind = CatBoostClassifier if self.objective.classes else CatBoostRegressor
        self.model = kind(**self.params)
        self.model.fit(train.x, train.y, eval_set=(valid.x, valid.y), use_best_model=True,
                       early_stopping_rounds=self.cfg.early_stopping_rounds)  # fmt: skip
        return {"best_iteration": float(self.model.get_best_iteration())}

    def predict(self, x: np.ndarray, days: np.ndarray | None = None) -> np.ndarray:
        if self.objective.classes:
            return class_index(np.asarray(self.model.predict_proba(x)))
        return np.asarray(self.model.predict(x), dtype=np.float32)
