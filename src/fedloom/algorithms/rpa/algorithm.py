"""Routed prototype adapters (seed 000, §3, Algorithm 1), settled by specs/rpa.md.

Adapter objects are flat vectors over the default LoRA slot (every A and B factor, fixed order).

Client i in round k (Algorithm 1, lines 5–10):
  1. routed adapter with the old route  A_i = Σ_m π_m A_m                           (eq. 11)
  2. calibration gradient g at A_i on a calibration batch, normalized, projected  (eqs. 12, 8)
  3. scores s_m = cos(P g, v_m)                                                    (eq. 13)
  4. route update by KL mirror descent π⁺ ∝ π exp(η_π s)                          (eq. 14)
  5. E AdamW steps on a residual R around Â_i = Σ_m π⁺_m A_m, with the private head  (eq. 17)
  6. upload (R, π⁺, n) only
Server (lines 12–13): Δ_{i,m} = π_m/‖π‖² R (eq. 19), Δ̄_m = Σ n_i Δ_{i,m} / N (eq. 22),
A_m ← A_m + β Δ̄_m (eq. 23), U_m ← (1−λ) U_m + λ Δ̄_m (eq. 9), v_m = P U_m / (‖P U_m‖ + ξ) (eq. 10).

Symmetry breaking (the paper is silent): prototype 0 starts at the shared LoRA init, prototype m > 0
from its own seed (B = 0 everywhere, so every prototype starts as the frozen model), and the
accumulators U_m^0 are independent Gaussian directions, so the initial signatures differ.

Ablations are switches (seed 000, Tables 6 and 14): ``route_update`` (mirror / softmax / fixed),
``projection`` (rademacher / gaussian / srht / full / learned), ``decomposition`` (least_norm / naive),
``signature_refresh``, ``local_residual``, ``eval_residual``, ``symmetric_init``, M and the
calibration batch size. ``eval_residual`` defaults to drop: the pool already absorbed the residual
(β = 1), keep adds it a second time; on the synthetic demo the two tie on validation (IC 0.1153 vs
0.1150). "Without local residual" is defined here as R ≡ 0: local steps train the
head only, nothing updates the pool, and personalization comes from the route and the head alone.

Sign of the score (a documented deviation, ``score_direction``). Signatures summarize prototype
*update* directions (residuals, which descend the clients' losses), while eq. 13 read literally
scores them against the *gradient*, so mirror descent would favour prototypes whose recent updates
point up the client's loss. fedloom scores against the descent direction −g by default; the literal
reading is ``score_direction="gradient"``. On planted client groups (tests/unit/algorithms/rpa) the
default separates routes by group (≈0.95/0.05 after 30 rounds at η_π = 0.1), the literal sign
barely moves them (≈0.52/0.48).

Beyond seed 000 (``score``, ``score_scale``, ``prototype_b_std``; the seed's method is
``score="signature"``, ``score_scale="cosine"``, ``prototype_b_std=0``). With the seed's routing,
uniform routes are a fixed point: eq. 19 then gives every prototype the same piece, the EMA
signatures converge ((1 − λ)^k), the score spread and so the log-odds budget η (max s − min s)
(logged per client as ``route_budget``) decay, and routes stay uniform — RPA behaves as FedAvg
(issue 17; measured on SmolLM2 and pinned by the noisy planted-group tests). ``score="prototype"``
scores s_m = cos(−g, A_m − A_i): a normalized mirror-descent step on the routing part of eq. 24,
whose inputs never decay and which needs no signature download (eq. 28 without M·q·b);
``score="loss"`` scores each prototype by its own calibration loss (IFCA-style, M forward passes);
``score_scale="standardized"`` gives the scores unit spread across prototypes so η_π sets the
log-odds step directly; ``prototype_b_std > 0`` makes the prototypes different functions from round 0;
``warm_start="residuals"`` sets them, in the first aggregating round, to the mean trained adapters of a
clustering of the clients' residual sketches P·R (`warm_start.py`; individual residuals, so not summable);
with ``warm_start_rounds`` W > 1 the server sums each client's sketches over the first W rounds before it
clusters (routes are held until then: there is nothing to route between), which averages away the noise
of short local runs — one AdamW step is lr·sign(g), a sketch of a single 16-row batch's signs.
``prototype_momentum`` μ gives the pool a server momentum, V ← μV + Δ̄, A ← A + βV (FedAvgM's rule per
prototype): on the routing testbed plain averaging of one-step updates barely trains any shared model.
``routing="improved"`` (config) selects the measured combination; ``routing="paper"`` is seed 000.

Learned projection (``projection="learned"``; specs/rpa.md allows a learned low-rank map instead of
a trainable q×d one). Routing happens in ``W P``: P is the public Rademacher projection and W
[r, q] (r = ``learned_rank``) has orthonormal rows, fit by the server as the top principal
directions of the projected prototype updates P Δ̄_m of the last ``learned_history`` rounds
(starting from P U⁰), and sent with the signatures (r·q more values per download). Clients then
compare their gradient with the signatures only along the directions in which the prototypes
actually moved, with the updates' common component removed (the fit is centred).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from fedloom.algorithms.base import (
    NUM_EXAMPLES,
    Algorithm,
    Audit,
    ClientModel,
    ClientUpdate,
    Heatmap,
    LocalContext,
    Record,
    RunReport,
    UploadSpec,
)
from fedloom.algorithms.config import LocalTrainingConfig, RPAConfig
from fedloom.algorithms.lora_math import fresh_lora, module_shapes
from fedloom.algorithms.rpa import reporting
from fedloom.algorithms.rpa.decomposition import (
    aggregate_pieces,
    least_norm_pieces,
    naive_pieces,
    refresh_accumulator,
)
from fedloom.algorithms.rpa.projection import fit_subspace, project
from fedloom.algorithms.rpa.routing import (
    alignment_scores,
    collapsed,
    log_odds_budget,
    mirror_descent,
    normalize,
    prototype_scores,
    route_entropy,
    softmax_route,
    standardize,
)
from fedloom.algorithms.rpa.warm_start import cluster_prototypes, sketch_clusters
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.lora import lora_a_key, lora_b_key
from fedloom.metrics.clustering import purity_score
from fedloom.seeding import derive_seed, generator
from fedloom.tasks.learner import HEAD_PREFIX, Learner

PROTOTYPES, ACCUMULATORS, SIGNATURES = "prototypes", "accumulators", "signatures"
RESIDUAL, ROUTE, LAST_RESIDUAL, PIECES = "residual", "route", "last_residual", "pieces"
WARMED = "warmed"  # 1 once the warm start has set the prototypes (``warm_start="residuals"``)
WARM_ROUNDS, SKETCH = "warm_rounds", "sketch/"  # rounds summed so far; a client's summed sketch Σ_k P·R_i^k
VELOCITY = "velocity"  # the prototypes' server momentum (``prototype_momentum`` > 0)
PROJECTION, HISTORY = "projection", "projection_history"  # the learned projection's W and its data
SCORES, SCORE_MEAN, SCORE_ROUNDS = "scores", "score_mean", "score_rounds"  # population-centred scores


class RPA(Algorithm):
    name = "rpa"

    def __init__(self, local: LocalTrainingConfig, cfg: RPAConfig, seed: int, layout: TensorLayout) -> None:
        """``seed`` fixes the public projection and prototype inits; ``layout`` orders the adapter vector."""
        super().__init__(local)
        self.cfg = cfg
        self.seed = seed
        self.layout = layout
        self.summable = cfg.warm_start == "none"  # the warm start clusters individual residuals

    def _project(self, flat: Tensor) -> Tensor:
        return project(flat, derive_seed(self.seed, "rpa-projection"), self.cfg.projection_dim, self.cfg.projection)

    def _projected(self, rows: Tensor) -> Tensor:
        return torch.stack([self._project(u) for u in rows])  # eq. 8, row by row

    def _signatures(self, projected: Tensor, w: Tensor | None = None) -> Tensor:
        """v_m from the projected accumulators P U_m (eq. 10); W P U_m for the learned projection."""
        if w is not None:
            projected = projected @ w.T
        return torch.stack([normalize(p) for p in projected])

    @property
    def learned(self) -> bool:
        return self.cfg.projection == "learned"

    def _fit(self, history: Tensor) -> dict[str, Tensor]:
        """The learned projection's state: W fit on the projected-update history (kept with it)."""
        return {HISTORY: history, PROJECTION: fit_subspace(history, self.cfg.learned_rank)}

    # server half
    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        layout = self.layout
        shapes = module_shapes(shared_init)
        rank = shared_init[lora_a_key(next(iter(shapes)))].shape[0]
        protos = [layout.flatten(shared_init)]
        for m in range(1, self.cfg.prototypes):
            if self.cfg.symmetric_init:
                protos.append(protos[0].clone())
            else:
                g = torch.Generator().manual_seed(derive_seed(self.seed, "rpa-prototype", m))
                fresh = fresh_lora(shapes, rank, g)
                if self.cfg.prototype_b_std > 0:  # a different function from round 0
                    fresh |= {lora_b_key(p): torch.randn(s[0], rank, generator=g) * self.cfg.prototype_b_std
                              for p, s in shapes.items()}  # fmt: skip
                protos.append(layout.flatten(fresh))
        prototypes = torch.stack(protos)
        if self.cfg.symmetric_init:
            accumulators = torch.zeros_like(prototypes)
        else:
            g = torch.Generator().manual_seed(derive_seed(self.seed, "rpa-accumulators"))
            accumulators = torch.randn(prototypes.shape, generator=g) * 1e-3
        projected = self._projected(accumulators)
        learned = self._fit(projected) if self.learned else {}
        signatures = self._signatures(projected, learned.get(PROJECTION))
        tensors = {PROTOTYPES: prototypes, ACCUMULATORS: accumulators, SIGNATURES: signatures, **learned}
        if self.cfg.prototype_momentum:
            tensors[VELOCITY] = torch.zeros_like(prototypes)
        scalars = {WARMED: 0, WARM_ROUNDS: 0} if self.warm else {}
        if self.cfg.centred:
            tensors[SCORE_MEAN] = torch.zeros(self.cfg.prototypes)
            scalars[SCORE_ROUNDS] = 0
        return Record(tensors, scalars)

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        sent = {PROTOTYPES: server.tensors[PROTOTYPES]}
        if self.cfg.score == "signature":  # the other scores read the prototypes alone (eq. 28: no M·q)
            sent[SIGNATURES] = server.tensors[SIGNATURES]
            if self.learned:
                sent[PROJECTION] = server.tensors[PROJECTION]
        scalars = {WARMED: server.scalars[WARMED]} if self.warm else {}  # routes stay put until warmed
        if self.cfg.centred:
            sent[SCORE_MEAN] = server.tensors[SCORE_MEAN]
            scalars[SCORE_ROUNDS] = server.scalars[SCORE_ROUNDS]
        return {c: Record(sent, scalars) for c in clients}

    def upload_spec(self, download: Record, client: str) -> UploadSpec:
        m, d = download.tensors[PROTOTYPES].shape
        scores = ((SCORES, (m,)),) if self.cfg.centred else ()
        return UploadSpec(TensorLayout(((RESIDUAL, (d,)), (ROUTE, (m,)), *scores)))

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        if not uploads:
            return server
        ups = list(uploads.values())
        weights = [float(u.scalars[NUM_EXAMPLES]) for u in ups]
        scores = aggregate_pieces([u.tensors[SCORES] for u in ups], weights) if self.cfg.centred else None
        pieces = [self._pieces(u) for u in ups]  # eq. 19 per client
        if self.warm and not server.scalars[WARMED]:  # beyond seed 000: prototypes from clustered residuals
            return self._warm_up(server, uploads, weights, aggregate_pieces(pieces, weights), scores)
        return self._step(server, aggregate_pieces(pieces, weights), scores)

    @property
    def warm(self) -> bool:
        return self.cfg.warm_start == "residuals"

    def _summed_sketches(self, server: Record, uploads: Mapping[str, Record]) -> dict[str, Tensor]:
        """Each participant's residual sketch P·R summed over the warm-up rounds so far, this one included."""
        return {
            c: server.tensors.get(SKETCH + c, 0.0) + self._project(u.tensors[RESIDUAL]) for c, u in uploads.items()
        }

    def _warm_clusters(self, server: Record, uploads: Mapping[str, Record], weights: Sequence[float]) -> np.ndarray:
        sketches = torch.stack(list(self._summed_sketches(server, uploads).values()))
        return sketch_clusters(
            sketches, weights, self.cfg.prototypes, derive_seed(self.seed, "rpa-warm-start") % 2**32
        )

    def _warm_up(
        self, server: Record, uploads: Mapping[str, Record], weights: Sequence[float], mean: Tensor,
        scores: Tensor | None,
    ) -> Record:  # fmt: skip
        """A warm-up round: sum the sketches; in the last one (``warm_start_rounds``) cluster the sums and
        set each prototype to the routed adapter plus β times its cluster's mean residual — the step that
        cluster alone would take. The jump, as Δ̄, refreshes the signatures as any other round's would."""
        sketches = {SKETCH + c: s for c, s in self._summed_sketches(server, uploads).items()}
        rounds = int(server.scalars[WARM_ROUNDS]) + 1
        if rounds < self.cfg.warm_start_rounds:  # routes are held: every prototype takes the common step
            stepped = self._step(server, mean, scores)
            return Record({**stepped.tensors, **sketches}, {**stepped.scalars, WARM_ROUNDS: rounds})
        ups = list(uploads.values())
        prototypes = server.tensors[PROTOTYPES]
        trained = torch.stack(
            [route_mix(u.tensors[ROUTE], prototypes) + self.cfg.server_lr * u.tensors[RESIDUAL] for u in ups]
        )
        labels = self._warm_clusters(server, uploads, weights)
        target = cluster_prototypes(trained, weights, labels, self.cfg.prototypes)
        stepped = self._step(server, (target - prototypes) / self.cfg.server_lr, scores, jump=True)
        kept = {k: v for k, v in stepped.tensors.items() if not k.startswith(SKETCH)}  # no longer needed
        return Record(kept, {**stepped.scalars, WARMED: 1, WARM_ROUNDS: rounds})

    # Secure aggregation (specs/rpa.md): the client decomposes its own residual and uploads the M
    # pieces (M·|R| instead of |R| + M), so the server learns only their sample-weighted mean (eq. 22)
    # — and no route. Pieces are small (a few local steps' worth), so they travel scaled by a public
    # constant that puts them in the quantizer's range (±8 by default covers pieces up to ±0.25).
    SECURE_SCALE = 32.0

    def secure_upload(self, upload: Record) -> Record:
        pieces = self.SECURE_SCALE * self._pieces(upload)
        scores = {SCORES: upload.tensors[SCORES]} if self.cfg.centred else {}  # cosines: already in range
        return Record({PIECES: pieces, **scores}, {NUM_EXAMPLES: upload.scalars[NUM_EXAMPLES]})

    def aggregate_mean(self, server: Record, mean: Record, round: int) -> Record:
        return self._step(server, mean.tensors[PIECES] / self.SECURE_SCALE, mean.tensors.get(SCORES))

    def _pieces(self, upload: Record) -> Tensor:
        split = least_norm_pieces if self.cfg.decomposition == "least_norm" else naive_pieces
        return split(upload.tensors[RESIDUAL], upload.tensors[ROUTE])

    def _step(self, server: Record, mean: Tensor, scores: Tensor | None = None, jump: bool = False) -> Record:
        """Prototype step and signature refresh from the aggregated pieces Δ̄ [M, d]; with centred
        scores, the participants' sample-weighted mean score of each prototype replaces the old one.
        With ``prototype_momentum`` μ the step is β V, V ← μ V + Δ̄; a ``jump`` (the warm start) moves
        the prototypes by β Δ̄ and leaves V alone."""
        step, momentum = mean, {}
        if self.cfg.prototype_momentum:
            velocity = server.tensors[VELOCITY]
            if not jump:
                velocity = step = self.cfg.prototype_momentum * velocity + mean
            momentum = {VELOCITY: velocity}
        prototypes = server.tensors[PROTOTYPES] + self.cfg.server_lr * step  # eq. 23
        accumulators, signatures = server.tensors[ACCUMULATORS], server.tensors[SIGNATURES]
        learned = {k: server.tensors[k] for k in (HISTORY, PROJECTION) if k in server.tensors}
        if self.learned:  # W follows the directions the prototypes actually moved in
            moved = self._projected(mean)
            learned = self._fit(torch.cat([learned[HISTORY], moved])[-self.cfg.learned_history :])
        if self.cfg.signature_refresh:
            accumulators = refresh_accumulator(accumulators, mean, self.cfg.signature_momentum)  # eq. 9
        if self.cfg.signature_refresh or self.learned:
            signatures = self._signatures(self._projected(accumulators), learned.get(PROJECTION))
        carried = {k: v for k, v in server.tensors.items() if k.startswith(SKETCH)}
        tensors = {PROTOTYPES: prototypes, ACCUMULATORS: accumulators, SIGNATURES: signatures, **learned,
                   **momentum, **carried}  # fmt: skip
        scalars = dict(server.scalars)
        if self.cfg.centred:
            assert scores is not None
            tensors[SCORE_MEAN] = scores
            scalars[SCORE_ROUNDS] = int(server.scalars[SCORE_ROUNDS]) + 1
        return Record(tensors, scalars)

    def diagnostics(self, before: Record, uploads: Mapping[str, Record], after: Record) -> dict[str, Any]:
        """Per-round routing diagnostics of seed 000 §4.4 from the routes the server received."""
        if not uploads:
            return {}
        routes = torch.stack([u.tensors[ROUTE] for u in uploads.values()])
        load = routes.mean(0)
        update = (after.tensors[PROTOTYPES] - before.tensors[PROTOTYPES]).norm(dim=1)
        warm = {}
        if self.warm and after.scalars[WARMED] and not before.scalars[WARMED]:  # the warm start's clusters
            weights = [float(u.scalars[NUM_EXAMPLES]) for u in uploads.values()]
            labels = self._warm_clusters(before, uploads, weights)
            warm = {reporting.WARM_START_CLUSTERS: dict(zip(uploads, labels.tolist(), strict=True))}
        return {
            **warm,
            reporting.ROUTE_ENTROPY: float(np.mean([route_entropy(r) for r in routes])),
            reporting.COLLAPSE_RATE: float(np.mean([collapsed(r) for r in routes])),
            reporting.PROTOTYPE_LOAD: load.tolist(),
            reporting.LOAD_IMBALANCE: float(load.max() - load.min()),
            reporting.PROTOTYPE_UPDATE_NORM: update.tolist(),
            reporting.ROUTES: {cid: u.tensors[ROUTE].tolist() for cid, u in uploads.items()},  # heatmaps per round
        }

    def final_report(self, server: Record, clients: Mapping[str, Record], audit: Audit) -> RunReport:
        """The route matrix (clients × prototypes) with each client's group, the final prototype norms,
        the route heatmap (rows sorted by dominant prototype) and, where the data has hidden client
        labels, the purity of the clients' dominant prototypes against them."""
        routes = {c: s.tensors[ROUTE].tolist() for c, s in clients.items()}
        order = sorted(routes, key=lambda c: (dominant_prototype(routes[c]), -max(routes[c]), c))
        groups = audit.client_groups
        labels = [f"{c} ({groups[c]})" if groups.get(c, c) != c else c for c in order]
        heatmap = Heatmap([routes[c] for c in order], labels, "P", "prototype", "route weight π",
                          "final routes, rows by dominant prototype")  # fmt: skip
        norms = server.tensors[PROTOTYPES].norm(dim=1).tolist()
        files = {reporting.ROUTES: routes, "group": dict(groups), "prototype_norms": norms}
        summary = {}
        if audit.client_labels:  # hidden client structure (planted groups): do the routes find it?
            dominant = np.array([dominant_prototype(routes[c]) for c in routes])
            purity = {name: purity_score(dominant, np.array([truth[c] for c in routes]))
                      for name, truth in audit.client_labels.items()}  # fmt: skip
            files |= {"labels": {k: dict(v) for k, v in audit.client_labels.items()}, "purity": purity}
            summary["route_purity"] = purity
        return RunReport(files={reporting.ROUTES: files}, heatmaps={reporting.ROUTES: heatmap}, summary=summary)

    # client half
    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        m, d = self.cfg.prototypes, self.layout.numel
        return Record(
            {ROUTE: torch.full((m,), 1.0 / m), LAST_RESIDUAL: torch.zeros(d), **learner.init_head(generator)}
        )

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        learner, gen = ctx.learner, ctx.generator
        prototypes, layout = download.tensors[PROTOTYPES], self.layout
        head = {k: v for k, v in state.tensors.items() if k.startswith(HEAD_PREFIX)}
        route = state.tensors[ROUTE]

        new_route, scores = route, torch.zeros_like(route)
        raw = scores
        seconds = {"calibration_seconds": 0.0, "routing_seconds": 0.0}
        held = self.warm and not download.scalars[WARMED]  # warm-up rounds: no route to choose from yet
        if self.cfg.route_update != "fixed" and self.cfg.prototypes > 1 and not held:
            # the calibration batch has its own stream, so every routing switch (fixed routes included)
            # trains on the same mini-batches and the switches compare paired
            draw = generator(self.seed, "rpa-calibration", ctx.round, learner.client_id)
            pick = torch.randperm(learner.num_train, generator=draw)[: self.cfg.calibration_batch].numpy()
            raw = scores = self._scores(download, route, head, learner, learner.data.train[pick], seconds)
            started = time.perf_counter()
            if self.cfg.centred:  # only the client's preference relative to the population moves its route
                scores = scores - download.tensors[SCORE_MEAN].to(scores.dtype)
            if self.cfg.score_scale == "standardized":
                scores = standardize(scores)
            step = self.cfg.route_step
            mirror = self.cfg.route_update == "mirror"
            if self.cfg.centred and download.scalars[SCORE_ROUNDS] == 0:
                scores = torch.zeros_like(scores)  # no population mean yet: this round's scores only build it
            new_route = mirror_descent(route, scores, step) if mirror else softmax_route(scores, step)
            seconds["routing_seconds"] += time.perf_counter() - started  # projection + scores + update

        base = route_mix(new_route, prototypes)  # Â = Σ π⁺ A_m
        params = {**layout.unflatten(base.clone()), **head}
        trainable = list(params) if self.cfg.local_residual else list(head)
        started = time.perf_counter()
        fit = learner.fit(params, self.optimization(trainable), self.local.steps, gen)
        seconds["residual_seconds"] = time.perf_counter() - started
        residual = layout.flatten({k: fit.params[k] for k in layout.keys}) - base  # R = θ_E − Â
        new_head = {k: fit.params[k] for k in head}
        return ClientUpdate(
            upload=Record(
                {RESIDUAL: residual, ROUTE: new_route, **({SCORES: raw.float()} if self.cfg.centred else {})},
                {NUM_EXAMPLES: learner.num_train},
            ),
            state=Record({ROUTE: new_route, LAST_RESIDUAL: residual, **new_head}),
            metrics={
                "train_loss": fit.loss,
                reporting.ROUTE_ENTROPY: route_entropy(new_route),
                reporting.ROUTE_CHANGE: float((new_route - route).abs().sum()),
                "route_budget": log_odds_budget(scores, self.cfg.route_step),
                "residual_strength": float(residual.norm() / (base.norm() + 1e-12)),
                **seconds,
                **{f"score_{m}": float(s) for m, s in enumerate(scores)},
            },
        )

    def _scores(
        self, download: Record, route: Tensor, head: Mapping[str, Tensor], learner: Learner, rows: np.ndarray,
        seconds: dict[str, float],
    ) -> Tensor:  # fmt: skip
        """The client's score of each prototype on its calibration batch ``rows`` (``cfg.score``)."""
        prototypes, layout = download.tensors[PROTOTYPES], self.layout
        started = time.perf_counter()
        if self.cfg.score == "loss":  # beyond seed 000: the lower a prototype's own loss, the higher its score
            with torch.no_grad():
                losses = [learner.loss({**layout.unflatten(p), **head}, rows) for p in prototypes]
            seconds["calibration_seconds"] = time.perf_counter() - started
            return -torch.stack(losses).float()
        routed = route_mix(route, prototypes)  # eq. 11
        grads = learner.gradient({**layout.unflatten(routed), **head}, list(layout.keys), rows)
        seconds["calibration_seconds"] = time.perf_counter() - started
        started = time.perf_counter()
        g = normalize(layout.flatten(grads))  # eq. 12
        if self.cfg.score_direction == "descent":
            g = -g
        if self.cfg.score == "prototype":  # beyond seed 000: against the prototypes themselves
            scores = prototype_scores(g, prototypes, routed)
        else:
            g_tilde = self._project(g)  # eq. 8
            if self.learned:
                g_tilde = download.tensors[PROJECTION] @ g_tilde
            scores = alignment_scores(g_tilde, download.tensors[SIGNATURES])  # eq. 13
        seconds["routing_seconds"] = time.perf_counter() - started
        return scores

    def client_model(self, download: Record, state: Record) -> ClientModel:
        """Σ_m π_m A_m with the client's route and head, plus its last residual when ``eval_residual=keep``."""
        flat = route_mix(state.tensors[ROUTE], download.tensors[PROTOTYPES])
        if self.cfg.eval_residual == "keep":
            flat = flat + state.tensors[LAST_RESIDUAL]
        head = {k: v for k, v in state.tensors.items() if k.startswith(HEAD_PREFIX)}
        return ClientModel({**self.layout.unflatten(flat), **head})


def dominant_prototype(route: Sequence[float], tolerance: float = 1e-6) -> int:
    """The prototype with the most route mass, the lowest index among near-ties: duplicate prototypes
    (identical models get identical mass) differ only by float noise, which must not split a group."""
    weights = np.asarray(route)
    return int(np.flatnonzero(weights >= weights.max() - tolerance)[0])


def route_mix(route: Tensor, prototypes: Tensor) -> Tensor:
    """Σ_m π_m A_m  (eq. 4) for prototypes [M, d]."""
    return route.to(prototypes.dtype) @ prototypes
