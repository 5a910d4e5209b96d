"""The typed run configuration: YAML file + CLI flags + ``--set key=value`` overrides, validated once.

Every field is described once (in ``Field(description=...)``); ``fedloom config`` prints the
resolved tree. A key may be given as its dotted path (``federation.fraction``) or, when unique, as
its leaf name (``fraction``).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fedloom.algorithms.config import LocalTrainingConfig, MethodOptions, PrivacyConfig, RobustConfig
from fedloom.algorithms.registry import METHODS, defence_conflict
from fedloom.backbone.names import known_backbones
from fedloom.data.config import DataConfig
from fedloom.data.files import DataPath
from fedloom.data.instructions import DEFAULT_NEW_TOKENS
from fedloom.data.registry import DATASETS
from fedloom.errors import ConfigError
from fedloom.references.config import ReferenceOptions
from fedloom.references.registry import REFERENCES
from fedloom.runs.portfolio import PortfolioConfig
from fedloom.runtime.config import FederationConfig

if TYPE_CHECKING:
    from fedloom.backbone.lora import LoraSpec

# what `--resume` may change: the rounds already done stay valid (more rounds extend the run; where this
# machine keeps the data; bookkeeping; the TopkDropout settings, which only trade the final predictions once
# at the end — a finished run keeps the portfolio its config.yaml names). Everything else changes what the
# run means.
RESUMABLE_KEYS = (
    "rounds", "data.data_dir", "federation.checkpoint_every", "federation.round_timeout",
    "portfolio.topk", "portfolio.n_drop", "portfolio.max_share",
)  # fmt: skip


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelConfig(_Strict):
    """The frozen backbone's numerics."""

    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="dtype of the frozen weights; auto: the faster one on this machine, measured once"
    )
    feature_batch_size: int = Field(16, ge=1, description="batch size of the one-off frozen-feature pass")
    device: str = Field("cpu", description="where the frozen model runs: cpu or cuda (adapters stay on the CPU)")


class AdapterConfig(_Strict):
    """LoRA placement and size."""

    rank: int = Field(8, ge=1, description="LoRA rank r")
    alpha: float = Field(16.0, gt=0, description="LoRA alpha (scaling alpha / r)")
    dropout: float = Field(0.05, ge=0, lt=1, description="dropout on the LoRA input")
    targets: list[str] = Field(["q_proj", "v_proj"], min_length=1, description="linear layer names to adapt")
    layers: Literal["all"] | int | list[int] = Field(
        2, description='"all", the number of top layers, or explicit layer indices'
    )
    init_from: Annotated[str | None, DataPath(cwd=True)] = Field(
        None, description="start from this PEFT LoRA adapter directory (None: PEFT's init)"
    )

    def spec(self, num_layers: int) -> LoraSpec:
        from fedloom.backbone.lora import LoraSpec

        if self.layers == "all":
            layers = None
        elif isinstance(self.layers, int):
            if not 1 <= self.layers <= num_layers:
                raise ConfigError(f"adapter.layers={self.layers}: the backbone has {num_layers} layers")
            layers = tuple(range(num_layers - self.layers, num_layers))
        else:
            layers = tuple(self.layers)
        return LoraSpec(self.rank, self.alpha, self.dropout, tuple(self.targets), layers)


class GenerationConfig(_Strict):
    """Greedy decoding for the text tasks' metrics."""

    max_new_tokens: dict[str, int] = Field(
        default_factory=lambda: dict(DEFAULT_NEW_TOKENS),
        description="new-token budget per task (seed 002: CoEdIT 64, GSM8K 192, TweetEval 4, ARC 4)",
    )


class RunConfig(_Strict):
    """One federated experiment."""

    method: str = Field("fedavg", description="federated method or structured reference (fedloom methods)")
    dataset: str = Field("synthetic", description="dataset name")
    backbone: str = Field("smollm2-135m", description="built-in name, HF model directory or .gguf file")
    rounds: int = Field(10, ge=1, description="communication rounds")
    seed: int = Field(0, description="training seed (data has its own seed)")
    model: ModelConfig = ModelConfig()
    adapter: AdapterConfig = AdapterConfig()
    data: DataConfig = DataConfig()
    train: LocalTrainingConfig = LocalTrainingConfig()
    federation: FederationConfig = FederationConfig()
    methods: MethodOptions = MethodOptions()
    generation: GenerationConfig = GenerationConfig()
    portfolio: PortfolioConfig = PortfolioConfig()
    privacy: PrivacyConfig = Field(PrivacyConfig(), description="client-level DP on uploads (FedAvg family only)")
    robust: RobustConfig = Field(RobustConfig(), description="robust aggregation rule (FedAvg family only)")
    references: ReferenceOptions = Field(
        ReferenceOptions(), description="structured reference models (fedloom.references)"
    )

    @model_validator(mode="after")
    def _numbers_are_finite(self) -> RunConfig:
        bad = non_finite(self.model_dump())
        if bad:
            raise ValueError(f"{', '.join(bad)}: must be a finite number (inf and nan mean nothing here)")
        return self

    @model_validator(mode="after")
    def _defences_fit_the_method(self) -> RunConfig:
        problem = defence_conflict(self.method, self.privacy, self.robust)
        if problem:
            raise ValueError(problem)
        return self

    @field_validator("method")
    @classmethod
    def _known_method(cls, v: str) -> str:
        if v not in METHODS and v not in REFERENCES:
            raise ValueError(f"unknown method {v!r}; available: {', '.join(sorted(METHODS))}; "
                             f"references: {', '.join(sorted(REFERENCES))}")  # fmt: skip
        return v

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, v: str) -> str:
        if v not in DATASETS:
            raise ValueError(f"unknown dataset {v!r}; available: {', '.join(sorted(DATASETS))}")
        return v

    @field_validator("backbone")
    @classmethod
    def _known_backbone(cls, v: str) -> str:
        path = Path(v).expanduser()
        if v in known_backbones() or (path.is_dir() and (path / "config.json").is_file()) or path.suffix == ".gguf":
            return v
        raise ValueError(
            f"unknown backbone {v!r}: not a built-in name ({', '.join(known_backbones())}) "
            "and not a directory containing config.json"
        )


