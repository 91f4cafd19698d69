"""FedAvg (McMahan et al., AISTATS 2017), FedProx (Li et al., MLSys 2020) and FedBN (Li et al., ICLR 2021).

One round: K devices are sampled; each downloads the global model, trains
``I`` local epochs on its labelled data (train ∪ labelled target,
ALGORITHMS.md §1.5) and uploads it; the server averages the uploads that
*arrived* (the engine's deadline may drop some), weighted by sample count.

- FedProx is FedAvg with the proximal term ``(μ/2)‖w − w_global‖²``
  (ALGORITHMS.md §5.6); μ = 0 is FedAvg exactly (tested).
- FedBN keeps every BatchNorm parameter and running statistic local
  (ALGORITHMS.md §5.7): those keys are neither uploaded nor averaged, each
  device evaluates the global model with its own BatchNorm. For a model
  without BatchNorm it equals FedAvg.

Evaluation: the model each device would use — the global model (with its
own BatchNorm under FedBN) — on the device's test set; mean and spread over
devices.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch.nn as nn

from edgesim.backend import RoundOutcome, RoundPlan, SystemView
from edgesim.config import check_choice, check_number
from learning.aggregation import merge, split_keys, weighted_average
from learning.algorithms.common import (
    accuracy_metrics,
    check_losses,
    clone_state,
    evaluate_personal,
    evaluate_shared,
    has_unlabeled,
    labeling_accuracy,
    mean_loss,
    sample_clients,
    sampled_training_plan,
    to_cpu,
    to_device,
)
from learning.algorithms.registry import register
from learning.context import Context



@dataclass(frozen=True)
class FedAvgConfig:
    """``weighting``: ``"samples"`` (by each device's labelled sample count, the paper's) or ``"uniform"``."""

    weighting: str = "samples"

    def __post_init__(self):
        check_choice("weighting", self.weighting, ("samples", "uniform"))


@dataclass(frozen=True)
class FedProxConfig:
    """``mu``: weight μ of the proximal term (ALGORITHMS.md §5.6 proposes 0.01)."""

    mu: float = 0.01
    weighting: str = "samples"

    def __post_init__(self):
        check_number("mu", self.mu, minimum=0)
        check_choice("weighting", self.weighting, ("samples", "uniform"))


@dataclass(frozen=True)
class FedBNConfig:
    """FedAvg with BatchNorm kept local (no options beyond FedAvg's)."""

    weighting: str = "samples"

    def __post_init__(self):
        check_choice("weighting", self.weighting, ("samples", "uniform"))


def batchnorm_keys(model: nn.Module) -> frozenset[str]:
    """State-dict keys that belong to BatchNorm layers (weights, biases, running statistics)."""
    keys = set()
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            keys.update(f"{name}.{k}" for k in m.state_dict())
    return frozenset(keys)


class FedAvg:
    """The FedAvg family as a :class:`edgesim.backend.LearningBackend`."""

    def __init__(self, ctx: Context, name: str, prox_mu: float = 0.0, local_bn: bool = False, weighting: str = "samples"):
        self.ctx, self.name, self.weighting = ctx, name, weighting
        self.local_cfg = replace(ctx.local_cfg, prox_mu=float(prox_mu))
        local_keys = batchnorm_keys(ctx.model) if local_bn else frozenset()
        self.is_local = local_keys.__contains__
        state = ctx.init_state()
        self.global_state, first_local = split_keys(state, self.is_local)
        self.personal = [clone_state(first_local) for _ in range(ctx.n_devices)]
        self.selected: tuple[int, ...] = ()
        self.round_index = -1

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx = self.ctx
        self.round_index = view.round_index
        self.selected = sample_clients(ctx, view.round_index, ctx.run_cfg.clients_per_round)
        return sampled_training_plan(ctx, self.selected)

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx, sel = self.ctx, self.selected
        starts = [merge(self.global_state, self.personal[d]) for d in sel]
        data = [(ctx.clients[d].x_sup, ctx.clients[d].y_sup) for d in sel]
        gens = [ctx.generator("train", self.name, outcome.round_index, d) for d in sel]
        result = ctx.executor.train_with_stats(ctx.model, starts, data, gens, self.local_cfg)
        check_losses(self.name, outcome.round_index, sel, result)
        arrived = set(outcome.arrived)
        updates = []
        for d, state in zip(sel, result.params):
            shared, local = split_keys(state, self.is_local)
            self.personal[d] = local  # local keys never leave the device, whatever the uplink did
            if d in arrived:
                weight = 1.0 if self.weighting == "uniform" else float(ctx.clients[d].y_sup.shape[0])
                updates.append((shared, weight))
        if updates and sum(w for _, w in updates) > 0:
            self.global_state = weighted_average(updates)
        models = [merge(self.global_state, p) for p in self.personal]
        accs = evaluate_personal(ctx, models) if any(self.personal) else evaluate_shared(ctx, self.global_state)
        metrics = {**accuracy_metrics(accs), "train_loss": mean_loss(result)}
        if has_unlabeled(ctx):
            metrics.update(accuracy_metrics(labeling_accuracy(ctx, models), "labeling_accuracy"))
        return metrics

    def state_dict(self) -> dict:
        return {
            "global": to_cpu(self.global_state),
            "personal": [to_cpu(p) for p in self.personal],
        }

    def load_state_dict(self, state: dict) -> None:
        self.global_state = to_device(self.ctx, state["global"])
        self.personal = [to_device(self.ctx, p) for p in state["personal"]]


@register("fedavg", FedAvgConfig, "FedAvg: sample K devices, average their models weighted by sample count", display="FedAvg")
def build_fedavg(ctx: Context, cfg: FedAvgConfig) -> FedAvg:
    return FedAvg(ctx, "fedavg", weighting=cfg.weighting)


@register("fedprox", FedProxConfig, "FedProx: FedAvg with a proximal term (mu/2)||w - w_global||^2", display="FedProx")
def build_fedprox(ctx: Context, cfg: FedProxConfig) -> FedAvg:
    return FedAvg(ctx, "fedprox", prox_mu=cfg.mu, weighting=cfg.weighting)


@register("fedbn", FedBNConfig, "FedBN: FedAvg with BatchNorm layers kept local", display="FedBN")
def build_fedbn(ctx: Context, cfg: FedBNConfig) -> FedAvg:
    return FedAvg(ctx, "fedbn", local_bn=True, weighting=cfg.weighting)
