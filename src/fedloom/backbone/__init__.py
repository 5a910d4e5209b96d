"""Frozen backbones, the adapter bank, frozen-feature caches and PEFT-format export."""

from fedloom.backbone.features import FrozenFeatures, Ragged, cached_features, compute_features
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.loading import Backbone, cache_root, known_backbones, load_backbone
from fedloom.backbone.lora import DEFAULT_SLOT, AdapterBank, AdapterLayout, Binding, LoraSpec
from fedloom.backbone.model import AdaptedLM

__all__ = [
    "DEFAULT_SLOT",
    "AdaptedLM",
    "AdapterBank",
    "AdapterLayout",
    "Backbone",
    "Binding",
    "FrozenFeatures",
    "LoraSpec",
    "Ragged",
    "TensorLayout",
    "cache_root",
    "cached_features",
    "compute_features",
    "known_backbones",
    "load_backbone",
]
