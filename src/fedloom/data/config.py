"""Data configuration: where samples come from and how they are split, prompted and partitioned."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fedloom.data.prompts import PromptConfig
from fedloom.data.synthetic import SyntheticMarketConfig


class DataConfig(BaseModel):
    """Where samples come from and how they are split and partitioned."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    data_dir: Path | None = Field(None, description="real datasets folder (default $FEDLOOM_DATA_DIR)")
    partition: Literal["sector"] = Field("sector", description="client partition: one client per sector")
    split: tuple[float, float, float] = Field((0.6, 0.2, 0.2), description="chronological train/val/test")
    feature_cache: bool = Field(True, description="keep frozen features on disk under $FEDLOOM_CACHE")
    prompt: PromptConfig = PromptConfig()
    synthetic: SyntheticMarketConfig = SyntheticMarketConfig()
