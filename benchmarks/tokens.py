"""Tokenization cache: token ids of a dataset are computed once and read back on later runs.
Not a test.

    python benchmarks/tokens.py --dataset acl18 --set prompt.max_tokens=256 --set prompt.decimals=2

Times `tokenize_prompts` (cold, into an empty cache) against the cache hit, on the whole dataset
(``data.max_dates_per_split=null``), each in this process after the table is loaded.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import date
from pathlib import Path

from fedloom.backbone.features import cached_ragged
from fedloom.backbone.loading import smollm2_tokenizer
from fedloom.data.prompts import tokenize_prompts
from fedloom.data.registry import load_dataset
from fedloom.runs.config import load_config
from fedloom.runs.workspace import token_key


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="acl18")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    cfg = load_config(None, {"dataset": args.dataset}, ["data.max_dates_per_split=null", *args.overrides])
    table, tokenizer = load_dataset(cfg.dataset, cfg.data), smollm2_tokenizer()
    key = token_key(table, "smollm2-135m", cfg)
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        cold = cached_ragged(Path(cache), key, lambda: tokenize_prompts(table, tokenizer, cfg.data.prompt))
        t1 = time.perf_counter()
        hit = cached_ragged(Path(cache), key, lambda: tokenize_prompts(table, tokenizer, cfg.data.prompt))
        t2 = time.perf_counter()
    assert (hit.values == cold.values).all()
    result = {"date": str(date.today()), "dataset": args.dataset, "rows": len(table), "tokens": int(cold.offsets[-1])}
    result |= {"cold_s": t1 - t0, "hit_s": t2 - t1, "speedup": (t1 - t0) / (t2 - t1)}
    print(json.dumps(result, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"tokens-{args.dataset}-{result['date']}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
