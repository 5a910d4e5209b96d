"""The generation task: the cached teacher-forced loss equals the HF model's own loss on the
response tokens, and metrics are routed per task."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedloom.backbone.features import Ragged, compute_features
from fedloom.backbone.lora import Binding
from fedloom.data.schema import ClientData
from fedloom.tasks.generation import GenerationTask
from fedloom.tasks.learner import Learner


def test_cached_response_loss_equals_the_hf_loss(tiny_lm):
    tok = tiny_lm.backbone.tokenizer
    prompts = [tok("What is two plus two?")["input_ids"], tok("Name a color.")["input_ids"]]
    responses = [tok(" Four.")["input_ids"] + [tok.eos_token_id], tok(" Blue, like the sky.")["input_ids"]]
    tokens = Ragged.from_rows([p + r for p, r in zip(prompts, responses, strict=True)], torch.int64)
    task = GenerationTask(
        np.array(["a", "a"]), np.array(["", ""]), [("",), ("",)], np.array([len(p) for p in prompts])
    )
    data = ClientData("c", np.array([0, 1]), np.array([], dtype=int), np.array([], dtype=int))
    learner = Learner(tiny_lm, compute_features(tiny_lm, tokens), np.zeros(2, np.float32),
                      np.zeros(2, "datetime64[D]"), data, task=task)  # fmt: skip
    g = torch.Generator().manual_seed(0)
    params = {k: torch.randn(v.shape, generator=g) * 0.1 for k, v in tiny_lm.layout.init_slot(g).items()}
    ours = learner.loss(params, np.array([0, 1])).item()
    # reference: HF's causal-LM loss with prompt and padding labels masked to −100
    ids, mask = tokens.pad([0, 1], pad_value=tok.pad_token_id)
    labels = ids.clone()
    labels[mask == 0] = -100
    for b, p in enumerate(prompts):
        labels[b, : len(p)] = -100
    with torch.no_grad(), tiny_lm.bank.bind(Binding(params)):
        ref = tiny_lm.model(input_ids=ids, attention_mask=mask, labels=labels).loss.item()
    assert ours == pytest.approx(ref, abs=1e-5)
    # train_loss: fitted on a text task: the evaluation batches' losses weighted by their rows
    learner.eval_batch_size = 1
    rows = [learner.loss(params, np.array([r])).item() for r in (0, 1)]
    assert learner.fitted_loss(params) == pytest.approx(sum(rows) / 2, rel=1e-6)


def test_metrics_are_routed_per_task():
    task = GenerationTask(
        np.array(["gsm8k", "gsm8k", "arc_challenge", "tweeteval", "jfleg"]),
        np.array(["72", "5", "B", "positive", ""]),
        [("x",), ("x",), ("B",), ("positive",), ("He goes home.", "He went home.")],
        np.zeros(5, dtype=int),
    )
    gens = ["so #### 72", "#### 6", "B", "Positive!", "He goes home."]
    out = task.evaluate_text(gens, np.arange(5), np.array([1.0, 3.0, 2.0, 4.0, 5.0]))
    assert out["gsm8k/score"] == 0.5 and out["gsm8k/loss"] == 2.0
    assert out["arc_challenge/score"] == 1.0 and out["tweeteval/score"] == 1.0
    assert out["jfleg/score"] == pytest.approx(1.0)
    assert out["score"] == pytest.approx((0.5 + 1 + 1 + 1) / 4) and out["loss"] == pytest.approx((2 + 2 + 4 + 5) / 4)
