"""fedloom against the single-process PEFT loop a FlowerTune / OpenFedLLM user would write, on one workload
(issue 21), run alternately A/B/A/B in one invocation. Not a test.

Workload: 8 clients × 64 training prompts (SYNTHETIC text, ~59 tokens; 16 validation and 16 test rows
each), SmolLM2-135M-Instruct, LoRA r = 8, α = 16, dropout 0.05 on q_proj / v_proj, a private linear
regression head on the mean-pooled last hidden state, 4 of 8 clients a round, 3 AdamW steps of batch
16 (lr 5e-4, weight decay 0.01) per client-round, 3 rounds, FedAvg over the LoRA tensors, evaluation
once at the end.

* ``fedloom``: ``fedloom run --method fedavg`` on the table through the generic CSV loader (a
  subprocess, timed whole: start-up, model load, features, training, evaluation).
* ``peft``: written here — one ``transformers`` model wrapped once by ``peft.get_peft_model``, the
  global adapter swapped in per client with ``set_peft_model_state_dict``, the same token sequences
  (fedloom's prompts, right-padded to 64), the last hidden state from the decoder stack (no LM head).

Both in the dtype given (``--dtype float32`` or ``bfloat16``: frozen weights; adapters, heads and
optimizer fp32; ``--dtype auto`` lets fedloom pick by measurement and ``--reference-dtype``, repeatable,
sets the PEFT loop's, e.g. the issue's fp32 reference beside the bf16 one) with adapters on all 30
layers, and again on the top 2 (``--layers top2``; fedloom's prefix cache applies there, the reference
runs the whole stack). Each measurement: wall time and peak RSS of the process (``/usr/bin/time``),
and for fedloom the split of its time from its run directory.

    python benchmarks/peer.py --dtype bfloat16 --repeats 2 --out benchmarks/results/peer-DATE.json
    python benchmarks/peer.py --dtype auto --reference-dtype float32 --reference-dtype bfloat16 --layers top2
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

CLIENTS, TRAIN, EVAL, ROUNDS, SELECTED, STEPS, BATCH, PAD = 8, 64, 16, 3, 4, 3, 16, 64
WORDS = (  # noqa: SIM905 - a sentence reads better than 40 quoted words
    "shares rose after the company reported quarterly revenue above estimates while margins narrowed on higher "
    "input costs and analysts cut targets citing weaker demand in europe guidance unchanged buyback announced "
    "dividend raised lawsuit settled merger talks ended supply chain recovered"
).split(" ")


def write_table(folder: Path, seed: int = 0) -> Path:
    """The SYNTHETIC table: per client 64 train, 16 val, 16 test rows of ~45 words and a noisy target."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(CLIENTS):
        for i, split in enumerate(["train"] * TRAIN + ["val"] * EVAL + ["test"] * EVAL):
            words = rng.choice(WORDS, size=40)
            day = (pd.Timestamp("2024-01-01") + pd.Timedelta(days=i // 8)).date().isoformat()  # 8 stocks a day
            rows.append({"day": day, "ticker": f"c{c}s{i % 8}", "client": f"client{c}",
                         "text": " ".join(words), "ret": float(rng.normal(0, 0.01)), "split": split})  # fmt: skip
    path = folder / "peer.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def fedloom_config(folder: Path, table: Path, dtype: str, top2: bool) -> Path:
    cfg = {
        "backbone": "smollm2-135m", "dataset": "generic", "method": "fedavg", "rounds": ROUNDS, "seed": 0,
        "model": {"dtype": dtype},
        "adapter": {"rank": 8, "alpha": 16, "dropout": 0.05, "targets": ["q_proj", "v_proj"],
                    "layers": 2 if top2 else "all"},
        "train": {"steps": STEPS, "batch_size": BATCH, "lr": 5e-4, "head_lr": 5e-4, "weight_decay": 0.01},
        "data": {"prompt": {"inputs": "text", "max_tokens": PAD},
                 "generic": {"path": str(table), "split_column": "split", "covariates": [],
                             "columns": {"date": "day", "instrument": "ticker", "group": "client", "text": "text",
                                         "target": "ret"}}},
        "federation": {"fraction": SELECTED / CLIENTS, "eval_every": ROUNDS, "wire_dtype": "float32",
                       "test_rounds": "chosen"},  # the test rows once, at the end (the reference scores test once too)
    }  # fmt: skip
    path = folder / f"peer-{dtype}-{'top2' if top2 else 'all'}.json"
    path.write_text(json.dumps(cfg))
    return path


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS GiB, output) of ``cmd`` under /usr/bin/time."""
    started = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "MAXRSS %M", *cmd], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed:\n{proc.stderr[-3000:]}")
    rss = int(re.findall(r"MAXRSS (\d+)", proc.stderr)[-1]) / 2**20
    return wall, rss, proc.stdout


def run_fedloom(folder: Path, config: Path, tag: str) -> dict:
    out = folder / f"run-{tag}"
    wall, rss, _ = timed(
        [
            str(Path(sys.executable).with_name("fedloom")),
            "run",
            "--config",
            str(config),
            "--out",
            str(out),
            "--overwrite",
        ]
    )
    env = json.loads((out / "env.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    rounds = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = sum(r["seconds"].get("local", 0.0) for r in rounds)
    setup = env["setup_seconds"]
    split = {"load": setup.get("backbone", 0.0), "features": setup.get("data", 0.0) + setup.get("features", 0.0),
             "train": train, "evaluate and the rest": summary["wall_seconds"] - train}  # fmt: skip
    split["start-up"] = wall - sum(split.values())
    return {"wall": wall, "rss_gib": rss, "split": split, "dtype": env["dtype"],
            "test_mse": summary["metrics"].get("personal/test/mse/macro")}  # fmt: skip


def run_reference(folder: Path, table: Path, dtype: str, top2: bool) -> dict:
    cmd = [sys.executable, __file__, "--role", "reference", "--table", str(table), "--dtype", dtype]
    wall, rss, out = timed([*cmd, *(["--layers", "top2"] if top2 else [])])
    return {"wall": wall, "rss_gib": rss, **json.loads(out.strip().splitlines()[-1])}


def reference(table: Path, dtype: str, top2: bool) -> None:
    """The single-process PEFT loop (OpenFedLLM's pattern); prints its own time split as JSON."""
    started = time.perf_counter()
    import torch
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    from fedloom.backbone.loading import load_backbone
    from fedloom.data.generic import GenericConfig, build_generic
    from fedloom.data.prompts import PromptConfig, tokenize_prompts

    imported = time.perf_counter()
    backbone = load_backbone("smollm2-135m", dtype="float32")  # only to find the converted weights' folder
    folder = Path(backbone.model.name_or_path)
    del backbone
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch_dtype)
    layers = model.config.num_hidden_layers
    lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=["q_proj", "v_proj"],
                      layers_to_transform=[layers - 2, layers - 1] if top2 else None)  # fmt: skip
    model = get_peft_model(model, lora)
    for name, p in model.named_parameters():
        if "lora_" in name:
            p.data = p.data.float()
    decoder = model.base_model.model.model  # LlamaModel: hidden states, no LM head
    raw = pd.read_csv(table)
    roles = {"date": "day", "instrument": "ticker", "group": "client", "text": "text", "target": "ret"}
    cfg = GenericConfig(path=table, split_column="split", columns=roles)
    samples = build_generic(raw, cfg, table)
    tokens = tokenize_prompts(samples, backbone_tokenizer(), PromptConfig(inputs="text", max_tokens=PAD))
    ids = torch.zeros(len(raw), PAD, dtype=torch.long)
    mask = torch.zeros(len(raw), PAD, dtype=torch.long)
    for i in range(len(raw)):
        row = torch.as_tensor(tokens.row(i))[:PAD]
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    target = torch.tensor(raw["ret"].to_numpy(), dtype=torch.float32)
    clients = {c: np.flatnonzero(raw["client"].to_numpy() == c) for c in sorted(raw["client"].unique())}
    split = raw["split"].to_numpy()
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)  # the heads' initialization, so repeats train the same model
    heads = {c: torch.nn.Linear(decoder.config.hidden_size, 1) for c in clients}
    global_state = {k: v.clone() for k, v in get_peft_model_state_dict(model).items()}
    loaded = time.perf_counter()

    def pooled(rows: np.ndarray) -> torch.Tensor:
        hidden = decoder(input_ids=ids[rows], attention_mask=mask[rows]).last_hidden_state.float()
        m = mask[rows].unsqueeze(-1).float()
        return (hidden * m).sum(1) / m.sum(1)

    train_seconds = 0.0
    for _ in range(ROUNDS):
        chosen = [list(clients)[i] for i in torch.randperm(CLIENTS, generator=gen)[:SELECTED].tolist()]
        updates = []
        for c in chosen:
            t = time.perf_counter()
            set_peft_model_state_dict(model, global_state)
            model.train()
            params = [p for n, p in model.named_parameters() if "lora_" in n] + list(heads[c].parameters())
            opt = torch.optim.AdamW(params, lr=5e-4, weight_decay=0.01)
            train_rows = clients[c][split[clients[c]] == "train"]
            for _ in range(STEPS):
                rows = train_rows[torch.randperm(len(train_rows), generator=gen)[:BATCH].numpy()]
                loss = torch.nn.functional.mse_loss(heads[c](pooled(rows)).squeeze(-1), target[rows])
                opt.zero_grad()
                loss.backward()
                opt.step()
            updates.append({k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()})
            train_seconds += time.perf_counter() - t
        global_state = {k: torch.stack([u[k] for u in updates]).mean(0) for k in global_state}
    t = time.perf_counter()
    set_peft_model_state_dict(model, global_state)
    model.eval()
    errors = []
    with torch.no_grad():
        for c, rows in clients.items():
            test = rows[split[rows] == "test"]
            errors.append(float(((heads[c](pooled(test)).squeeze(-1) - target[test]) ** 2).mean()))
    done = time.perf_counter()
    print(json.dumps({"split": {"imports": imported - started, "load and tokens": loaded - imported,
                                "train": train_seconds, "evaluate": done - t},
                      "test_mse": float(np.mean(errors))}))  # fmt: skip


