"""Data configuration: where samples come from and how they are split, prompted and partitioned."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fedloom.data.acl18 import Acl18Config
from fedloom.data.fnspid import FnspidConfig
from fedloom.data.generic import GenericConfig
from fedloom.data.glt import GltConfig
from fedloom.data.instructions import TextTasksConfig
from fedloom.data.prompts import PromptConfig
from fedloom.data.qlib_cn import QlibCnConfig
from fedloom.data.synthetic import SyntheticMarketConfig


class DataConfig(BaseModel):
    """Where samples come from and how they are split and partitioned."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    data_dir: Path | None = Field(
        None, description="real datasets folder (default $FEDLOOM_DATA_DIR, else ../shared/data)"
    )
    partition: Literal["auto", "sector", "dirichlet", "iid", "task_dirichlet"] = Field(
        "auto", description="clients: auto = sector where sectors are known, dirichlet over stocks, task_dirichlet"
    )
    num_clients: int = Field(
        10, ge=1, description="clients of dirichlet / iid / task_dirichlet (sector: one per group)"
    )
    min_names: int = Field(
        1, ge=1, description="sector: groups with fewer instruments are merged, smallest first (issue 43)"
    )
    alpha: float = Field(0.3, gt=0, description="Dirichlet concentration; smaller = more skewed clients")
    partition_seed: int = Field(0, description="seed of random partitions")
    split: tuple[float, float, float] = Field(
        (0.6, 0.2, 0.2), description="chronological train/val/test fractions (datasets without a standard split)"
    )
    max_dates_per_split: int | None = Field(
        20, ge=1, description="real financial data: evenly spaced train and val dates kept (CPU-sized); null = all"
    )
    max_val_dates: int | Literal["all"] | None = Field(
        None, description="val dates kept: null = as max_dates_per_split, all = every date (choose rounds on all)"
    )
    max_test_dates: int | None = Field(
        None, ge=1, description="real financial data: evenly spaced test dates kept; null = every test date"
    )
    feature_cache: bool = Field(True, description="keep frozen features on disk under $FEDLOOM_CACHE")
    prompt: PromptConfig = PromptConfig()
    synthetic: SyntheticMarketConfig = SyntheticMarketConfig()
    acl18: Acl18Config = Acl18Config()
    bigdata22: GltConfig = GltConfig()
    fnspid: FnspidConfig = FnspidConfig()
    qlib_cn: QlibCnConfig = QlibCnConfig()
    text: TextTasksConfig = TextTasksConfig()
    generic: GenericConfig = GenericConfig()
