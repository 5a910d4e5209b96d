"""Where a run sits in a suite's grid: the label `fedloom suite` writes beside the run (``job.json``)
before it starts, and what `fedloom table` groups rows by. Not run data: an overwrite keeps it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

JOB_FILE = "job.json"


class JobLabel(BaseModel):
    """Where a job sits in its suite's grid (``job.json``)."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    row: str
    method: str
    switches: str
    dataset: str
    seed: int
