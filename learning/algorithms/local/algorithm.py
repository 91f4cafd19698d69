"""Local: every device trains its own model on its own labelled data and never communicates.

The lower baseline of DoFed-SPP's Table 1 (docs/studies/dofed_spp.md): all N
devices train I local epochs each round; no uploads, no downloads, so a
round lasts as long as its slowest device computes.
"""

from __future__ import annotations

from edgesim.backend import DeviceWork, RoundOutcome, RoundPlan, SystemView
from edgesim.learning.algorithms import register
from edgesim.learning.algorithms.common import (
    accuracy_metrics,
    evaluate_personal,
    has_unlabeled,
    labeling_accuracy,
    mean_loss,
    sgd_cycles,
    sgd_task,
    step_metrics,
    to_cpu,
    to_device,
    train_devices,
)
from edgesim.learning.algorithms.local.config import LocalConfig
from edgesim.learning.context import Context


class Local:
    def __init__(self, ctx: Context, name: str = "local"):
        self.ctx, self.name = ctx, name
        first = ctx.init_state()
        self.states = [dict(first) for _ in range(ctx.n_devices)]
        self.task = sgd_task(ctx)

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx = self.ctx
        work = tuple(
            DeviceWork(device=d, compute_cycles={"train": sgd_cycles(ctx, self.task, c.y_sup.shape[0])})
            for d, c in enumerate(ctx.clients)
        )
        return RoundPlan(work)

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx = self.ctx
        devices = list(range(ctx.n_devices))
        data = [(c.x_sup, c.y_sup) for c in ctx.clients]
        result = train_devices(ctx, self.name, outcome.round_index, devices, self.states, data, self.task)
        self.states = result.params
        metrics = {**accuracy_metrics(evaluate_personal(ctx, self.states)), "train_loss": mean_loss(result),
                   **step_metrics(result)}
        if has_unlabeled(ctx):
            metrics.update(accuracy_metrics(labeling_accuracy(ctx, self.states), "labeling_accuracy"))
        return metrics

    def state_dict(self) -> dict:
        return {"states": [to_cpu(s) for s in self.states]}

    def load_state_dict(self, state: dict) -> None:
        self.states = [to_device(self.ctx, s) for s in state["states"]]


@register("local", LocalConfig, "Local: each device trains alone, no communication", display="Local")
def build_local(ctx: Context, cfg: LocalConfig) -> Local:
    return Local(ctx)
