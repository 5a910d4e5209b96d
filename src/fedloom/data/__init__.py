"""Sample tables, the synthetic market, prompts, chronological splits and client partitions."""

from fedloom.data.partition import client_views, partition_by_group
from fedloom.data.prompts import PromptConfig, tokenize_prompts
from fedloom.data.schema import ClientData, SampleTable
from fedloom.data.splits import chronological_split
from fedloom.data.synthetic import SyntheticMarketConfig, make_synthetic_market

__all__ = [
    "ClientData",
    "PromptConfig",
    "SampleTable",
    "SyntheticMarketConfig",
    "chronological_split",
    "client_views",
    "make_synthetic_market",
    "partition_by_group",
    "tokenize_prompts",
]
