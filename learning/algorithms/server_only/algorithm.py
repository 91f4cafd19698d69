"""Supervised only: the base station trains the global model on its own labelled set; no client takes part.

The floor of the labels-at-server methods (docs/studies/labels_at_server.md): what FedMix's Eq. 9 gives with
(α, β, γ) = (0, 1, 0), θ^{t+1} = σ^t, and what FedMatch gives with ψ = 0. Each round the server trains
θ ``server_epochs`` on its labelled set with ``λ_s·CE`` (the step both methods' servers take), on the
clock at ``system.server_freq_hz`` (the round plan's server phase). No device downloads, computes or
uploads anything, so a round lasts the server's compute time. A phase the round's deadline cuts yields
nothing (``RoundOutcome.server_cut``): θ stays as it was (docs/studies/labels_at_server.md).
"""

from __future__ import annotations

from edgesim.backend import RoundOutcome, RoundPlan, SystemView
from edgesim.learning.algorithms import register
from edgesim.learning.algorithms.common import (
    NO_STEPS,
    server_labeled_set,
    shared_model_metrics,
    to_cpu,
    to_device,
    train_at_server,
)
from edgesim.learning.algorithms.server_only.config import ServerOnlyConfig  # noqa: F401 - re-exported
from edgesim.learning.context import Context
from edgesim.learning.costs import task_cycles
from edgesim.learning.objectives import scaled_cross_entropy_loss
from edgesim.learning.tasks import LocalTask, Stream


class ServerOnly:
    """Supervised only as a :class:`edgesim.backend.LearningBackend` (module docstring)."""

    def __init__(self, ctx: Context, cfg: ServerOnlyConfig):
        self.ctx, self.cfg = ctx, cfg
        x, y = server_labeled_set(ctx, "server_only")
        self.data = {"main": {"x": x, "y": y}}
        self.task = LocalTask(loss=scaled_cross_entropy_loss(cfg.lambda_s), optimizer=ctx.optimizer(lr=cfg.lr),
                              epochs=cfg.server_epochs, streams=(Stream("main", cfg.server_batch_size),))
        self.theta = ctx.init_state()

    def plan_round(self, view: SystemView) -> RoundPlan:
        cycles = task_cycles(self.task, {"main": self.data["main"]["y"].shape[0]}, self.ctx.cycles_per_sample)
        return RoundPlan((), info={"K": 0}, server_cycles={"train": cycles})

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        if outcome.server_cut:  # the deadline cut the phase: θ stays the previous round's
            return {**shared_model_metrics(self.ctx, self.theta), "train_loss": float("nan"), **NO_STEPS,
                    "server_steps": 0.0}
        result = train_at_server(self.ctx, "server_only", outcome.round_index, self.theta, self.data, self.task)
        self.theta = result.params[0]
        return {**shared_model_metrics(self.ctx, self.theta), "train_loss": result.mean_loss[0], **NO_STEPS,
                "server_steps": float(result.n_steps[0])}

    def state_dict(self) -> dict:
        return {"theta": to_cpu(self.theta)}

    def load_state_dict(self, state: dict) -> None:
        self.theta = to_device(self.ctx, state["theta"])


@register("server_only", ServerOnlyConfig, "Supervised only: the base station trains the model on its labelled set, "
          "no client takes part", display="Supervised only (server)")
def build_server_only(ctx: Context, cfg: ServerOnlyConfig) -> ServerOnly:
    return ServerOnly(ctx, cfg)
