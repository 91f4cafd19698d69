"""FedBE (Chen & Chao, ICLR 2021), a DoFed-SPP baseline (docs/studies/dofed_spp.md).

Each round K devices (sampled as in FedAvg) download the global model, train
I local epochs on their labelled data and upload. The server then builds a
Bayesian model ensemble and distils it into the next global model:

1. ``w̄`` = FedAvg of the uploads that arrived (by sample count);
2. SWAG-style samples around the previous global ``w_prev`` (hongyouc/FedBE
   ``swag.py``, ``mode="gaussian"``), per state-dict entry k:
   ``Δ_i = (w_i − w_prev)/‖w_i − w_prev‖₂``, ``μ = mean Δ_i``,
   ``σ² = clamp(mean Δ_i² − μ², 1e-5)``, ``ν = mean ‖w_i − w_prev‖₂``,
   ``w_s = w_prev + swag_stepsize·ν·(μ + var_scale·σ·ε)``, ε ~ N(0, I);
   or (``mode="dirichlet"``) ``w_s = Σ_i π_i w_i``, π ~ Dir(α·1);
3. teachers = [w̄] + ``n_samples`` samples + the client models; their mean
   softmax on the server's unlabelled set, sharpened with temperature T
   (``p^(1/T)`` renormalised), is the target;
4. the student starts from w̄ and is trained on those soft targets
   (cross-entropy with probability targets = KL up to a constant) for
   ``distill_epochs`` epochs of SGD (lr 1e-3, momentum 0.9, wd 1e-5, batch
   128, FedBE's values); it becomes the global model.

Choices (docs/studies/dofed_spp.md): the server's unlabelled set is
``server_fraction`` (5%, docs/studies/dofed_spp.md) of the train split — the train
pool plus every device's samples — drawn from the samples no device holds
(``ctx.pool_x``), or ``server_samples`` of them; its labels are never used.
FedBE averages the student's weights (SWA) from step 500 on; with the few
distillation steps affordable here (``distill_epochs`` default 2) that
point is never reached, so SWA is left out. The BS's ensemble and
distillation run on the clock after the uploads
(``RoundPlan.server_cycles_after``, at ``system.server_freq_hz``; see
:func:`server_cycles`); ``server_on_clock = false`` makes them free, the
paper's system model (§3.1), which calls server computation negligible.
Evaluation as FedAvg: the global
model on every device's target test set, and as the labeller of its
unlabelled set.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from edgesim.backend import RoundOutcome, RoundPlan, SystemView
from edgesim.learning.aggregation import weighted_average
from edgesim.learning.algorithms import register
from edgesim.learning.algorithms.common import (
    accuracy_metrics,
    check_losses,
    evaluate_shared,
    has_unlabeled,
    labeling_accuracy,
    mean_loss,
    sample_clients,
    sampled_training_plan,
    sgd_task,
    step_metrics,
    to_cpu,
    to_device,
    train_devices,
)
from edgesim.learning.algorithms.fedbe.config import FedBEConfig
from edgesim.learning.context import Context
from edgesim.learning.costs import forward_cycles
from edgesim.learning.inference import predict_proba

Params = dict[str, torch.Tensor]


def swag_sample(base: Params, clients: list[Params], generator: torch.Generator, var_scale: float = 0.1,
                stepsize: float = 1.0, var_clamp: float = 1e-5) -> Params:
    """One Gaussian sample around ``base`` from the clients' normalised updates (FedBE ``swag.py``)."""
    out: Params = {}
    for k, b in base.items():
        if not b.is_floating_point():
            out[k] = clients[0][k]
            continue
        deltas = [c[k].double() - b.double() for c in clients]
        norms = [d.norm() for d in deltas]
        units = [d / n if n > 0 else torch.zeros_like(d) for d, n in zip(deltas, norms)]
        mean = torch.stack(units).mean(0)
        sq = torch.stack([u * u for u in units]).mean(0)
        var = torch.clamp(sq - mean * mean, min=var_clamp)
        eps = torch.randn(mean.shape, generator=generator, dtype=torch.float64).to(mean.device)
        avg_norm = torch.stack(norms).mean()
        out[k] = (b.double() + stepsize * avg_norm * (mean + var_scale * var.sqrt() * eps)).to(b.dtype)
    return out


def dirichlet_sample(clients: list[Params], rng: np.random.Generator, alpha: float) -> Params:
    """``Σ_i π_i w_i`` with π ~ Dir(α·1) (FedBE ``mode="dir"``)."""
    pi = rng.dirichlet(np.full(len(clients), alpha))
    return weighted_average([(c, float(p)) for c, p in zip(clients, pi)])


def sharpen(p: torch.Tensor, temperature: float) -> torch.Tensor:
    """``p^(1/T)`` renormalised over the last dim."""
    q = p.clamp_min(1e-12) ** (1.0 / temperature)
    return q / q.sum(dim=-1, keepdim=True)


def server_cycles(cfg: FedBEConfig, n_server: int, n_clients: int, cycles_per_sample: float) -> dict[str, float]:
    """The BS's cycles after the uploads: the ensemble's forward passes and the student's training.

    ``ensemble`` = ``C_fwd · n_server · (1 + n_samples + K)`` (w̄, the samples and the K client models on
    the server set; ``edgesim.learning.costs.forward_cycles``), ``distill`` = ``distill_epochs · C_tra · n_server``
    (Eq. 7 with the server set as the data). K is the planned number of uploads.
    """
    from edgesim.compute import training_cycles

    return {
        "ensemble": forward_cycles(cycles_per_sample, n_server, 1 + cfg.n_samples + n_clients),
        "distill": training_cycles(cfg.distill_epochs, cycles_per_sample, n_server),
    }


