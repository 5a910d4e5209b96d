"""Backbone resolution: built-in names, paths, clear errors, frozen weights, the GGUF cache."""

from __future__ import annotations

import pytest
import torch

from fedloom.backbone.loading import TINY_LLAMA, load_backbone
from fedloom.errors import BackboneNotFoundError, ConfigError


def test_tiny_random_llama_is_seeded_small_and_frozen():
    a, b = load_backbone("tiny-random-llama"), load_backbone("tiny-random-llama")
    cfg = a.model.config
    assert cfg.num_hidden_layers == TINY_LLAMA["num_hidden_layers"] <= 4 and cfg.hidden_size <= 128
    assert cfg.vocab_size == len(a.tokenizer)  # the SmolLM2 tokenizer
    for (name, p), q in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
        assert torch.equal(p, q), name
        assert not p.requires_grad
    assert not a.model.training


def test_unknown_backbone_says_what_was_looked_for():
    with pytest.raises(BackboneNotFoundError) as err:
        load_backbone("llama-9000")
    msg = str(err.value)
    assert "'llama-9000' not found" in msg
    assert "smollm2-135m" in msg and "tiny-random-llama" in msg
    assert "config.json" in msg and ".gguf" in msg


def test_bad_dtype_is_a_config_error():
    with pytest.raises(ConfigError, match="dtype 'float8' is not supported"):
        load_backbone("tiny-random-llama", dtype="float8")


def test_hf_directory_round_trip(tmp_path):
    tiny = load_backbone("tiny-random-llama")
    tiny.model.save_pretrained(tmp_path)
    tiny.tokenizer.save_pretrained(tmp_path)
    again = load_backbone(str(tmp_path), dtype="bfloat16")
    assert again.dtype == torch.bfloat16
    assert again.identity.startswith("hf:") and again.identity.endswith(":bfloat16")
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        torch.testing.assert_close(again.model.float()(ids).logits, tiny.model(ids).logits, atol=1e-2, rtol=1e-2)


def test_unavailable_device_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ConfigError, match=r"model\.device .cuda. is not available here"):
        load_backbone("tiny-random-llama", device="cuda")


def test_every_builtin_name_the_config_accepts_has_a_loader():
    from fedloom.backbone import loading
    from fedloom.backbone.names import BUILTIN_BACKBONES

    assert set(loading._BUILTINS) == set(BUILTIN_BACKBONES)
