"""FedMix with FedFreq (Zhang et al., arXiv 2110.13388), labels at the server (docs/studies/labels_at_server.md).

The paper's equations (6)–(10) and its numeric hyperparameters did not
survive in any reachable copy; what follows is a **reconstruction** from the
paper's prose (§V-A, Steps 1–4), with every open value chosen on a
validation split of the server's labels. One round t:

1. **Server** (Eq. 6, on the clock before the broadcast): the supervised
   model σ^t trains ``server_epochs`` on the labelled server set with
   ``λ_s · CE(y, f_σ(x))``, starting from the global θ^t
   (``sigma_start = "theta"``) or from its own σ^{t−1} (``"persist"``).
2. **Broadcast** θ^t (m bits) to the K sampled clients; with
   ``send_sigma`` also σ^t (2·m bits).
3. **Client k** (Eqs. 7–8): ψ_k starts from θ^t and trains on its unlabelled
   data with
   ``λ_1·(1/|U|) Σ_u 1[conf(u) ≥ τ]·CE(ŷ_u, f_ψ(π(u)))
   + λ_c·(1/|U|) Σ_u KL(q(u) ‖ f_ψ(π(u))) + λ_2·(1/P)‖ψ_k − a‖²``,
   where ``q(u) = (1/A) Σ_a softmax(f_ψ(π_a(u)))`` over A = ``n_views``
   random flip∘shift copies (the paper's π₁ = shift, π₂ = flip; flip with
   probability 1/2; the shift alone on a data set a mirror relabels, docs/model/augmentations.md),
   ``ŷ_u = argmax q(u)``, ``conf(u) = max q(u)`` (no
   gradient through q), π(u) a fresh flip∘shift view, P the number of
   parameter entries and the anchor a = σ^t when it is sent, else θ^t;
   uploads ψ_k (m bits).
4. **Aggregation** (Eq. 9): ``ψ̄^t = Σ_k p_k ψ_k`` over the uploads that
   arrived and ``θ^{t+1} = α·ψ̄^t + β·σ^t + γ·θ^t`` with α + β + γ = 1.
5. **FedFreq** (Eq. 10): ``p_k ∝ (1/c_k^t)^freq_power`` with c_k^t the
   number of rounds client k has trained in, this one included (≥ 1).

Variants (config values): ``weighting = "samples"`` (FedMix mixing with
sample-count weights) and ``alpha, beta, gamma = 1, 0, 0`` (FedFreq weights
with plain averaging, θ^{t+1} = ψ̄^t).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from edgesim.backend import RoundOutcome, RoundPlan, SystemView
from edgesim.learning.aggregation import weighted_average
from edgesim.learning.algorithms import register_variants
from edgesim.learning.algorithms.common import (
    NO_STEPS,
    aux_metrics,
    mean_loss,
    sample_clients,
    server_labeled_set,
    shared_model_metrics,
    step_metrics,
    to_cpu,
    to_device,
    train_at_server,
    train_devices,
    training_plan,
)
from edgesim.learning.algorithms.fedmix.config import (  # noqa: F401 - re-exported
    LABELLERS,
    PULLS,
    SERVER_VIEWS,
    SIGMA_STARTS,
    VARIANTS,
    WEIGHTINGS,
    FedMixConfig,
)
from edgesim.learning.context import Context
from edgesim.learning.costs import task_cycles
from edgesim.learning.label_quality import TRUTH, batch_label_aux
from edgesim.learning.objectives import kl_to_soft, scaled_cross_entropy_loss
from edgesim.learning.tasks import LocalTask, Stream, View

Params = dict[str, torch.Tensor]
LABELLER = "labeller/"  # prefix of the labelling model (θ^t or σ^t, labeller ≠ "psi") in a client's state (frozen)
ANCHOR = "anchor/"  # prefix of the pull's anchor (σ^t or θ^t) in a client's state (a frozen input)


# --------------------------------------------------------------------------- formulas


def fedfreq_weights(counts: Sequence[int], power: float = 1.0) -> list[float]:
    """FedFreq (Eq. 10, reconstructed): ``p_k = c_k^{-power} / Σ_j c_j^{-power}``.

    ``counts``: c_k ≥ 1, the rounds each selected client has trained in (this one included).
    ``power = 0`` gives uniform weights; a client that trained twice as often weighs half (power 1).
    """
    c = np.asarray(counts, dtype=float)
    if c.size == 0 or (c < 1).any():
        raise ValueError(f"counts(={list(counts)}) must be one or more numbers >= 1")
    inv = c ** (-float(power))
    return (inv / inv.sum()).tolist()


def mix(psi_bar: Mapping[str, torch.Tensor], sigma: Mapping[str, torch.Tensor], theta: Mapping[str, torch.Tensor],
        alpha: float, beta: float, gamma: float) -> Params:
    """FedMix (Eq. 9): ``θ^{t+1} = α·ψ̄ + β·σ + γ·θ`` key by key (integer buffers: ψ̄'s)."""
    out = {}
    for k, p in psi_bar.items():
        out[k] = alpha * p + beta * sigma[k] + gamma * theta[k] if p.is_floating_point() else p.clone()
    return out


def argmax_pseudo_labels(prob_views: Sequence[torch.Tensor], threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 8 (reconstructed): ``q = mean_a p_a``; returns ``(argmax q, 1[max q ≥ τ])`` (mask as float)."""
    q = torch.stack(list(prob_views)).mean(0)
    conf, label = q.max(dim=-1)
    return label, (conf >= threshold).to(q.dtype)


def mean_squared_distance(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], prefix: str = "") -> torch.Tensor:
    """``(1/P) Σ_k ‖a[k] − b[prefix + k]‖²`` over the keys of ``a``, P their entries (the pull of ψ toward
    its anchor, per parameter entry: its gradient is ``2(a − b)/P``, so λ₂ acts as a stiffness μ = 2λ₂/P)."""
    total = sum(((v - b[prefix + k]) ** 2).sum() for k, v in a.items())
    return total / sum(v.numel() for v in a.values())


# --------------------------------------------------------------------------- losses and tasks


def view_names(cfg: FedMixConfig) -> list[str]:
    """The batch keys of the A label views (``u_a0`` …); the trained view is ``u_pi``."""
    return [f"u_a{i}" for i in range(cfg.n_views)]


def client_loss(cfg: FedMixConfig):
    """Eq. 7 (reconstructed) on the A label views and the trained view ``u_pi`` of the unlabelled batch."""
    labels_from = view_names(cfg)

    def loss(net, b, key):
        if cfg.labeller == "psi":  # ψ labels itself (the earlier reading)
            *views, lp = net.logits(b, *labels_from, "u_pi")
        else:  # the frozen θ^t or σ^t labels; its passes leave ψ's running statistics alone
            fixed = {k[len(LABELLER):]: v for k, v in net.fixed.items() if k.startswith(LABELLER)}
            labeller = {k: fixed[k] for k in net.params if k in fixed}
            views = [net.logits_frozen_stats(b, v, labeller) for v in labels_from]
            (lp,) = net.logits(b, "u_pi")
        q = torch.stack([F.softmax(v.detach(), -1) for v in views]).mean(0)
        label, mask = argmax_pseudo_labels([q], cfg.threshold)
        unsup = b.mean(mask * F.cross_entropy(lp, label, reduction="none"), "u_pi")
        total = cfg.lambda_1 * unsup
        aux = {"loss_u": unsup}
        if cfg.lambda_c:
            consistency = b.mean(kl_to_soft(lp, q), "u_pi")
            total = total + cfg.lambda_c * consistency
            aux["loss_c"] = consistency
        pull = mean_squared_distance(net.params, net.fixed, ANCHOR)
        if cfg.pull == "sum":  # λ₂·‖ψ − a‖² (stiffness 2λ₂ per entry)
            pull = pull * sum(v.numel() for v in net.params.values())
        total = total + cfg.lambda_2 * pull
        return total, {"loss": total, **aux, "pull": pull, "mask_rate": b.mean(mask, "u_pi"),
                       **batch_label_aux(b, label, mask, "u_pi")}

    return loss


def client_task(ctx: Context, cfg: FedMixConfig) -> LocalTask:
    """One client round: ``epochs`` over its unlabelled data; A label forwards + 1 training pass per row."""
    weak = ctx.augmentation("weak")  # flip∘shift; the shift alone where a mirror changes labels
    return LocalTask(
        loss=client_loss(cfg), optimizer=ctx.optimizer(lr=cfg.lr), epochs=ctx.epochs,
        streams=(Stream("unl", cfg.batch_size),),
        views=tuple(View(v, "u", weak) for v in view_names(cfg)) + (View("u_pi", "u", weak),),
        passes={"unl": 1.0 + cfg.n_views / 3.0},
    )


def server_task(ctx: Context, cfg: FedMixConfig) -> LocalTask:
    """σ's step (Eq. 6) on the server's labelled rows: the weak flip∘shift view the clients' labels come from
    (``server_views = "weak"``) or the clean rows (``"clean"``)."""
    views = (View("x_aug", "x", ctx.augmentation("weak")),) if cfg.server_views == "weak" else ()
    return LocalTask(loss=scaled_cross_entropy_loss(cfg.lambda_s, "x_aug" if views else "x"),
                     optimizer=ctx.optimizer(lr=cfg.lr), epochs=cfg.server_epochs,
                     streams=(Stream("main", cfg.server_batch_size),), views=views)


# --------------------------------------------------------------------------- the backend


class FedMix:
    """FedMix + FedFreq as a :class:`edgesim.backend.LearningBackend` (module docstring)."""

    def __init__(self, ctx: Context, name: str, cfg: FedMixConfig):
        self.ctx, self.name, self.cfg = ctx, name, cfg
        x, y = server_labeled_set(ctx, name)
        self.server_data = {"main": {"x": x, "y": y}}
        self.server_task = server_task(ctx, cfg)
        self.task = client_task(ctx, cfg)
        self.theta = ctx.init_state()
        self.sigma = self.theta  # σ^{t−1} (``sigma_start = "persist"``)
        self.param_keys = [k for k, _ in ctx.model.named_parameters()]
        self.counts = np.zeros(ctx.n_devices, dtype=np.int64)  # c_k: rounds each client has trained in
        self.selected: tuple[int, ...] = ()

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx = self.ctx
        self.selected = sample_clients(ctx, view.round_index, ctx.run_cfg.clients_per_round, view)
        cycles = {d: task_cycles(self.task, {"unl": ctx.clients[d].x_unl.shape[0]}, ctx.cycles_per_sample)
                  for d in self.selected}
        down = (2 if self.cfg.send_sigma else 1) * ctx.model_bits  # θ (and σ) down, ψ up
        plan = training_plan(self.selected, cycles, ctx.model_bits, down)
        server = task_cycles(self.server_task, {"main": self.server_data["main"]["y"].shape[0]}, ctx.cycles_per_sample)
        return dataclasses.replace(plan, server_cycles={"train_sigma": server})

    def weights(self, devices: Sequence[int]) -> list[float]:
        """p_k of ``devices`` (after their counts include this round)."""
        if self.cfg.weighting == "freq":
            return fedfreq_weights([int(self.counts[d]) for d in devices], self.cfg.freq_power)
        if self.cfg.weighting == "samples":
            return [float(self.ctx.clients[d].x_unl.shape[0]) for d in devices]
        return [1.0] * len(devices)

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx, cfg, r, sel = self.ctx, self.cfg, outcome.round_index, list(self.selected)
        if outcome.server_cut:  # σ's phase did not finish, nothing was broadcast: θ, σ and the counts unchanged
            nan = float("nan")
            return {**shared_model_metrics(ctx, self.theta), "train_loss": nan, "server_loss": nan, **NO_STEPS,
                    "server_steps": 0.0}
        start = self.theta if cfg.sigma_start == "theta" else self.sigma
        server = train_at_server(ctx, self.name, r, start, self.server_data, self.server_task)
        sigma = self.sigma = server.params[0]
        self.counts[sel] += 1
        anchor = sigma if cfg.send_sigma else self.theta
        frozen = {ANCHOR + k: anchor[k] for k in self.param_keys}
        if cfg.labeller != "psi":
            frozen.update({LABELLER + k: v for k, v in (sigma if cfg.labeller == "sigma" else self.theta).items()})
        starts = [{**self.theta, **frozen} for _ in sel]
        data = [{"unl": {"u": ctx.clients[d].x_unl, TRUTH: ctx.clients[d].y_unl_hidden}} for d in sel]  # TRUTH: scored only
        result = train_devices(ctx, self.name, r, sel, starts, data, self.task)
        psis = [{k: v for k, v in s.items() if not k.startswith((ANCHOR, LABELLER))} for s in result.params]
        arrived = set(outcome.arrived)
        ups = [(p, w) for d, p, w in zip(sel, psis, self.weights(sel)) if d in arrived]
        if ups and sum(w for _, w in ups) > 0:
            psi_bar = weighted_average(ups)
            self.theta = mix(psi_bar, sigma, self.theta, cfg.alpha, cfg.beta, cfg.gamma)
        metrics = {**shared_model_metrics(ctx, self.theta), "train_loss": mean_loss(result),
                   "server_loss": server.mean_loss[0], **aux_metrics(result), **step_metrics(result),
                   "server_steps": float(server.n_steps[0])}
        return metrics

    def state_dict(self) -> dict:
        return {"theta": to_cpu(self.theta), "sigma": to_cpu(self.sigma), "counts": self.counts.tolist()}

    def load_state_dict(self, state: dict) -> None:
        self.theta = to_device(self.ctx, state["theta"])
        self.sigma = to_device(self.ctx, state["sigma"])
        self.counts = np.asarray(state["counts"], dtype=np.int64)


register_variants(VARIANTS, FedMix)