def non_finite(tree: Any, path: str = "") -> list[str]:
    """Dotted paths of every inf / nan float in a dumped config: one check for every section's numbers."""
    if isinstance(tree, dict):
        return [p for key, value in tree.items() for p in non_finite(value, f"{path}.{key}" if path else str(key))]
    if isinstance(tree, list | tuple):
        return [p for i, value in enumerate(tree) for p in non_finite(value, f"{path}[{i}]")]
    return [path] if isinstance(tree, float) and not math.isfinite(tree) else []


def load_config(
    path: Path | str | None = None, flags: dict[str, Any] | None = None, overrides: list[str] | None = None
) -> RunConfig:
    """Resolve a config: file, then explicit CLI flags, then ``key=value`` overrides; validate once."""
    raw: dict[str, Any] = _read_yaml(Path(path)) if path is not None else {}
    for key, value in (flags or {}).items():
        if value is not None:
            raw[key] = value
    for item in overrides or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not of the form key=value")
        _assign(raw, _resolve_key(key.strip()), _parse_value(text))
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, None if path is None else Path(path))) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, got {type(data).__name__}")
    return data


class _NoAliases(yaml.SafeLoader):
    """PyYAML's safe loader without aliases (``*name``): nine levels of them expand a few lines into
    gigabytes (a "billion laughs"), and no fedloom file needs one."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed", mark)
        return super().compose_node(parent, index)


def read_yaml(path: Path | None, text: str | None = None) -> Any:
    """The YAML of ``path`` (or ``text``, named by ``path`` in errors): one `ConfigError` for every way
    it can fail — not UTF-8, malformed, an alias, nested past Python's recursion limit."""
    where = str(path) if path is not None else "the YAML text"
    try:
        if text is None:
            assert path is not None
            text = path.read_bytes().decode("utf-8")
        return yaml.load(text, Loader=_NoAliases)  # a SafeLoader
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply to be a fedloom file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: malformed YAML{at}: {problem}") from None


def _parse_value(text: str) -> Any:
    """A ``--set`` value as YAML (an alias refused as in files), else the text as given."""
    try:
        return yaml.load(text, Loader=_NoAliases)  # a SafeLoader
    except yaml.YAMLError:
        return text
    except RecursionError:
        raise ConfigError(f"--set value {text[:40]!r}...: nested too deeply") from None


def _leaf_paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        out.append(path)
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.extend(_leaf_paths(ann, path))
    return out


def _resolve_key(key: str) -> tuple[str, ...]:
    """A dotted path that exists, or a unique field name anywhere in the tree."""
    paths = _leaf_paths(RunConfig)
    dotted = tuple(key.split("."))
    if dotted in paths:
        return dotted
    matches = [p for p in paths if p[-len(dotted) :] == dotted]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        options = ", ".join(".".join(p) for p in matches)
        raise ConfigError(f"config key {key!r} is ambiguous; use one of: {options}")
    raise ConfigError(f"config key {key!r} does not exist; `fedloom config` prints every key")


def _assign(raw: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = raw
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[path[-1]] = value


def _describe(exc: ValidationError, path: Path | None) -> str:
    source = f"{path}: " if path is not None else ""
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "no such config key"
        problems.append(f"{loc}: {msg}" if loc else msg)
    return f"{source}invalid config: " + "; ".join(problems)


def settings(cfg: RunConfig) -> dict[str, str]:
    """Every leaf of a config as dotted key → JSON text: what two runs' configs are compared by."""

    def flat(tree: dict[str, Any], prefix: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in tree.items():
            if isinstance(value, dict):
                out |= flat(value, f"{prefix}{key}.")
            else:
                out[f"{prefix}{key}"] = json.dumps(value, sort_keys=True)
        return out

    return flat(cfg.model_dump(mode="json"), "")


def changed_keys(before: RunConfig, after: RunConfig) -> list[str]:
    """The dotted keys whose values differ between two configs, sorted."""
    a, b = settings(before), settings(after)
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def dump_config(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)


def config_digest(cfg: RunConfig) -> str:
    """Identity of a run's configuration, ignoring the keys a resumed run may change (`RESUMABLE_KEYS`)."""
    kept = {k: v for k, v in settings(cfg).items() if k not in RESUMABLE_KEYS}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]
