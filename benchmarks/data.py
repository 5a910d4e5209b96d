"""Dataset load + feature time and peak memory (issue 3). Not a test: numbers go to RESULTS.md.

    python benchmarks/data.py                      # every case, one fresh process each
    python benchmarks/data.py --cases acl18        # one case

Each case builds its table from the files in the data folder with no cache (the derived-table cache
is switched off or pointed at an empty folder), timed once after the imports; then, for CSI300, the
same load again from the cache. Peak RSS is the process's ``VmHWM``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

CASES = ("csi300_alpha158_all", "csi300_alpha360_all", "csi300_default", "acl18", "bigdata22", "fnspid", "multitask")


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_case(case: str) -> dict[str, object]:
    """Load one dataset in this process and report seconds, rows and peak RSS."""
    from fedloom.data.acl18 import Acl18Config, load_acl18
    from fedloom.data.fnspid import FnspidConfig, load_fnspid
    from fedloom.data.glt import GltConfig, load_glt
    from fedloom.data.instructions import TextTasksConfig, load_multitask
    from fedloom.data.qlib_cn import QlibCnConfig, load_qlib_cn

    qlib = {
        "csi300_alpha158_all": QlibCnConfig(max_instruments=None, feature_set="all"),
        "csi300_alpha360_all": QlibCnConfig(max_instruments=None, features="alpha360", feature_set="all"),
        "csi300_default": QlibCnConfig(),
    }
    loaders = {
        "acl18": lambda: load_acl18(None, Acl18Config()),
        "bigdata22": lambda: load_glt(None, GltConfig()),
        "fnspid": lambda: load_fnspid(None, FnspidConfig()),
        "multitask": lambda: load_multitask(None, TextTasksConfig()),
        **{name: (lambda c=c: load_qlib_cn(None, c, "csi300")) for name, c in qlib.items()},
    }
    t0 = time.perf_counter()
    table = loaders[case]()
    out: dict[str, object] = {"case": case, "seconds": round(time.perf_counter() - t0, 2), "rows": len(table)}
    if case in qlib:
        t0 = time.perf_counter()
        loaders[case]()
        out["cached_seconds"] = round(time.perf_counter() - t0, 2)
        out["features"] = len(table.covariates)
    out["peak_rss_mb"] = round(_peak_rss_mb())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated cases")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one case and print JSON
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_case(args.one)))
        return
    results = []
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "FEDLOOM_CACHE": cache}  # an empty cache: every first load builds
        for case in args.cases.split(","):
            proc = subprocess.run([sys.executable, __file__, "--one", case], capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise SystemExit(f"{case} failed:\n{proc.stderr[-3000:]}")
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(results[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"data-load-{date.today().isoformat()}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