def server_set_size(ctx: Context, cfg: FedBEConfig) -> int:
    """How many pool samples the server holds: ``server_samples``, or ``server_fraction`` of the train split."""
    pool = 0 if ctx.pool_x is None else int(ctx.pool_x.shape[0])
    if cfg.server_samples is not None:
        want = cfg.server_samples
    else:
        total = pool + sum(c.y_train.shape[0] + c.y_lab.shape[0] + c.x_unl.shape[0] for c in ctx.clients)
        want = max(1, int(round(cfg.server_fraction * total)))
    if pool < want:
        raise ValueError(
            f"fedbe: the server needs {want} unlabelled samples but only {pool} train samples are left over by "
            f"the partition; lower [algorithms.fedbe] server_fraction/server_samples or data.size_scale"
        )
    return want


class FedBE:
    name = "fedbe"

    def __init__(self, ctx: Context, cfg: FedBEConfig):
        self.ctx, self.cfg = ctx, cfg
        self.global_state = ctx.init_state()
        size = server_set_size(ctx, cfg)
        idx = ctx.rng(self.name, "server").choice(ctx.pool_x.shape[0], size=size, replace=False)
        self.server_x = ctx.pool_x[torch.as_tensor(np.sort(idx), device=ctx.pool_x.device)]
        self.task = sgd_task(ctx)
        self.distill_task = sgd_task(  # the student's supervised step on the teachers' soft labels
            ctx, lr=cfg.distill_lr, momentum=cfg.distill_momentum, weight_decay=cfg.distill_weight_decay,
            batch_size=cfg.distill_batch_size, epochs=cfg.distill_epochs,
        )
        self.selected: tuple[int, ...] = ()

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx = self.ctx
        self.selected = sample_clients(ctx, view.round_index, ctx.run_cfg.clients_per_round, view)
        plan = sampled_training_plan(ctx, self.selected)
        if not self.cfg.server_on_clock:
            return plan
        after = server_cycles(self.cfg, int(self.server_x.shape[0]), len(self.selected), ctx.cycles_per_sample)
        return dataclasses.replace(plan, server_cycles_after=after)

    def teachers(self, base: Params, clients: list[Params], weights: list[float], round_index: int) -> tuple[Params, list[Params]]:
        """``(w̄, teachers)`` for one round: w̄, the ``n_samples`` samples and the client models."""
        cfg = self.cfg
        avg = weighted_average(list(zip(clients, weights)))
        samples = []
        for s in range(cfg.n_samples):
            if cfg.mode == "gaussian":
                samples.append(swag_sample(base, clients, self.ctx.generator(self.name, "swag", round_index, s),
                                           cfg.var_scale, cfg.swag_stepsize))
            else:
                samples.append(dirichlet_sample(clients, self.ctx.rng(self.name, "dir", round_index, s), cfg.dirichlet_alpha))
        return avg, [avg] + samples + list(clients)

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx, cfg, r = self.ctx, self.cfg, outcome.round_index
        sel = list(self.selected)
        data = [(ctx.clients[d].x_sup, ctx.clients[d].y_sup) for d in sel]
        result = train_devices(ctx, self.name, r, sel, [self.global_state] * len(sel), data, self.task)
        arrived = set(outcome.arrived)
        ups = [(s, 1.0 if cfg.weighting == "uniform" else float(ctx.clients[d].y_sup.shape[0]))
               for d, s in zip(sel, result.params) if d in arrived]
        metrics: dict[str, float] = {"train_loss": mean_loss(result), **step_metrics(result)}
        if ups:
            avg, teachers = self.teachers(self.global_state, [s for s, _ in ups], [w for _, w in ups], r)
            probs = predict_proba(ctx.model, teachers, self.server_x, batch_size=ctx.train_cfg.eval_batch_size,
                                  vectorize=ctx.device.type == "cuda")
            target = sharpen(probs.mean(0), cfg.temperature)
            if cfg.distill_epochs > 0:
                student = ctx.executor.run(ctx.model, self.distill_task, [avg], [(self.server_x, target)],
                                           [ctx.generator(self.name, "distill", r)])
                check_losses(f"{self.name} (distillation)", r, [-1], student)
                self.global_state = student.params[0]
                metrics["distill_loss"] = student.mean_loss[0]
            else:
                self.global_state = avg
        accs = evaluate_shared(ctx, self.global_state)
        metrics.update(accuracy_metrics(accs))
        if has_unlabeled(ctx):
            metrics.update(accuracy_metrics(labeling_accuracy(ctx, [self.global_state] * ctx.n_devices), "labeling_accuracy"))
        return metrics

    def state_dict(self) -> dict:
        return {"global": to_cpu(self.global_state)}

    def load_state_dict(self, state: dict) -> None:
        self.global_state = to_device(self.ctx, state["global"])


@register("fedbe", FedBEConfig, "FedBE: FedAvg + SWAG-sampled Bayesian ensemble distilled on server unlabelled data", display="FedBE",
          check_data=server_set_size)
def build_fedbe(ctx: Context, cfg: FedBEConfig) -> FedBE:
    return FedBE(ctx, cfg)
