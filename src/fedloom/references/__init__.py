"""Structured stock-ranking references: the models quants already use (OLS / ridge, LightGBM, XGBoost,
CatBoost, Qlib's MLP) on a financial table's numeric features, trained pooled (the centralized,
non-private reference of seed 000) or local-only per client, so every LLM result has a yardstick."""
