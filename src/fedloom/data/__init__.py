"""Sample tables, dataset loaders, the synthetic market, prompts, chronological splits and client partitions.

Load a dataset by name with `fedloom.data.registry.load_dataset`; `fedloom data list` shows them all.
"""

from fedloom.data.partition import client_views, partition_by_group, partition_table
from fedloom.data.prompts import PromptConfig, tokenize_instructions, tokenize_prompts
from fedloom.data.schema import ClientData, SampleTable, Table, TextTable
from fedloom.data.splits import chronological_split, table_splits
from fedloom.data.synthetic import SyntheticMarketConfig, make_synthetic_market

__all__ = [
    "ClientData",
    "PromptConfig",
    "SampleTable",
    "SyntheticMarketConfig",
    "Table",
    "TextTable",
    "chronological_split",
    "client_views",
    "make_synthetic_market",
    "partition_by_group",
    "partition_table",
    "table_splits",
    "tokenize_instructions",
    "tokenize_prompts",
]
