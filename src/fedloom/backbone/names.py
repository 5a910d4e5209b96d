"""Names of the built-in backbones: what a config may name without a path, checked without loading torch."""

SMOLLM2 = "smollm2-135m"
TINY_RANDOM_LLAMA = "tiny-random-llama"
BUILTIN_BACKBONES = (SMOLLM2, TINY_RANDOM_LLAMA)


def known_backbones() -> list[str]:
    return sorted(BUILTIN_BACKBONES)
