"""FedMix with FedFreq (Zhang et al., arXiv 2110.13388), labels at the server (docs/labels_at_server.md).

The paper's equations (6)–(10) and its numeric hyperparameters did not
survive in any reachable copy; what follows is a **reconstruction** from the
paper's prose, with FedMatch's official values (Jeong et al., ICLR 2021)
filling the gaps. One round t:

1. **Server** (Eq. 6, on the clock before the broadcast): the supervised
   model σ^t starts from the global θ^t and trains ``server_epochs`` on the
   labelled server set with ``λ_s · CE(y, f_σ(x))``.
2. **Broadcast** θ^t and σ^t (2·m bits) to the K sampled clients.
3. **Client k** (Eqs. 7–8): ψ_k starts from θ^t and trains on its unlabelled
   data with
   ``λ_1·(1/|U|) Σ_u 1[conf(u) ≥ τ]·CE(ŷ_u, f_ψ(π(u))) + λ_2·‖ψ_k − σ^t‖²``,
   where ``q(u) = (1/A) Σ_a softmax(f_ψ(π_a(u)))`` over A = 2 perturbations
   (a ±2 px shift and a horizontal flip), ``ŷ_u = argmax q(u)``,
   ``conf(u) = max q(u)`` (no gradient through q), and π(u) a fresh ±2 px
   shift; uploads ψ_k (m bits).
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
from learning.aggregation import weighted_average
from learning.algorithms.common import (
    accuracy_metrics,
    evaluate_shared,
    mean_loss,
    aux_metrics,
    sample_clients,
    server_labeled_set,
    to_cpu,
    to_device,
    train_at_server,
    train_devices,
    training_plan,
)
from learning.algorithms.registry import register_variants
from learning.augment import make_augmentation
from learning.context import Context
from learning.label_quality import TRUTH, batch_label_aux
from learning.costs import task_cycles
from learning.executors import LocalTask, Stream, View
from learning.algorithm_configs.fedmix import WEIGHTINGS, FedMixConfig, VARIANTS  # noqa: F401 (re-exported)

Params = dict[str, torch.Tensor]
SIGMA = "sigma/"  # prefix of σ^t's keys in a client's state (a frozen input)


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


def squared_distance(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], prefix: str = "") -> torch.Tensor:
    """``Σ_k ‖a[k] − b[prefix + k]‖²`` over the keys of ``a`` (the pull of ψ toward σ)."""
    return sum(((v - b[prefix + k]) ** 2).sum() for k, v in a.items())


# --------------------------------------------------------------------------- losses and tasks


def scaled_ce_loss(weight: float, x_key: str = "x"):
    """``weight · mean CE(y, f(x))`` (the server's Eq. 6)."""

    def loss(net, b, key):
        (out,) = net.logits(b, x_key)
        value = weight * b.mean(F.cross_entropy(out, b["y"], reduction="none"), x_key)
        return value, {"loss": value}

    return loss


def client_loss(cfg: FedMixConfig):
    """Eq. 7 (reconstructed) on batch keys ``u_shift``, ``u_flip`` (the A = 2 perturbations) and ``u_pi``."""

    def loss(net, b, key):
        ls, lf, lp = net.logits(b, "u_shift", "u_flip", "u_pi")
        label, mask = argmax_pseudo_labels([F.softmax(ls.detach(), -1), F.softmax(lf.detach(), -1)], cfg.threshold)
        unsup = b.mean(mask * F.cross_entropy(lp, label, reduction="none"), "u_pi")
        pull = squared_distance(net.params, net.fixed, SIGMA)
        total = cfg.lambda_1 * unsup + cfg.lambda_2 * pull
        return total, {"loss": total, "loss_u": unsup, "pull": pull, "mask_rate": b.mean(mask, "u_pi"),
                       **batch_label_aux(b, label, mask, "u_pi")}

    return loss


def client_task(ctx: Context, cfg: FedMixConfig) -> LocalTask:
    """One client round: ``epochs`` over its unlabelled data; A = 2 label forwards + 1 training pass per row."""
    shift = make_augmentation("shift", ctx.input_shape)
    flip = make_augmentation("flip", ctx.input_shape)
    return LocalTask(
        loss=client_loss(cfg), optimizer=ctx.optimizer(lr=cfg.lr), epochs=ctx.local_cfg.epochs,
        streams=(Stream("unl", cfg.batch_size),),
        views=(View("u_shift", "u", shift), View("u_flip", "u", flip), View("u_pi", "u", shift)),
        passes={"unl": 1.0 + 2.0 / 3.0},
    )


def server_task(ctx: Context, cfg: FedMixConfig) -> LocalTask:
    return LocalTask(loss=scaled_ce_loss(cfg.lambda_s), optimizer=ctx.optimizer(lr=cfg.lr), epochs=cfg.server_epochs,
                     streams=(Stream("main", cfg.server_batch_size),))


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
        self.param_keys = [k for k, _ in ctx.model.named_parameters()]
        self.counts = np.zeros(ctx.n_devices, dtype=np.int64)  # c_k: rounds each client has trained in
        self.selected: tuple[int, ...] = ()

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx = self.ctx
        self.selected = sample_clients(ctx, view.round_index, ctx.run_cfg.clients_per_round)
        cycles = {d: task_cycles(self.task, {"unl": ctx.clients[d].x_unl.shape[0]}, ctx.cycles_per_sample)
                  for d in self.selected}
        plan = training_plan(self.selected, cycles, ctx.model_bits, 2 * ctx.model_bits)  # θ and σ down, ψ up
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
        server = train_at_server(ctx, self.name, r, self.theta, self.server_data, self.server_task)
        sigma = server.params[0]
        self.counts[sel] += 1
        frozen_sigma = {SIGMA + k: sigma[k] for k in self.param_keys}
        starts = [{**self.theta, **frozen_sigma} for _ in sel]
        data = [{"unl": {"u": ctx.clients[d].x_unl, TRUTH: ctx.clients[d].y_unl_hidden}} for d in sel]  # TRUTH: scored only
        result = train_devices(ctx, self.name, r, sel, starts, data, self.task)
        psis = [{k: v for k, v in s.items() if not k.startswith(SIGMA)} for s in result.params]
        arrived = set(outcome.arrived)
        ups = [(p, w) for d, p, w in zip(sel, psis, self.weights(sel)) if d in arrived]
        if ups and sum(w for _, w in ups) > 0:
            psi_bar = weighted_average(ups)
            self.theta = mix(psi_bar, sigma, self.theta, cfg.alpha, cfg.beta, cfg.gamma)
        metrics = {**accuracy_metrics(evaluate_shared(ctx, self.theta)), "train_loss": mean_loss(result),
                   "server_loss": server.mean_loss[0], **aux_metrics(result)}
        return metrics

    def state_dict(self) -> dict:
        return {"theta": to_cpu(self.theta), "counts": self.counts.tolist()}

    def load_state_dict(self, state: dict) -> None:
        self.theta = to_device(self.ctx, state["theta"])
        self.counts = np.asarray(state["counts"], dtype=np.int64)


register_variants(VARIANTS, FedMix)
