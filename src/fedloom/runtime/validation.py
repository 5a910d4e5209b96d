"""Upload validation at the server boundary: a bad upload is rejected with a reason, never aggregated.

Checks, in order: required scalars (a positive integer sample count), exactly the expected tensor
keys, their shapes, floating dtypes, finite values, and optionally an L2 bound on the update
(upload minus download for keys the client received, the tensor itself otherwise).
"""

from __future__ import annotations

import math

import torch

from fedloom.algorithms.base import NUM_EXAMPLES, Record, UploadSpec
from fedloom.errors import UploadError


def validate_upload(upload: Record, spec: UploadSpec, download: Record, max_update_norm: float | None) -> None:
    """Raise `UploadError` naming the first problem found; return quietly for a well-formed upload."""
    for name in spec.scalars:
        if name not in upload.scalars:
            raise UploadError(f"scalar {name!r} is missing")
    if NUM_EXAMPLES in spec.scalars:
        n = upload.scalars[NUM_EXAMPLES]
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise UploadError(f"{NUM_EXAMPLES} must be a positive integer, got {n!r}")
    expected = dict(spec.tensors.entries)
    if spec.repeated is not None:
        name, layout = spec.repeated
        groups = {k.split("/", 1)[0] for k in upload.tensors if k.startswith(name) and "/" in k}
        for group in groups:
            if not group.removeprefix(name).isdigit():
                raise UploadError(f"tensor group {group!r} is not {name}<int>")
            expected.update({f"{group}/{k}": shape for k, shape in layout.entries})
    missing = sorted(expected.keys() - upload.tensors.keys())
    if missing:
        raise UploadError(f"tensor {missing[0]!r} is missing ({len(missing)} missing in all)")
    extra = sorted(upload.tensors.keys() - expected.keys())
    if extra:
        raise UploadError(f"unexpected tensor {extra[0]!r} ({len(extra)} unexpected in all)")
    squared = 0.0
    for key, shape in expected.items():
        value = upload.tensors[key]
        if tuple(value.shape) != shape:
            raise UploadError(f"tensor {key!r} has shape {tuple(value.shape)}, expected {shape}")
        if not value.is_floating_point():
            raise UploadError(f"tensor {key!r} has dtype {value.dtype}, expected a floating dtype")
        if not torch.isfinite(value).all():
            bad = int((~torch.isfinite(value)).sum())
            raise UploadError(f"tensor {key!r} has {bad} non-finite values")
        reference = download.tensors.get(key)
        delta = value if reference is None or reference.shape != value.shape else value - reference
        squared += float(delta.double().pow(2).sum())
    if max_update_norm is not None and math.sqrt(squared) > max_update_norm:
        raise UploadError(f"update norm {math.sqrt(squared):.4g} exceeds the bound {max_update_norm:.4g}")
