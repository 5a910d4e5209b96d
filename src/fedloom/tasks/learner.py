"""The local learner: trains and evaluates one client's model on its own rows.

A client model is a flat dict of named tensors: adapter tensors (bound to the shared frozen
backbone, see `fedloom.backbone.lora`) and private head tensors (``head.*``). Algorithms decide
which tensors train and how (`Optimization`: learning rates, batch size, clipping) and with which
regularizer; the learner owns the loop and knows only the client's data, task and model.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, cast

import numpy as np
import torch
from torch import Tensor

from fedloom.backbone.features import FrozenFeatures
from fedloom.backbone.lora import DEFAULT_SLOT, Binding
from fedloom.backbone.model import AdaptedLM
from fedloom.data.schema import ClientData
from fedloom.errors import ConfigError
from fedloom.tasks.classification import ClassificationTask
from fedloom.tasks.generation import GenerationTask
from fedloom.tasks.intercept import FederationMean, MeanSums, shrunk_mean
from fedloom.tasks.registry import Task
from fedloom.tasks.regression import HEAD_BIAS, HEAD_WEIGHT, RegressionTask
from fedloom.tasks.ridge import choose_alpha
from fedloom.tasks.side_channel import SideChannel
from fedloom.tasks.trained import TrainedTensors

HEAD_PREFIX = "head."
Regularizer = Callable[[Mapping[str, Tensor]], Tensor]


@dataclass(frozen=True)
class Mixture:
    """Several adapter slots in one forward: per-sample weights over ``slots`` (see `Binding`).

    ``weights(learner, params, rows)`` returns [len(rows), len(slots)] (None: every slot with
    weight 1); it may run the learner (instance-wise weights from embeddings). With ``top_k`` only
    each sample's k largest weights run.
    """

    slots: tuple[str, ...]
    weights: Callable[[Learner, Mapping[str, Tensor], np.ndarray], Tensor] | None = None
    top_k: int | None = None


SINGLE = Mixture((DEFAULT_SLOT,))
FROZEN = Mixture(())  # no adapter slot: the frozen model's features
HeadStart = Literal["uniform", "zero", "ridge"]
HeadInput = Literal["raw", "standardized"]
HeadIntercept = Literal["local", "shrunk"]
HeadUpdate = Literal["adam", "ridge"]
AlphaChoice = Literal["once", "every_fit"]
TrainLoss = Literal["steps", "fitted"]
LINEAR_HEAD = (HEAD_WEIGHT, HEAD_BIAS)  # what ``head_update: ridge`` refits (a side channel's MLP still trains)


class OptimizerMemory:
    """A client's AdamW moments kept from one local update to the next (``train.optimizer_state: keep``):
    one slot per `Learner.fit` call of an update, in call order (Ditto's global then personal fit keep
    theirs apart), per trained tensor its ``exp_avg``, ``exp_avg_sq`` and ``step``. A moment whose shape no
    longer matches its tensor is dropped. The runtime keeps it in the client's private state
    (`fedloom.runtime.memory`)."""

    FIELDS = ("exp_avg", "exp_avg_sq", "step")

    def __init__(self, tensors: Mapping[str, Tensor] | None = None) -> None:
        self.tensors: dict[str, Tensor] = dict(tensors or {})
        self.calls = 0

    def restore(self, optimizer: torch.optim.Optimizer, live: Mapping[str, Tensor], keys: Sequence[str]) -> str:
        """Put the moments of this fit call's slot into ``optimizer``; the slot's name."""
        slot, self.calls = str(self.calls), self.calls + 1
        for key in keys:
            saved = {f: self.tensors.get(f"{slot}/{key}/{f}") for f in self.FIELDS}
            if all(v is not None for v in saved.values()) and saved["exp_avg"].shape == live[key].shape:  # type: ignore[union-attr]
                optimizer.state[live[key]] = {f: v.clone() for f, v in saved.items() if v is not None}
        return slot

    def keep(
        self, optimizer: torch.optim.Optimizer, live: Mapping[str, Tensor], keys: Sequence[str], slot: str
    ) -> None:
        """Take the moments of ``keys`` out of ``optimizer`` into ``slot``."""
        for key in keys:
            state = optimizer.state.get(live[key])
            if state:
                self.tensors.update({f"{slot}/{key}/{f}": state[f].detach().clone() for f in self.FIELDS})


@dataclass(frozen=True)
class ParamGroup:
    """Tensors trained together with one learning rate and weight decay."""

    keys: tuple[str, ...]
    lr: float
    weight_decay: float = 0.0


@dataclass(frozen=True)
class Optimization:
    """How a client trains: AdamW parameter groups, the mini-batch size and the gradient-norm clip (None: off)."""

    groups: Sequence[ParamGroup]
    batch_size: int
    grad_clip: float | None = None
    length_buckets: bool = False


@dataclass(frozen=True)
class FitResult:
    """Parameters after local training and what it cost."""

    params: dict[str, Tensor]
    loss: float
    steps: int
    samples: int


class Learner:
    """One client's view of the shared backbone and feature cache: its rows, its task, its batches."""

    def __init__(
        self,
        lm: AdaptedLM,
        features: FrozenFeatures,
        targets: np.ndarray,
        dates: np.ndarray,
        data: ClientData,
        task: Task | None = None,
        eval_targets: np.ndarray | None = None,
        eval_batch_size: int = 64,
        side_channel: SideChannel | None = None,
        head_seed: int | None = None,
        head_start: HeadStart = "uniform",
        keeps_optimizer: bool = False,
        head_input: HeadInput = "raw",
        head_intercept: HeadIntercept = "local",
        head_update: HeadUpdate = "adam",
        step_alpha: float | None = None,
        alpha_choice: AlphaChoice = "once",
        train_loss: TrainLoss = "steps",
    ) -> None:
        """``eval_targets`` (default: ``targets``) are what metrics compare with, e.g. the raw return
        where training uses a normalized label (Qlib ranking); ``side_channel`` feeds covariates to
        the head beside the pooled hidden state; ``head_seed`` gives every client the same head init;
        ``head_start`` where the head starts (`init_head`); ``keeps_optimizer``: the client's AdamW
        moments carry over from round to round (`OptimizerMemory`, set by the runtime for an update);
        ``head_intercept: shrunk`` moves the head's start to the client's training mean shrunk toward the
        federation's (`fedloom.tasks.intercept`; the runtime sets ``federation_mean`` before round 1);
        ``head_update: ridge``: `fit` refits the linear head in closed form instead of stepping it (`refit_head`);
        ``step_alpha`` (with it): the ridge penalty of the head the adapter steps differentiate through (`fit`);
        ``alpha_choice`` (with it): the refits' α chosen ``once`` on the frozen state or at ``every_fit`` (`_refit`);
        ``train_loss``: what `fit` reports as the loss (`FitResult.loss`): ``steps``, the mean of its mini-batch
        losses, or ``fitted``, the returned parameters' loss on every training row (`fitted_loss`)."""
        self.lm = lm
        self.features = features
        self.targets = torch.as_tensor(targets, dtype=torch.float32)
        self.eval_targets = (
            self.targets if eval_targets is None else torch.as_tensor(eval_targets, dtype=torch.float32)
        )
        self.dates = dates
        self.data = data
        self.task = task if task is not None else RegressionTask.fitted(targets[data.train])
        self.eval_batch_size = eval_batch_size
        self.side_channel = side_channel
        self.head_seed = head_seed
        self.head_start = head_start
        self.keeps_optimizer = keeps_optimizer
        self.head_input = head_input
        self.head_intercept = head_intercept
        self.head_update = head_update
        self.step_alpha = step_alpha
        self.alpha_choice = alpha_choice
        self.train_loss = train_loss
        self._alpha: float | None = None
        self.federation_mean: FederationMean | None = None
        self.memory: OptimizerMemory | None = None
        self.trained: TrainedTensors | None = None  # while set (a client's round): what its fits train
        self._standardizer: tuple[Tensor, Tensor] | None = None
        self._frozen: dict[bytes, Tensor] = {}  # `pooled` of the frozen model, by batch: a function of the rows

    @property
    def client_id(self) -> str:
        return self.data.client_id

    @property
    def num_train(self) -> int:
        return self.data.num_train

    def emulated(self, source: Callable[[Tensor, Tensor], Tensor]) -> Learner:
        """This learner with the layers below ``L0`` replaced by ``source`` (padded ids, mask → hidden
        states), e.g. FedBiOT's emulator; the cached prefix is not read."""
        out = copy.copy(self)
        out.features = replace(self.features, prefix=None, source=source)
        out._frozen = {}  # other layers below L0: other frozen states
        return out

    def init_head(self, generator: torch.Generator) -> dict[str, Tensor]:
        """A fresh private head: ``uniform``, ``nn.Linear``'s random init from ``generator`` (or from the
        shared ``head_seed`` stream when set; seed 000's recipe); ``zero``, weights and bias 0 (predicts
        the training mean); ``ridge``, the closed-form ridge fit on this client's training rows of the
        frozen model's features, α chosen on its validation rows (`fedloom.tasks.ridge`). With ``head_intercept:
        shrunk`` a regression head's bias then moves to the shrunk training mean (`_shrunk`)."""
        if self.head_seed is not None:
            generator = torch.Generator().manual_seed(self.head_seed)
        if self.side_channel is None:
            head = self.task.init_head(self.lm.hidden_size, generator)
        else:
            width = self.lm.hidden_size + self.side_channel.width
            head = {**self.task.init_head(width, generator), **self.side_channel.init(generator)}
        if isinstance(self.task, GenerationTask):
            return head
        if self.head_start == "zero":
            head = {
                **head,
                HEAD_WEIGHT: torch.zeros_like(head[HEAD_WEIGHT]),
                HEAD_BIAS: torch.zeros_like(head[HEAD_BIAS]),
            }
        elif self.head_start == "ridge":
            head = {**head, **self._ridge_head(head)}
        return head if self.head_intercept == "local" else self._shrunk(head)

    def mean_sums(self) -> MeanSums:
        """What this client sends for ``head_intercept: shrunk``: five sums of its training targets' mean."""
        return MeanSums.of(self.targets[torch.as_tensor(self.data.train)].numpy())

    def _shrunk(self, head: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """``head`` with its bias moved so its predictions centre on the shrunk training mean instead of the
        client's own: + (ỹ − ȳ) / s in standardized units (a least-squares head's training residuals have
        mean 0, so its training loss rises by exactly ½ ((ỹ − ȳ) / s)²)."""
        task = self.task
        if not isinstance(task, RegressionTask):
            raise ConfigError(f"train.head_intercept: shrunk moves a regression head's intercept; client "
                              f"{self.client_id} has a {type(task).__name__} (use head_intercept: local)")  # fmt: skip
        if self.federation_mean is None:
            raise ConfigError(f"client {self.client_id}: train.head_intercept: shrunk needs the federation's mean, "
                              "which the runtime shares before round 1; none was shared")  # fmt: skip
        if math.isinf(self.federation_mean.tau2):  # no information from the federation: the client's own mean
            return dict(head)
        train = self.targets[torch.as_tensor(self.data.train)].numpy()
        offset = (shrunk_mean(train, self.federation_mean) - task.target_mean) / task.target_std
        return {**head, HEAD_BIAS: head[HEAD_BIAS] + offset}

    @torch.no_grad()
    def _ridge_head(self, head: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The penalized head on the frozen features of the training rows (+ the side channel at its init), α
        chosen on the validation rows (`ridge_alpha`): ridge for a regression head, ridge logistic regression
        for a classifier (the task's `head_fit`)."""
        return self._head_solver(head, FROZEN)[0](self.ridge_alpha())

    @torch.no_grad()
    def ridge_alpha(self) -> float:
        """The ridge penalty of this client's head, chosen once on its validation rows by the task loss of the
        fit on the frozen pooled state (none: the state's width) and kept for the run. The state alone: a side
        channel's features change as it trains, and α must not depend on when it is asked for; ridge
        standardizes its inputs, so ``head_input`` does not change the choice."""
        if self._alpha is None:
            task = self.task
            assert not isinstance(task, GenerationTask)
            train, val = self.data.train, self.data.split("val")

            x = self._frozen_state(train)
            if len(val):
                xv, yv = self._frozen_state(val), self.targets[torch.as_tensor(val)]
                fit = task.head_fit(x, self.targets[torch.as_tensor(train)])
                _, self._alpha = choose_alpha(fit, lambda head: float(task.loss(head, xv, yv)))
            else:
                self._alpha = float(x.shape[1])
        return self._alpha

    @torch.no_grad()
    def refit_head(self, params: Mapping[str, Tensor], mixture: Mixture = SINGLE) -> dict[str, Tensor]:
        """``head_update: ridge`` (beyond seed 000): the linear head refitted in closed form on the features
        ``params``' adapters give the training rows, with the run's α (`ridge_alpha`, or per fit: `_refit`) and,
        with ``head_intercept: shrunk``, the shrunk intercept. A head stepped by Adam from its optimum moves every
        weight by about the learning rate whatever its gradient (Adam's steps are sign-like), which is noise where
        the gradient is small; the refitted head is the optimum of the features as they are."""
        return self._refit(params, mixture)[0]

    def _refit(
        self, params: Mapping[str, Tensor], mixture: Mixture, alpha: float | None = None
    ) -> tuple[dict[str, Tensor], Tensor]:
        """`refit_head`'s head and the training rows' head inputs it was fitted on. Its α: ``alpha`` when given
        (``step_alpha``), else the run's (`ridge_alpha`), or with ``alpha_choice: every_fit`` (beyond seed 000)
        the grid's best on this client's validation rows under ``params``' adapters — α chosen once on the frozen
        state cannot follow adapters that learned what the frozen state lacks. A function of ``params`` alone,
        so a resumed run refits exactly as the uninterrupted one."""
        fit, x = self._head_solver(params, mixture)
        task, val = self.task, self.data.split("val")
        if alpha is None and self.alpha_choice == "every_fit" and len(val):
            assert not isinstance(task, GenerationTask)  # `_head_solver` refused one
            xv, yv = self._head_inputs(params, val, mixture), self.targets[torch.as_tensor(val)]
            head, alpha = choose_alpha(fit, lambda h: float(task.loss(h, xv, yv)))
        else:
            alpha = self.ridge_alpha() if alpha is None else alpha
            head = fit(alpha)
        return (head if self.head_intercept == "local" else self._shrunk(head)), x

    def _head_solver(
        self, params: Mapping[str, Tensor], mixture: Mixture
    ) -> tuple[Callable[[float], dict[str, Tensor]], Tensor]:
        """The task's penalized head as a function of α (`head_fit`: ridge, or ridge logistic for a classifier)
        on the training rows' head inputs under ``params``, and those inputs [n, H]."""
        task = self.task
        assert not isinstance(task, GenerationTask)
        train = self.data.train
        x = self._head_inputs(params, train, mixture)
        return task.head_fit(x, self.targets[torch.as_tensor(train)]), x

    @torch.no_grad()
    def fitted_loss(
        self, params: Mapping[str, Tensor], mixture: Mixture = SINGLE, inputs: Tensor | None = None
    ) -> float:
        """The task loss of ``params`` on every training row, without dropout (``train_loss: fitted``): for a head
        task the loss of the head on the rows' head inputs (``inputs`` when the caller has them, e.g. a refit),
        for a text task the mean of the evaluation batches' losses weighted by their rows. Comparable with the
        constant predictor's loss on the same rows (`fedloom.runs.baseline`)."""
        rows, task = self.data.train, self.task
        if not len(rows):
            return float("nan")
        if not isinstance(task, GenerationTask):
            x = self._head_inputs(params, rows, mixture) if inputs is None else inputs
            return float(task.loss(_head(params), x, self.targets[torch.as_tensor(rows)]))
        size = self.eval_batch_size
        total = sum(float(self.loss(params, rows[i : i + size], mixture=mixture)) * len(rows[i : i + size])
                    for i in range(0, len(rows), size))  # fmt: skip
        return total / len(rows)

    def _frozen_state(self, rows: np.ndarray) -> Tensor:
        """The frozen model's pooled state of ``rows`` [n, H], in evaluation batches."""
        size = self.eval_batch_size
        return torch.cat([self.pooled({}, rows[i : i + size], mixture=FROZEN) for i in range(0, len(rows), size)])

    def _head_inputs(self, params: Mapping[str, Tensor], rows: np.ndarray, mixture: Mixture) -> Tensor:
        """`head_features` of ``rows`` in evaluation batches (no dropout)."""
        size = self.eval_batch_size
        parts = [self.head_features(params, rows[i : i + size], mixture=mixture) for i in range(0, len(rows), size)]
        return torch.cat(parts) if parts else torch.zeros(0, 0)

    def head_features(
        self, params: Mapping[str, Tensor], rows: np.ndarray, train: bool = False, mixture: Mixture = SINGLE
    ) -> Tensor:
        """What the head reads: the pooled hidden state (standardized with ``head_input: standardized``), plus
        the side channel when there is one."""
        pooled = self.pooled(params, rows, train, mixture)
        if self.head_input == "standardized":
            shift, scale = self.standardizer()
            pooled = (pooled - shift) / scale
        return pooled if self.side_channel is None else self.side_channel.features(_head(params), pooled, rows)

    @torch.no_grad()
    def standardizer(self) -> tuple[Tensor, Tensor]:
        """The shift and scale [H] of ``head_input: standardized``: mean and std of the frozen model's pooled
        state over this client's training rows (a constant dimension keeps scale 1). Fixed for the run and
        computed from the client's own rows alone, so it is private, never sent and the same after a resume."""
        if self._standardizer is None:
            x = self._frozen_state(self.data.train).double()
            std = x.std(0, correction=0) if len(x) > 1 else torch.zeros(x.shape[1], dtype=x.dtype)
            self._standardizer = (x.mean(0).float(), torch.where(std > 1e-6, std, 1.0).float())
        return self._standardizer

    def pooled(
        self, params: Mapping[str, Tensor], rows: np.ndarray, train: bool = False, mixture: Mixture = SINGLE
    ) -> Tensor:
        """Mean-pooled final hidden states [len(rows), H] of the adapted model (eq. 5).

        Without adapter slots or tensors and without dropout the model is the frozen one, whose states depend on
        the rows alone: they are kept by batch and reused, bit for bit, when the same batch comes again — the
        frozen half of every evaluation's adapter contribution (`adapter_movement`), the head's ridge start and α."""
        binding = self._binding(params, rows, train, mixture)
        frozen = not (train or binding.params or binding.slots)
        key = np.asarray(rows, dtype=np.int64).tobytes() if frozen else None
        if key is not None and key in self._frozen:
            return self._frozen[key]
        prefix, mask = self.features.prefix_batch(self.lm, rows)
        out = self.lm.pooled_from_prefix(prefix, mask, binding)
        if key is not None:
            self._frozen[key] = out.detach()
        return out

    def loss(
        self, params: Mapping[str, Tensor], rows: np.ndarray, train: bool = False, mixture: Mixture = SINGLE
    ) -> Tensor:
        """Task loss of ``params`` on the given rows (differentiable w.r.t. every tensor in ``params``)."""
        task = self.task
        if isinstance(task, GenerationTask):
            return task.loss(*self._response_logits(task, params, rows, train, mixture))
        features = self.head_features(params, rows, train, mixture)
        return task.loss(_head(params), features, self.targets[torch.as_tensor(rows)])

    def _response_logits(
        self, task: GenerationTask, params: Mapping[str, Tensor], rows: np.ndarray, train: bool, mixture: Mixture
    ) -> tuple[list[Tensor], list[Tensor]]:
        """Logits at the positions that predict each row's response tokens, and those tokens."""
        prefix, mask = self.features.prefix_batch(self.lm, rows)
        hidden = self.lm.hidden_from_prefix(prefix, mask, self._binding(params, rows, train, mixture))
        logits, targets = [], []
        positions = task.response_positions(rows, mask.sum(1).numpy())
        for b, (start, stop) in enumerate(positions):
            logits.append(self.lm.logits(hidden[b, start:stop]).cpu())
            targets.append(self.features.tokens.row(int(rows[b]))[start + 1 : stop + 1])
        return logits, targets

    def fit(
        self,
        params: Mapping[str, Tensor],
        optimization: Optimization,
        steps: int,
        generator: torch.Generator,
        regularizer: Regularizer | None = None,
        grad_offset: Mapping[str, Tensor] | None = None,
        mixture: Mixture = SINGLE,
        schedule: Sequence[np.ndarray] | None = None,
    ) -> FitResult:
        """``steps`` AdamW steps on mini-batches of the training rows; tensors outside ``optimization.groups``
        stay fixed; with ``optimization.grad_clip`` the gradient norm of the trained tensors is clipped.

        ``regularizer(params)`` is added to the loss (FedProx, Ditto); ``grad_offset`` is added to the
        gradients before each step (SCAFFOLD's control-variate correction); ``schedule`` gives the
        mini-batches explicitly (FedWeave's bucket interleaving) instead of ``steps`` random ones.
        """
        groups = optimization.groups
        trainable = {k for g in groups for k in g.keys}
        unknown = trainable - params.keys()
        if unknown:
            raise ConfigError(f"client {self.client_id}: cannot train unknown tensors {sorted(unknown)[:3]}")
        given = params
        if self.trained is not None:
            self.trained.record(params, trainable)
        refit = self.head_update == "ridge" and HEAD_WEIGHT in trainable and not isinstance(self.task, GenerationTask)
        if refit:  # the linear head is solved, before the steps (for their gradients) and after (for the model)
            # ``step_alpha`` (beyond seed 000): the steps differentiate through a less-shrunk head, whose weight sets
            # the adapter gradients' direction (AdamW's steps do not scale with their size)
            params = {**params, **self._refit(params, mixture, self.step_alpha)[0]}
            groups = [g for g in (replace(g, keys=tuple(k for k in g.keys if k not in LINEAR_HEAD)) for g in groups)
                      if g.keys]  # fmt: skip
            trainable -= set(LINEAR_HEAD)
            grad_offset = {k: v for k, v in (grad_offset or {}).items() if k not in LINEAR_HEAD}
        live = {k: v.detach().clone().requires_grad_(k in trainable) for k, v in params.items()}
        optimizer = torch.optim.AdamW(
            [{"params": [live[k] for k in g.keys], "lr": g.lr, "weight_decay": g.weight_decay} for g in groups]
            or [{"params": [torch.zeros(0, requires_grad=True)]}]  # nothing left to step (see the loop)
        )
        ordered = list(dict.fromkeys(k for g in groups for k in g.keys))
        slot = self.memory.restore(optimizer, live, ordered) if self.memory is not None else None
        batches = (
            list(schedule)
            if schedule is not None
            else self.batches(steps, generator, optimization.batch_size, length_buckets=optimization.length_buckets)
        )
        losses: list[float] = []
        for rows in batches:
            loss = self.loss(live, rows, train=True, mixture=mixture)
            if not trainable:  # a refitted head was all there was to train: the losses are still measured
                losses.append(float(loss.detach()))
                continue
            total = loss if regularizer is None else loss + regularizer(live)
            optimizer.zero_grad(set_to_none=True)
            total.backward()
            for key, offset in (grad_offset or {}).items():
                grad = live[key].grad
                if grad is None:
                    raise ConfigError(f"client {self.client_id}: grad_offset names {key!r}, which gets no gradient")
                grad.add_(offset)
            if optimization.grad_clip is not None:
                # in the groups' key order: a set's order follows the hash seed, and so would the norm's sum
                torch.nn.utils.clip_grad_norm_([live[k] for k in ordered], optimization.grad_clip)
            optimizer.step()
            losses.append(float(loss.detach()))
        if self.memory is not None and slot is not None:
            self.memory.keep(optimizer, live, ordered, slot)
        out = {k: v.detach() for k, v in live.items()}
        inputs = None
        if refit:
            head, inputs = self._refit(out, mixture)
            out |= head
        if self.trained is not None:
            self.trained.follow(given, out)
        if self.train_loss == "fitted":
            reported = self.fitted_loss(out, mixture, inputs)
        else:
            reported = float(np.mean(losses)) if losses else float("nan")
        return FitResult(out, reported, len(batches), sum(map(len, batches)))

    def gradient(self, params: Mapping[str, Tensor], keys: Sequence[str], rows: np.ndarray) -> dict[str, Tensor]:
        """∇ of the task loss on ``rows`` w.r.t. the tensors ``keys`` of ``params`` (others held fixed)."""
        live = {k: v.detach().clone().requires_grad_(k in keys) for k, v in params.items()}
        grads = torch.autograd.grad(self.loss(live, rows), [live[k] for k in keys], allow_unused=True)
        return {k: torch.zeros_like(live[k]) if g is None else g for k, g in zip(keys, grads, strict=True)}

    @torch.no_grad()
    def predict(self, params: Mapping[str, Tensor], split: str, mixture: Mixture = SINGLE) -> np.ndarray:
        task = self.task
        if isinstance(task, GenerationTask):
            raise TypeError(f"client {self.client_id}: a text task has no head to predict with; use generate")
        rows = self.data.split(split)
        # length buckets: batches of similar length pad least; the predictions go back to row order
        order = np.argsort(self.features.tokens.lengths[rows], kind="stable")
        out = []
        for start in range(0, len(rows), self.eval_batch_size):
            batch = rows[order[start : start + self.eval_batch_size]]
            out.append(task.predict(_head(params), self.head_features(params, batch, mixture=mixture)))
        if not out:
            return np.zeros(0, dtype=np.float32)
        return torch.cat(out)[torch.as_tensor(np.argsort(order))].numpy()

    @torch.no_grad()
    def generate(self, params: Mapping[str, Tensor], rows: np.ndarray, mixture: Mixture = SINGLE) -> list[str]:
        """Greedy generations for text rows, batched per task (each task has its own token budget)."""
        task, tokenizer = self.task, self.lm.backbone.tokenizer
        if not isinstance(task, GenerationTask):
            raise TypeError(f"client {self.client_id}: only text tasks generate; {type(task).__name__} predicts")
        out: dict[int, str] = {}
        for name in np.unique(task.tasks[rows]):
            group = rows[task.tasks[rows] == name]
            budget = int(task.max_new_tokens.get(str(name), 64))
            for start in range(0, len(group), self.eval_batch_size):
                batch = group[start : start + self.eval_batch_size]
                prompts = [self.features.tokens.row(int(r))[: int(task.prompt_lengths[r])] for r in batch]
                new = self.lm.generate(prompts, self._binding(params, batch, False, mixture), budget)
                for r, t in zip(batch, new, strict=True):  # one sequence decodes to one str (typed str | list)
                    out[int(r)] = cast(str, tokenizer.decode(t, skip_special_tokens=True))
        return [out[int(r)] for r in rows]

    def evaluate(self, params: Mapping[str, Tensor], split: str, mixture: Mixture = SINGLE) -> dict[str, float]:
        rows = self.data.split(split)
        if len(rows) == 0:
            return {}
        task = self.task
        if isinstance(task, GenerationTask):
            return self._evaluate_text(task, params, rows, mixture)
        return self.metrics(self.predict(params, split, mixture), split)

    def evaluate_moved(
        self, params: Mapping[str, Tensor], split: str, mixture: Mixture = SINGLE
    ) -> tuple[dict[str, float], dict[str, float]]:
        """`evaluate` and `adapter_movement` of one model on ``split``, predicting its rows once."""
        if isinstance(self.task, GenerationTask) or len(self.data.split(split)) == 0:
            return self.evaluate(params, split, mixture), self.adapter_movement(params, split, mixture)
        adapted = self.predict(params, split, mixture)
        return self.metrics(adapted, split), self.adapter_movement(params, split, mixture, adapted)

    @torch.no_grad()
    def adapter_movement(
        self, params: Mapping[str, Tensor], split: str, mixture: Mixture = SINGLE, adapted: np.ndarray | None = None
    ) -> dict[str, float]:
        """How much the adapter matters (issue 42): ``delta_w_rel_mean`` / ``_max``, ‖ΔW‖/‖W‖ over the adapted
        matrices (`AdaptedLM.relative_update_norms`), and on ``split``'s rows ``contribution``: the
        std of the change of the predictions when every adapter tensor is removed (the frozen model, same
        head) over the std of the predictions, or for classes the fraction of rows whose class changes; and
        ``head_norm``, ‖head weight‖_F: how far the prediction follows the pooled state at all — every gradient
        an adapter gets passes through this weight, so a head that validation shrank to its intercept leaves
        the adapters nothing to learn from; ``head_alpha``, the ridge penalty validation chose for this client's
        head (`ridge_alpha`; the grid's largest, 1e6, is a head at its intercept) where its head is or starts as a
        ridge fit at the α chosen once (with ``alpha_choice: every_fit`` the α is a refit's, not a function of
        ``params``, and a runtime that evaluates a client it never fitted could not report it). ``adapted``: the
        model's predictions of ``split`` when the caller already has them."""
        norms = self.lm.relative_update_norms({k: v for k, v in params.items() if not k.startswith(HEAD_PREFIX)})
        out = {"delta_w_rel_mean": float(np.mean(norms)), "delta_w_rel_max": float(np.max(norms))} if norms else {}
        if HEAD_WEIGHT in params:
            out["head_norm"] = float(params[HEAD_WEIGHT].float().norm())
        ridge_head = self.head_start == "ridge" or self.head_update == "ridge"
        if ridge_head and self.alpha_choice == "once" and not isinstance(self.task, GenerationTask):
            out["head_alpha"] = self.ridge_alpha()
        if isinstance(self.task, GenerationTask) or len(self.data.split(split)) < 2:
            return out
        adapted = self.predict(params, split, mixture) if adapted is None else adapted
        frozen = self.predict(_head(params), split, FROZEN)
        if isinstance(self.task, ClassificationTask):
            return out | {"contribution": float(np.mean(adapted != frozen))}
        spread = float(np.std(adapted))
        return out | {"contribution": float(np.std(adapted - frozen)) / spread if spread > 0 else 0.0}

    def metrics(self, predictions: np.ndarray, split: str) -> dict[str, float]:
        """The task's metrics of ``predictions`` (`predict`'s output: this client's ``split`` rows in order)."""
        task = self.task
        if isinstance(task, GenerationTask):
            raise TypeError(f"client {self.client_id}: a text task is scored on generations; use evaluate")
        rows = self.data.split(split)
        return task.evaluate(predictions, self.eval_targets[rows].numpy(), self.dates[rows])

    @torch.no_grad()
    def _evaluate_text(
        self, task: GenerationTask, params: Mapping[str, Tensor], rows: np.ndarray, mixture: Mixture
    ) -> dict[str, float]:
        """Teacher-forced loss per row and task metrics of greedy generations."""
        losses = []
        for start in range(0, len(rows), self.eval_batch_size):
            batch = rows[start : start + self.eval_batch_size]
            losses.append(task.row_losses(*self._response_logits(task, params, batch, False, mixture)))
        return task.evaluate_text(self.generate(params, rows, mixture), rows, np.concatenate(losses))

    def _binding(self, params: Mapping[str, Tensor], rows: np.ndarray, train: bool, mixture: Mixture) -> Binding:
        adapters = {k: v for k, v in params.items() if not k.startswith(HEAD_PREFIX)}
        weights = None if mixture.weights is None else mixture.weights(self, params, rows)
        return Binding(adapters, slots=mixture.slots, weights=weights, top_k=mixture.top_k, train=train)

    def batches(
        self, steps: int, generator: torch.Generator, batch_size: int, rows: np.ndarray | None = None,
        length_buckets: bool = False,
    ) -> list[np.ndarray]:  # fmt: skip
        """``steps`` mini-batches of ``batch_size`` drawn epoch by epoch from a seeded permutation of ``rows``
        (default: all training rows); with ``length_buckets`` each epoch is regrouped by `length_bucketed`."""
        rows = self.data.train if rows is None else rows
        out: list[np.ndarray] = []
        order = np.zeros(0, dtype=np.int64)
        while len(out) < steps:
            if len(order) < min(batch_size, len(rows)):
                order = rows[torch.randperm(len(rows), generator=generator).numpy()]
                if length_buckets:
                    order = length_bucketed(order, self.features.tokens.lengths, batch_size, generator)
            out.append(order[:batch_size])
            order = order[batch_size:]
        return out


def _head(params: Mapping[str, Tensor]) -> dict[str, Tensor]:
    return {k: v for k, v in params.items() if k.startswith(HEAD_PREFIX)}


BUCKET_GROUP = 8  # batches sorted together by length (HF's megabatch, smaller: a client holds few rows)


def length_bucketed(order: np.ndarray, lengths: np.ndarray, batch_size: int, generator: torch.Generator) -> np.ndarray:
    """An epoch's row ``order`` regrouped (HF's group-by-length): within each run of `BUCKET_GROUP` batches
    the rows are sorted by token length, cut into batches and the batches put in a seeded order. Batches
    pad less; every row is still seen once an epoch."""
    span = batch_size * BUCKET_GROUP
    pieces = []
    for start in range(0, len(order), span):
        group = order[start : start + span]
        group = group[np.argsort(lengths[group], kind="stable")]
        chunks = [group[i : i + batch_size] for i in range(0, len(group), batch_size)]
        pieces += [chunks[i] for i in torch.randperm(len(chunks), generator=generator).tolist()]
    return np.concatenate(pieces)
