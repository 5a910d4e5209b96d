"""The frozen backbone's dtype on this machine, chosen by measurement (``model.dtype: auto``).

CPUs with native bf16 (avx512_bf16, AMX) run the frozen matmuls about twice as fast in bf16 as in
fp32; AVX2-only CPUs emulate bf16 and run it 5-10x slower. So the choice is measured, once per machine
(CPU model and flags, torch version), on a matmul of SmolLM2's shapes, and cached in
``$FEDLOOM_CACHE/precision.json``: every process on the machine (server, nodes, Ray actors) then makes
the same choice. Adapters, heads and optimizer state stay fp32 either way.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch

from fedloom.paths import atomic_write

# bf16 must be clearly faster to be worth its rounding: below this time ratio bf16 wins
BF16_WINS_BELOW = 0.8
# tokens x hidden @ hidden x intermediate: SmolLM2-135M's MLP up-projection on a batch of 512 tokens
PROBE_SHAPE = (512, 576, 1536)


# the instruction sets that decide how fast bf16 runs (the model name alone, e.g. "AMD EPYC", may not)
_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def _cpuinfo() -> tuple[str, list[str]]:
    """CPU model name and its bf16-relevant flags, from /proc/cpuinfo (platform strings elsewhere)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return model, [f for f in _FLAGS if f in flags]


def machine_key() -> str:
    """What the verdict depends on: the CPU (model and bf16-relevant flags) and torch's kernels."""
    model, flags = _cpuinfo()
    return f"{model} [{' '.join(flags)}] | torch {torch.__version__}"


def matmul_seconds(dtype: torch.dtype, shape: tuple[int, int, int] = PROBE_SHAPE, reps: int = 7) -> float:
    """Median wall time of one ``(m, k) @ (k, n)`` matmul in ``dtype`` (after a warm-up)."""
    m, k, n = shape
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=gen).to(dtype), torch.randn(k, n, generator=gen).to(dtype)
    for _ in range(2):
        a @ b
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return sorted(times)[reps // 2]


def measure() -> dict[str, float | int | str]:
    """Time fp32 and bf16 matmuls here and say which dtype the frozen model should use."""
    fp32, bf16 = matmul_seconds(torch.float32), matmul_seconds(torch.bfloat16)
    choice = "bfloat16" if bf16 < BF16_WINS_BELOW * fp32 else "float32"
    return {"float32_s": fp32, "bfloat16_s": bf16, "threads": torch.get_num_threads(), "choice": choice}


def auto_dtype(device: str, cache_file: Path) -> str:
    """``float32`` or ``bfloat16`` for the frozen weights on ``device``: measured once per machine on CPU
    (verdicts kept in ``cache_file`` by machine key), bf16 on a GPU that supports it."""
    if device.startswith("cuda"):
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    key = machine_key()
    try:
        verdicts = json.loads(cache_file.read_text())
        if not isinstance(verdicts, dict):
            raise ValueError("not a mapping")
    except (OSError, ValueError):
        verdicts = {}  # no cache yet, or an unreadable one: measure again
    cached = verdicts.get(key)
    if isinstance(cached, dict) and cached.get("choice") in ("float32", "bfloat16"):
        return str(cached["choice"])
    result = measure()
    verdicts[key] = result
    atomic_write(cache_file, json.dumps(verdicts, indent=1))  # concurrent writers never mix
    return str(result["choice"])
