"""PEFT-format export: peft.PeftModel loads it and computes what fedloom computes."""

from __future__ import annotations

import json

import pytest
import torch
from peft import PeftModel

from fedloom.backbone.loading import load_backbone
from fedloom.backbone.lora import Binding, LoraSpec
from fedloom.backbone.model import AdaptedLM
from fedloom.backbone.peft_io import export_peft, import_peft
from fedloom.errors import DataError


def _trained_like(lm, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {k: torch.randn(v.shape, generator=g) * 0.3 for k, v in lm.layout.init_slot(g).items()}


def test_peft_model_reproduces_fedloom_outputs(tmp_path):
    lm = AdaptedLM(load_backbone("tiny-random-llama"), LoraSpec(rank=4, alpha=8, layers=(1, 3)))
    params = _trained_like(lm)
    export_peft(params, lm.layout, tmp_path, base_model="tiny-random-llama")
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4 and config["layers_to_transform"] == [1, 3]

    peft_model = PeftModel.from_pretrained(load_backbone("tiny-random-llama").model, str(tmp_path)).eval()
    ids = lm.backbone.tokenizer(["Oil prices jump on supply fears.", "Pixelar upgraded."], padding=True)
    input_ids = torch.tensor(ids["input_ids"])
    mask = torch.tensor(ids["attention_mask"])
    with torch.no_grad():
        theirs = peft_model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1]
        with lm.bank.bind(Binding(params)):
            ours = lm.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1]
    real = mask.bool()
    assert (theirs[real] - ours[real]).abs().max().item() <= 1e-5
    # and the LoRA actually changes the output (the comparison is not vacuous)
    with torch.no_grad(), lm.bank.bind(None):
        plain = lm.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1]
    assert (plain[real] - ours[real]).abs().max().item() > 1e-3


def test_import_reads_back_exactly(tmp_path, tiny_lm):
    params = _trained_like(tiny_lm)
    export_peft(params, tiny_lm.layout, tmp_path)
    back = import_peft(tmp_path, tiny_lm.layout)
    assert set(back) == set(params)
    assert all(torch.equal(back[k], params[k]) for k in params)


def test_import_errors(tmp_path, tiny_lm):
    with pytest.raises(DataError, match=r"no adapter_model\.safetensors"):
        import_peft(tmp_path, tiny_lm.layout)
    export_peft(_trained_like(tiny_lm), tiny_lm.layout, tmp_path)
    other = AdaptedLM(load_backbone("tiny-random-llama"), LoraSpec(rank=4, alpha=8, layers=(1, 2, 3)))
    with pytest.raises(DataError, match=r"model.layers.1.self_attn.q_proj.lora_A.weight' is missing"):
        import_peft(tmp_path, other.layout)
