"""pFedMe (T. Dinh, Tran & Nguyen, NeurIPS 2020): personalised models by Moreau envelopes (docs/model/fedavg_family.md).

Each round every device receives the global model w and sets its local
model w_k and its personalised model θ_k to it; then, per mini-batch
(I epochs over its labelled data), it approximately solves the inner
problem of Eq. (7) with K gradient steps on θ,

    θ ← θ − η_p·(∇f_k(θ; batch) + λ(θ − w_k)),

and moves its local model toward the result (Alg. 1, line 8),

    w_k ← w_k − η·λ·(w_k − θ).

The server mixes the average of the sampled devices' local models into the
global one (Eq. 10 with β): ``w ← (1 − β)·w + β·Σ_k (n_k/n)·w_k``. As in the
official code, every device trains every round (so each has a fresh θ to be
evaluated with) but only the K sampled ones upload; accuracy is each device's
θ on its test set.

On the clock: all N devices download w and compute ``K·I·C_tra·n`` cycles
(K training passes per row); the sampled K upload w_k (the full model).
Defaults λ = 15, K = 5, η_p = 0.09, β = 1 (the official code's); η is
``[train] lr``.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch.func import grad

from edgesim.backend import DeviceWork, RoundOutcome, RoundPlan, SystemView
from edgesim.learning.aggregation import weighted_average
from edgesim.learning.algorithms import register
from edgesim.learning.algorithms.common import (
    arrived_updates,
    round_metrics,
    sample_clients,
    to_cpu,
    to_device,
    train_devices,
)
from edgesim.learning.algorithms.pfedme.config import PFedMeConfig
from edgesim.learning.context import Context
from edgesim.learning.costs import task_cycles
from edgesim.learning.optim import SGD
from edgesim.learning.tasks import LocalTask, StepInputs, Stream

W = "w:"  # prefix of the local model's keys in a client's state


def pfedme_step(cfg: PFedMeConfig, lr: float, param_keys: list[str]):
    """The client step of pFedMe (module docstring) for the executor."""

    def step(inp: StepInputs):
        b, net = inp.batch, inp.net
        theta = {k: inp.params[k] for k in param_keys}
        w = {k: inp.params[W + k] for k in param_keys}
        mask = b.mask("x") if b.padded else None
        rows = b.rows("x")

        def f(th):
            out = net.apply(th, b["x"], mask, rows)
            return b.mean(F.cross_entropy(out, b["y"], reduction="none"), "x")

        for _ in range(cfg.inner_steps):
            g = grad(f)(theta)
            theta = {k: theta[k] - cfg.personal_lr * (g[k] + cfg.lam * (theta[k] - w[k])) for k in param_keys}
        value = f(theta).detach()
        w = {k: w[k] - lr * cfg.lam * (w[k] - theta[k]) for k in param_keys}
        return {**theta, **{W + k: v for k, v in w.items()}}, inp.opt_state, {"loss": value}

    return step


class PFedMe:
    """pFedMe as a :class:`edgesim.backend.LearningBackend` (module docstring)."""

    name = "pfedme"

    def __init__(self, ctx: Context, cfg: PFedMeConfig):
        self.ctx, self.cfg = ctx, cfg
        self.param_keys = [n for n, _ in ctx.model.named_parameters()]
        lr = float(cfg.lr if cfg.lr is not None else ctx.train_cfg.lr)
        self.task = LocalTask(
            loss=None, step=pfedme_step(cfg, lr, self.param_keys), optimizer=SGD(lr),
            epochs=ctx.epochs, streams=(Stream("main", ctx.train_cfg.batch_size),),
            trainable=frozenset(self.param_keys + [W + k for k in self.param_keys]),
            passes={"main": float(cfg.inner_steps)},
        )
        self.global_state = ctx.init_state()
        self.theta = [self.global_state] * ctx.n_devices
        self.selected: tuple[int, ...] = ()

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx = self.ctx
        self.selected = sample_clients(ctx, view.round_index, ctx.run_cfg.clients_per_round, view)
        work = tuple(
            DeviceWork(
                device=d,
                compute_cycles={"train": task_cycles(self.task, {"main": c.y_sup.shape[0]}, ctx.cycles_per_sample)},
                upload_bits=ctx.model_bits if d in self.selected else 0.0,
                download_bits=ctx.model_bits,
            )
            for d, c in enumerate(ctx.clients)
        )
        return RoundPlan(work, info={"K": len(self.selected)})

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx, n = self.ctx, self.ctx.n_devices
        devices = list(range(n))
        start = {**self.global_state, **{W + k: self.global_state[k] for k in self.param_keys}}
        data = [{"main": {"x": c.x_sup, "y": c.y_sup}} for c in ctx.clients]
        result = train_devices(ctx, "pfedme", outcome.round_index, devices, [start] * n, data, self.task)
        self.theta = [{k: v for k, v in s.items() if not k.startswith(W)} for s in result.params]
        # each device's w_i (pFedMe's "local model", Alg. 1 line 8), under the model's own keys
        device_w = [{**{k: s[k] for k in s if not k.startswith(W)}, **{k: s[W + k] for k in self.param_keys}}
                    for s in result.params]
        updates = arrived_updates(outcome, devices, device_w, [c.y_sup.shape[0] for c in ctx.clients])
        if updates and sum(w for _, w in updates) > 0:
            avg = weighted_average(updates)
            b = self.cfg.beta
            self.global_state = {k: ((1 - b) * self.global_state[k] + b * v if v.is_floating_point() else v)
                                 for k, v in avg.items()}
        return round_metrics(ctx, self.theta, result)

    def state_dict(self) -> dict:
        return {"global": to_cpu(self.global_state), "theta": [to_cpu(t) for t in self.theta]}

    def load_state_dict(self, state: dict) -> None:
        self.global_state = to_device(self.ctx, state["global"])
        self.theta = [to_device(self.ctx, t) for t in state["theta"]]


@register("pfedme", PFedMeConfig, "pFedMe: personalised models by Moreau envelopes, every device trains", display="pFedMe")
def build_pfedme(ctx: Context, cfg: PFedMeConfig) -> PFedMe:
    return PFedMe(ctx, cfg)
