"""Sample tables, dataset loaders, the synthetic market, prompts, chronological splits and client partitions.

Load a dataset by name with `fedloom.data.registry.load_dataset`; `fedloom data list` shows them all."""
