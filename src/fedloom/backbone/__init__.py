"""Frozen backbones, the adapter bank, frozen-feature caches and PEFT-format export."""
