"""FedRep (Collins et al. 2021; algorithms.md §1.7): shared representation, private heads, trained
in alternation — first the head with the adapters fixed, then the adapters with the head fixed.

fedloom mapping: the representation φ is the LoRA adapter, the head is the private task head. The
round's step budget is split between the phases (``head_fraction``, at least one step each), each
phase with a fresh optimizer.
"""

from __future__ import annotations

from fedloom.algorithms.base import NUM_EXAMPLES, ClientUpdate, LocalContext, Record
from fedloom.algorithms.config import FedRepConfig, LocalTrainingConfig
from fedloom.algorithms.fedavg import FedAvg
from fedloom.tasks.learner import HEAD_PREFIX


class FedRep(FedAvg):
    name = "fedrep"

    def __init__(self, local: LocalTrainingConfig, cfg: FedRepConfig) -> None:
        super().__init__(local)
        self.cfg = cfg

    def phase_steps(self) -> tuple[int, int]:
        """(head steps, body steps) of one round."""
        total = self.local.steps
        head = min(total - 1, max(1, round(self.cfg.head_fraction * total))) if total > 1 else 1
        return head, max(1, total - head)

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        params = self.client_model(download, state).params
        head_keys = [k for k in params if k.startswith(HEAD_PREFIX)]
        body_keys = [k for k in params if not k.startswith(HEAD_PREFIX)]
        head_steps, body_steps = self.phase_steps()
        first = ctx.learner.fit(params, self.optimization(head_keys), head_steps, ctx.generator)
        second = ctx.learner.fit(first.params, self.optimization(body_keys), body_steps, ctx.generator)
        return ClientUpdate(
            upload=Record({k: second.params[k] for k in download.tensors}, {NUM_EXAMPLES: ctx.learner.num_train}),
            state=Record({k: second.params[k] for k in state.tensors}),
            metrics={"train_loss": second.loss, "head_phase_loss": first.loss},
        )