def backbone_tokenizer():  # the SmolLM2 tokenizer, as fedloom tokenizes with it
    from fedloom.backbone.loading import smollm2_tokenizer

    return smollm2_tokenizer()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=["bench", "reference"], default="bench")
    parser.add_argument("--table", type=Path)
    parser.add_argument(
        "--dtype",
        default="bfloat16",
        choices=["float32", "bfloat16", "auto"],
        help="fedloom's model.dtype (auto: its measured choice on this CPU)",
    )
    parser.add_argument("--reference-dtype", action="append", choices=["float32", "bfloat16"],
                        help="the PEFT loop's dtype, repeatable (default: --dtype)")  # fmt: skip
    parser.add_argument("--layers", default="all", choices=["all", "top2", "both"])
    parser.add_argument("--repeats", type=int, default=2, help="A/B pairs per setting")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--write-to", type=Path, help="only write the table and fedloom's configs into this folder")
    args = parser.parse_args()
    if args.write_to:
        args.write_to.mkdir(parents=True, exist_ok=True)
        table = write_table(args.write_to)
        for top2 in (False, True):
            print(fedloom_config(args.write_to, table, args.dtype, top2))
        return
    if args.role == "reference":
        reference(args.table, args.dtype, args.layers == "top2")
        return
    ref_dtypes = args.reference_dtype or [args.dtype]
    if "auto" in ref_dtypes:
        parser.error("--dtype auto needs --reference-dtype float32|bfloat16 for the PEFT loop")
    names = {d: "peft" if ref_dtypes == [args.dtype] else f"peft-{d}" for d in ref_dtypes}  # result keys
    results: dict[str, dict[str, list[dict]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        table = write_table(folder)
        for layers in ["all", "top2"] if args.layers == "both" else [args.layers]:
            top2 = layers == "top2"
            config = fedloom_config(folder, table, args.dtype, top2)
            runs = results.setdefault(layers, {"fedloom": [], **{n: [] for n in names.values()}})
            for k in range(args.repeats):  # A/B/A/B
                runs["fedloom"].append(run_fedloom(folder, config, f"{layers}-{k}"))
                for d, name in names.items():
                    runs[name].append(run_reference(folder, table, d, top2))
                print(layers, k, {s: round(v[-1]["wall"], 1) for s, v in runs.items()}, flush=True)
    summary = {layers: {s: {"median_wall": statistics.median(r["wall"] for r in v),
                            "peak_rss_gib": max(r["rss_gib"] for r in v)} for s, v in runs.items()}
               for layers, runs in results.items()}  # fmt: skip
    print(json.dumps(summary, indent=1))
    if args.out:
        cpu = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
        flags = sorted({f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f" {f}" in cpu})
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "summary": summary,
                                        "runs": results, "cpu_flags": flags, "machine": platform.processor(),
                                        "date": time.strftime("%Y-%m-%d")}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
