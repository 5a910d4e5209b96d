"""FedBiOT (algorithms.md §2.9): clients tune the adapter on a compressed emulator the server aligns.

Bi-level, one round::

    client (upper):  adapter layers ≥ L0 on top of the emulator's output,
                     L_cli = task loss + prox · Σ ‖θ − θ_recv‖²          (live parameters, not the
                                                                        released code's detached ones)
    server:          θ ← sample-weighted mean of the adapters (FedAvg)
    server (lower):  emulator LoRA ← align_steps of SGD on gap_l2 (+ kd_weight · KL) over public text

The emulator is layers ``0..L0-1`` with ``drop_ratio`` of them dropped uniformly, plus its own
LoRA; it is pre-aligned before round 1 and re-aligned before every broadcast. Clients download the
adapter and the emulator's LoRA and never run the full model; evaluation plugs the trained adapter
back into the full model (FederatedScope's ``eval_type='full'``, the paper's emphasis) with the
client's private head.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from fedloom.algorithms.base import ClientModel, ClientUpdate, LocalContext, Record, UploadSpec
from fedloom.algorithms.config import FedBiOTConfig, LocalTrainingConfig
from fedloom.algorithms.fedavg import FedAvg
from fedloom.backbone.emulator import Aligner, emulator_of
from fedloom.backbone.layout import TensorLayout
from fedloom.errors import ConfigError
from fedloom.seeding import derive_seed

EMULATOR = "emulator/"
ALIGN_LOSS = "align_loss"


class FedBiOT(FedAvg):
    name = "fedbiot"  # summable: the mean of the adapters is all the server step reads from clients

    def __init__(self, local: LocalTrainingConfig, cfg: FedBiOTConfig, seed: int, aligner: Aligner | None) -> None:
        """``aligner``: the server's full model and public text; None on clients, which never align."""
        super().__init__(local, prox_mu=2.0 * cfg.prox)  # FedAvg's prox is μ/2 ‖·‖²; FedBiOT's has no ½
        self.cfg, self.seed, self.aligner = cfg, seed, aligner

    # server half
    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        emulator = self._server_aligner().emulator.init(self._generator("init"))
        return self._align(Record(dict(shared_init)), emulator, self.cfg.pre_align_steps, "pre")

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        adapter, emulator = _split(server.tensors)
        new = super().aggregate(Record(adapter, server.scalars), uploads, round)
        return self._align(new, emulator, self.cfg.align_steps if uploads else 0, round)

    def upload_spec(self, download: Record, client: str) -> UploadSpec:
        return UploadSpec(TensorLayout.of(_split(download.tensors)[0]))

    def diagnostics(self, before: Record, uploads: Mapping[str, Record], after: Record) -> dict[str, float]:
        return {ALIGN_LOSS: float(after.scalars[ALIGN_LOSS])}

    def _align(self, server: Record, emulator: Mapping[str, Tensor], steps: int, tag: object) -> Record:
        """``emulator``: its LoRA under the emulator's own keys; stored back under ``EMULATOR``."""
        aligned, loss = self._server_aligner()(emulator, server.tensors, steps, self._generator("align", tag))
        tensors = {**server.tensors, **{EMULATOR + k: v for k, v in aligned.items()}}
        return Record(tensors, {**server.scalars, ALIGN_LOSS: loss if steps else server.scalars.get(ALIGN_LOSS, 0.0)})

    def _server_aligner(self) -> Aligner:
        if self.aligner is None:
            raise ConfigError("fedbiot's server aligns the emulator with the full model: build it with the backbone")
        return self.aligner

    def _generator(self, *tags: object) -> torch.Generator:
        return torch.Generator().manual_seed(derive_seed(self.seed, "fedbiot", *tags))

    # client half
    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        adapter, lora = _split(download.tensors)
        em = emulator_of(ctx.learner.lm, self.cfg.drop_ratio)

        @torch.no_grad()
        def source(ids: Tensor, mask: Tensor) -> Tensor:  # the emulator stands in below L0
            return em.prefix(ids, mask, lora)

        emulated = LocalContext(ctx.learner.emulated(source), ctx.round, ctx.generator)
        return super().local_update(Record(adapter), state, emulated)

    def client_model(self, download: Record, state: Record) -> ClientModel:
        return ClientModel({**_split(download.tensors)[0], **state.tensors})


def _split(tensors: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """(adapter tensors, emulator LoRA under its own keys) of a server state or download."""
    adapter = {k: v for k, v in tensors.items() if not k.startswith(EMULATOR)}
    return adapter, {k.removeprefix(EMULATOR): v for k, v in tensors.items() if k.startswith(EMULATOR)}
