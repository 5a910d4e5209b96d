"""A data owner's node reads only inside its own data folder, whatever the coordinator's run config says.

Every message carries the run's configuration, written by the coordinator. Before a node builds anything
from it, `confine` sets ``data.data_dir`` to the node's own data folder (its ``data-dir``, else its
default) and checks every field that names a file or folder there — each field marked `DataPath` on its
config model, so a new field cannot be missed: relative, no ``..``, not out of the folder through a
symbolic link. A field whose reader would also look in the working directory is anchored in the data
folder. The backbone is a built-in name or a model folder inside the data folder. A refusal names the
key and never what is or is not on the node's disk.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from fedloom.backbone.names import known_backbones
from fedloom.data.files import DataPath, resolve_data_dir
from fedloom.errors import NodeRefusedError
from fedloom.runs.config import RunConfig

Key = tuple[str, ...]


def data_paths(model: type[BaseModel], prefix: Key = ()) -> Iterator[tuple[Key, DataPath]]:
    """Every field of ``model`` (nested sections included) marked as a path inside the data folder."""
    for name, field in model.model_fields.items():
        marks = [m for m in field.metadata if isinstance(m, DataPath)]
        if marks:
            yield (*prefix, name), marks[0]
        elif isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from data_paths(field.annotation, (*prefix, name))


def node_data_dir(node: Mapping[str, Any]) -> Path | None:
    """The node's own data folder: its ``data-dir``, else the default a local run would use."""
    return resolve_data_dir(node.get("data-dir"))


def confine(raw: Any, root: Path | None) -> dict[str, Any]:
    """The coordinator's run config (parsed YAML) with the data folder set to ``root`` and every data
    path checked to lie inside it; refused (`NodeRefusedError`) where one does not."""
    if not isinstance(raw, dict) or not isinstance(raw.get("data", {}), dict):
        raise NodeRefusedError("the run configuration is not a mapping with a data section")
    raw = copy.deepcopy(raw)
    raw.setdefault("data", {})["data_dir"] = None if root is None else str(root)
    for key, mark in data_paths(RunConfig):
        section = raw
        for part in key[:-1]:
            section = section.get(part) if isinstance(section, dict) else None
        if isinstance(section, dict) and section.get(key[-1]) is not None:
            section[key[-1]] = inside(root, str(section[key[-1]]), ".".join(key), anchor=mark.cwd)
    backbone = raw.get("backbone")
    if backbone is not None and str(backbone) not in known_backbones():
        raw["backbone"] = inside(root, str(backbone), "backbone", anchor=True)
    return raw


def inside(root: Path | None, value: str, key: str, anchor: bool = False) -> str:
    """``value`` checked to name a place inside ``root``; anchored there (made absolute) with ``anchor``."""
    if root is None:
        raise NodeRefusedError(f"{key}: this node has no data folder to read it from")
    path = Path(value)
    if path.is_absolute() or value.startswith("~") or ".." in path.parts:
        raise NodeRefusedError(f"{key}: a node reads only inside its own data folder: give a path relative to it, "
                          "without '..'")  # fmt: skip
    full = root / path
    if not full.resolve().is_relative_to(root.resolve()):
        raise NodeRefusedError(f"{key}: leads out of this node's data folder (a symbolic link)")
    return str(full) if anchor else value
