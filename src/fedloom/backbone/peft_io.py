"""Export and import one adapter slot in PEFT's format (``adapter_config.json`` +
``adapter_model.safetensors``), loadable with ``peft.PeftModel.from_pretrained``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from peft import LoraConfig
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from fedloom.backbone.lora import DEFAULT_SLOT, AdapterLayout, lora_a_key, lora_b_key, lora_scaling
from fedloom.errors import DataError

PEFT_PREFIX = "base_model.model."
WEIGHTS_NAME = "adapter_model.safetensors"


def peft_config(layout: AdapterLayout, base_model: str | None = None) -> LoraConfig:
    spec = layout.spec
    return LoraConfig(
        r=spec.rank,
        lora_alpha=spec.alpha,  # type: ignore[arg-type]  # PEFT annotates int but scales by any alpha / r
        lora_dropout=spec.dropout,
        target_modules=sorted(spec.targets),
        layers_to_transform=sorted({m.layer for m in layout.modules}),
        layers_pattern="layers",
        base_model_name_or_path=base_model,
        task_type="CAUSAL_LM",
    )


def export_peft(
    params: Mapping[str, Tensor],
    layout: AdapterLayout,
    out_dir: Path,
    base_model: str | None = None,
    slot: str = DEFAULT_SLOT,
) -> None:
    """Write ``params``' slot as a PEFT LoRA adapter (keys without the slot name, as PEFT saves them)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for m in layout.modules:
        tensors[f"{PEFT_PREFIX}{m.path}.lora_A.weight"] = params[lora_a_key(m.path, slot)].contiguous().float()
        tensors[f"{PEFT_PREFIX}{m.path}.lora_B.weight"] = params[lora_b_key(m.path, slot)].contiguous().float()
    peft_config(layout, base_model).save_pretrained(str(out_dir))
    save_file(tensors, out_dir / WEIGHTS_NAME, metadata={"format": "pt"})


def import_peft(in_dir: Path, layout: AdapterLayout, slot: str = DEFAULT_SLOT) -> dict[str, Tensor]:
    """Read a PEFT LoRA adapter into fedloom keys for ``slot``; every module of ``layout`` must be present."""
    weights = in_dir / WEIGHTS_NAME
    if not weights.is_file():
        raise DataError(f"no {WEIGHTS_NAME} in {in_dir}; expected a PEFT adapter directory")
    try:
        config = LoraConfig.from_pretrained(str(in_dir))
        stored = load_file(weights)
    except (OSError, ValueError, TypeError, SafetensorError) as exc:  # garbage bytes, a broken config
        raise DataError(f"{in_dir} is not a readable PEFT adapter ({type(exc).__name__}: {exc})") from None
    if lora_scaling(config.lora_alpha, config.r) != layout.spec.scaling():
        raise DataError(
            f"{in_dir}: adapter scaling alpha/r = {config.lora_alpha}/{config.r} differs from the configured "
            f"{layout.spec.alpha}/{layout.spec.rank}"
        )
    out: dict[str, Tensor] = {}
    shapes = dict(layout.slot(slot).entries)
    for m in layout.modules:
        for ours, theirs in ((lora_a_key(m.path, slot), "lora_A"), (lora_b_key(m.path, slot), "lora_B")):
            key = f"{PEFT_PREFIX}{m.path}.{theirs}.weight"
            if key not in stored:
                raise DataError(f"{weights}: tensor {key!r} is missing")
            if tuple(stored[key].shape) != shapes[ours]:
                raise DataError(f"{weights}: tensor {key!r} has shape {tuple(stored[key].shape)}, the backbone's "
                                f"layer needs {shapes[ours]} (another model or rank?)")  # fmt: skip
            out[ours] = stored[key].to(torch.float32)
    return out
