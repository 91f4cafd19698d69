"""FedMatch (Jeong et al., ICLR 2021) from its official code (wyjeong/FedMatch; docs/studies/labels_at_server.md).

The weights are decomposed: ``θ = σ + ψ``, σ learned from labels, ψ from
unlabelled data. Training uses the dense ``σ + ψ`` (the L1 term makes ψ
sparse); the model evaluated is ``σ + ψ·1[|ψ| > l1_threshold]``, as the
official decomposed layers threshold ψ only at evaluation. At start σ is the model's
initialisation and ψ = ``psi_factor``·σ (official: 0.2). One round r:

**Labels at the server** (``labels = "server"``, registered ``fedmatch``):

1. the server trains σ (ψ frozen) one epoch on its labelled set with
   ``λ_s·CE`` — on the clock, before the broadcast;
2. the K sampled clients download σ and ψ (2 models' bits) and, in helper
   rounds ((r+1) % ``helper_interval`` = 0), the ψ of their H helpers;
3. client k trains ψ (σ frozen) on its unlabelled data, batches of B:
   ``L_u = λ_i·(1/H)Σ_h KL(p_h ‖ p) + λ_a·CE(vote, f_θ(RandAug(u)))`` over
   the confident rows (``max p ≥ τ``, mean over them), plus
   ``λ_L1‖ψ‖₁ + λ_L2‖σ − ψ‖²``. p = f_θ(u); p_h = f_{σ+ψ_h}(u) of helper h;
   ``vote = argmax(onehot(argmax p) + Σ_h onehot(argmax p_h))`` — without
   helpers, ``argmax p`` and no KL term; uploads ψ;
4. the server averages the arrived ψ uniformly; then (on the clock, after the
   uploads) it embeds each arrived client's restored model σ + ψ_k as its
   softmax output on one fixed truncated-Gaussian noise image; a client's
   H helpers are the H nearest other embeddings (``scipy.spatial.cKDTree``).

**Labels at the clients** (``labels = "client"``, registered ``fedmatch_lc``):
no server set; each client trains σ on its labelled data (``λ_s·CE``, batch
``labeled_batch_size``) and ψ on its unlabelled data (``L_u`` as above) and
uploads both; the server averages both uniformly. Official values:
λ_L1 = 1e-4, threshold 5e-6.

σ/ψ split: the executor's ``trainable`` keys. σ has the model's own key
names, ψ the prefix ``psi/``, helper h's ψ the prefix ``helper{h}/``; keys
that do not train are frozen inputs.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from edgesim.backend import DeviceWork, RoundOutcome, RoundPlan, SystemView
from edgesim.learning.algorithms import register
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
)
from edgesim.learning.algorithms.fedmatch.config import FedMatchConfig, FedMatchLCConfig
from edgesim.learning.context import Context
from edgesim.learning.costs import forward_cycles, task_cycles
from edgesim.learning.label_quality import TRUTH, batch_label_aux
from edgesim.learning.objectives import kl_to_soft
from edgesim.learning.tasks import LocalTask, LocalTrainResult, Stream, View

Params = dict[str, torch.Tensor]
PSI = "psi/"


def helper_prefix(h: int) -> str:
    return f"helper{h}/"


# --------------------------------------------------------------------------- formulas


def hard_threshold(psi: torch.Tensor, threshold: float) -> torch.Tensor:
    """``ψ·1[|ψ| > threshold]`` (the gradient flows through the kept entries only)."""
    return psi * (psi.abs() > threshold).to(psi.dtype)


def compose(sigma: Mapping[str, torch.Tensor], psi: Mapping[str, torch.Tensor], keys: Sequence[str],
            threshold: Optional[float], prefix: str = PSI) -> Params:
    """θ[k] = σ[k] + ψ[prefix + k] for ``keys`` (ψ hard-thresholded unless ``threshold`` is None)."""
    return {k: sigma[k] + (psi[prefix + k] if threshold is None else hard_threshold(psi[prefix + k], threshold))
            for k in keys}


def agreement_vote(own: torch.Tensor, helpers: Sequence[torch.Tensor]) -> torch.Tensor:
    """FedMatch's agreement-based label: ``argmax(onehot(argmax p) + Σ_h onehot(argmax p_h))``.

    ``own``/``helpers[h]``: ``(n, C)`` scores; ties go to the lowest class (``argmax``), as in the official
    code; no helpers: ``argmax p``.
    """
    classes = torch.arange(own.shape[-1], device=own.device)
    votes = (own.argmax(-1, keepdim=True) == classes).long()  # one-hot without F.one_hot's data check (vmap)
    for p in helpers:
        votes = votes + (p.argmax(-1, keepdim=True) == classes).long()
    return votes.argmax(-1)


def choose_helpers(vectors: Mapping[int, np.ndarray], client: int, n_helpers: int) -> list[int]:
    """The ``n_helpers`` clients whose embeddings are nearest to ``client``'s (Euclidean, ``cKDTree``).

    ``vectors``: client id → its model's output on the fixed noise input (the latest that arrived).
    A client without an embedding gets none; ids are indexed in sorted order, so equal distances go to
    the lower id.
    """
    from scipy.spatial import cKDTree

    if n_helpers == 0 or client not in vectors:
        return []
    ids = sorted(vectors)
    tree = cKDTree(np.stack([np.asarray(vectors[i], dtype=float) for i in ids]))
    _, idx = tree.query(np.asarray(vectors[client], dtype=float), k=min(n_helpers + 1, len(ids)))
    return [ids[i] for i in np.atleast_1d(idx) if ids[i] != client][:n_helpers]


def noise_image(ctx: Context, shape: tuple) -> torch.Tensor:
    """One truncated-Gaussian image (pixels mean 125/255, std 125/255, in [0, 1]), normalised like the data."""
    from scipy.stats import truncnorm

    mu = sd = 125.0 / 255.0
    pix = truncnorm.rvs(-mu / sd, (1 - mu) / sd, loc=mu, scale=sd, size=(1, *shape), random_state=ctx.rng("fedmatch", "noise"))
    x = torch.as_tensor(pix, dtype=torch.float32)
    if ctx.data_mean is not None:
        mean = torch.as_tensor(ctx.data_mean, dtype=torch.float32).view(1, -1, 1, 1)
        std = torch.as_tensor(ctx.data_std, dtype=torch.float32).view(1, -1, 1, 1)
        x = (x - mean) / torch.where(std > 0, std, torch.ones_like(std))
    return x.to(ctx.device)


# --------------------------------------------------------------------------- losses


def _masked_mean(v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (v * mask).sum() / mask.sum().clamp(min=1.0)


def unsupervised_loss(cfg: FedMatchConfig, keys: Sequence[str], n_helpers: int, both_train: bool):
    """``L_u`` of the module docstring (σ detached when it trains too: its gradient is the supervised one)."""

    def terms(net, b, allp):
        sigma = {k: (allp[k].detach() if both_train else allp[k]) for k in keys}
        theta = compose(sigma, allp, keys, None)
        lu, ls = net.logits(b, "u", "u_strong", params=theta)
        p = F.softmax(lu, -1)
        conf = (p.detach().max(-1).values >= cfg.threshold).to(p.dtype) * b.mask("u")
        helpers = [F.softmax(net.logits(b, "u", params=compose(sigma, allp, keys, None, helper_prefix(h)))[0], -1).detach()
                   for h in range(n_helpers)]
        label = agreement_vote(p.detach(), helpers)
        unsup = cfg.lambda_a * _masked_mean(F.cross_entropy(ls, label, reduction="none"), conf)
        if helpers:
            unsup = unsup + cfg.lambda_i * sum(_masked_mean(kl_to_soft(lu, q), conf) for q in helpers) / n_helpers
        psi = [allp[PSI + k] for k in keys]
        reg = cfg.lambda_l1 * sum(v.abs().sum() for v in psi) + cfg.lambda_l2 * sum(
            ((sigma[k] - v) ** 2).sum() for k, v in zip(keys, psi))
        return unsup + reg, {"loss_u": unsup, "mask_rate": b.mean(conf, "u"), **batch_label_aux(b, label, conf, "u")}

    return terms


def client_loss(cfg: FedMatchConfig, keys: Sequence[str], n_helpers: int):
    """ψ's loss (labels at the server) or σ's supervised loss + ψ's loss (labels at the clients)."""
    at_client = cfg.labels == "client"
    unsup = unsupervised_loss(cfg, keys, n_helpers, both_train=at_client)

    def loss(net, b, key):
        allp = {**net.fixed, **net.params}
        lu, aux = unsup(net, b, allp)
        total = lu
        if at_client:
            psi_frozen = {PSI + k: allp[PSI + k].detach() for k in keys}
            (lx,) = net.logits(b, "x", params=compose(allp, psi_frozen, keys, None))
            sup = cfg.lambda_s * b.mean(F.cross_entropy(lx, b["y"], reduction="none"), "x")
            total = total + sup
            aux = {**aux, "loss_s": sup}
        return total, {"loss": total, **aux}

    return loss


def server_loss(cfg: FedMatchConfig, keys: Sequence[str]):
    """``λ_s·CE(y, f_{σ+ψ}(x))`` with ψ frozen (σ trains at the server)."""

    def loss(net, b, key):
        allp = {**net.fixed, **net.params}
        (out,) = net.logits(b, "x", params=compose(allp, allp, keys, None))
        value = cfg.lambda_s * b.mean(F.cross_entropy(out, b["y"], reduction="none"), "x")
        return value, {"loss": value}

    return loss


# --------------------------------------------------------------------------- the backend


class FedMatch:
    """FedMatch as a :class:`edgesim.backend.LearningBackend` (module docstring)."""

    def __init__(self, ctx: Context, name: str, cfg: FedMatchConfig):
        self.ctx, self.name, self.cfg = ctx, name, cfg
        self.keys = [k for k, _ in ctx.model.named_parameters()]
        self.sigma = ctx.init_state()  # model keys: σ's parameters and the model's buffers
        self.psi = {PSI + k: cfg.psi_factor * self.sigma[k] for k in self.keys}
        if cfg.labels == "server":
            x, y = server_labeled_set(ctx, name)
            self.server_data = {"main": {"x": x, "y": y}}
            self.server_task = LocalTask(loss=server_loss(cfg, self.keys), optimizer=ctx.optimizer(lr=cfg.lr),
                                         epochs=cfg.server_epochs, streams=(Stream("main", cfg.server_batch_size),),
                                         trainable=frozenset(self.keys))
        elif not any(c.y_sup.shape[0] for c in ctx.clients):
            raise ValueError(f"{name}: labels = \"client\" needs labelled data on the clients; [data] partition "
                             f"{ctx.data_cfg.partition!r} gives them none (use labels = \"server\" or fedmatch)")
        self.noise = noise_image(ctx, tuple(ctx.input_shape))
        self.bits_sigma = ctx.model_bits
        self.bits_psi = ctx.bits_of(self.keys)
        self.tasks: dict[int, LocalTask] = {}
        self.vectors: dict[int, np.ndarray] = {}  # client → embedding of its latest restored model
        self.helper_psi: dict[int, Params] = {}  # client → its latest arrived ψ
        self.selected: tuple[int, ...] = ()
        self.helpers: dict[int, list[int]] = {}

    def task(self, n_helpers: int) -> LocalTask:
        """The client task with ``n_helpers`` helpers (cached): trainable ψ (and σ at the clients)."""
        if n_helpers not in self.tasks:
            ctx, cfg = self.ctx, self.cfg
            strong = ctx.augmentation("strong")
            trainable = {PSI + k for k in self.keys}
            streams = (Stream("unl", cfg.batch_size),)
            passes = {"unl": 2.0 + n_helpers / 3.0}  # f(u) and f(RandAug(u)) trained, H helper forwards
            if cfg.labels == "client":
                trainable |= set(self.keys)
                streams = (Stream("lab", cfg.labeled_batch_size),) + streams
                passes["lab"] = 1.0
            self.tasks[n_helpers] = LocalTask(
                loss=client_loss(cfg, self.keys, n_helpers), optimizer=ctx.optimizer(lr=cfg.lr),
                epochs=ctx.epochs, streams=streams, views=(View("u_strong", "u", strong),),
                trainable=frozenset(trainable), passes=passes, report_stream="unl",
            )
        return self.tasks[n_helpers]

    def streams(self, d: int) -> dict:
        c = self.ctx.clients[d]
        out = {"unl": {"u": c.x_unl, TRUTH: c.y_unl_hidden}}  # TRUTH: scored against, never trained on
        if self.cfg.labels == "client":
            out = {"lab": {"x": c.x_sup, "y": c.y_sup}, **out}
        return out

    def sizes(self, d: int) -> dict:
        return {s: next(iter(t.values())).shape[0] for s, t in self.streams(d).items()}

    def helper_round(self, round_index: int) -> bool:
        return self.cfg.n_helpers > 0 and (round_index + 1) % self.cfg.helper_interval == 0

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx, cfg = self.ctx, self.cfg
        self.selected = sample_clients(ctx, view.round_index, ctx.run_cfg.clients_per_round, view)
        on = self.helper_round(view.round_index)
        self.helpers = {d: choose_helpers(self.vectors, d, cfg.n_helpers) if on else [] for d in self.selected}
        up = self.bits_psi + (self.bits_sigma if cfg.labels == "client" else 0)
        work = tuple(
            DeviceWork(device=d, compute_cycles={"train": task_cycles(self.task(len(self.helpers[d])), self.sizes(d),
                                                                      ctx.cycles_per_sample)},
                       upload_bits=float(up),
                       download_bits=float(self.bits_sigma + self.bits_psi * (1 + len(self.helpers[d]))))
            for d in self.selected
        )
        before = {}
        if cfg.labels == "server":
            n = self.server_data["main"]["y"].shape[0]
            before = {"train_sigma": task_cycles(self.server_task, {"main": n}, ctx.cycles_per_sample)}
        after = {"embed": forward_cycles(ctx.cycles_per_sample, 1, len(self.selected))}
        info = {"K": len(self.selected), "helpers": float(sum(len(h) for h in self.helpers.values()))}
        return RoundPlan(work, info, server_cycles=before, server_cycles_after=after)

    def global_state(self) -> Params:
        """θ = σ + thresholded ψ (with the model's buffers): the model evaluated."""
        return {**self.sigma, **compose(self.sigma, self.psi, self.keys, self.cfg.l1_threshold)}

    def _train_clients(self, r: int, sel: list[int]) -> tuple[list[Params], LocalTrainResult]:
        """Train every selected client (grouped by helper count); their states in ``sel``'s order."""
        states: dict[int, Params] = {}
        losses, steps, aux = {}, {}, {}
        for h in sorted({len(self.helpers[d]) for d in sel}):
            group = [d for d in sel if len(self.helpers[d]) == h]
            starts = []
            for d in group:
                extra = {helper_prefix(i) + k: self.helper_psi[j][PSI + k]
                         for i, j in enumerate(self.helpers[d]) for k in self.keys}
                starts.append({**self.sigma, **self.psi, **extra})
            labeller = {**self.sigma, **compose(self.sigma, self.psi, self.keys, None)}  # σ + ψ: what L_u labels with
            res = train_devices(self.ctx, self.name, r, group, starts, [self.streams(d) for d in group], self.task(h),
                                labellers=[labeller] * len(group))
            for i, d in enumerate(group):
                states[d] = {k: v for k, v in res.params[i].items() if not k.startswith("helper")}
                losses[d], steps[d] = res.mean_loss[i], res.n_steps[i]
                aux[d] = {k: v[i] for k, v in res.aux.items()}
        names = sorted({k for a in aux.values() for k in a})
        result = LocalTrainResult([states[d] for d in sel], [losses[d] for d in sel], [steps[d] for d in sel],
                                  {k: [aux[d].get(k, float("nan")) for d in sel] for k in names})
        return result.params, result

    def _embed(self, theta: Mapping[str, torch.Tensor]) -> np.ndarray:
        from torch.func import functional_call

        model = self.ctx.model
        was = model.training
        model.eval()
        try:
            with torch.no_grad():
                out = functional_call(model, dict(theta), (self.noise,))
        finally:
            model.train(was)
        return F.softmax(out, -1).double().cpu().numpy().reshape(-1)

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        ctx, cfg, r, sel = self.ctx, self.cfg, outcome.round_index, list(self.selected)
        metrics: dict[str, float] = {}
        if outcome.server_cut:  # σ's phase did not finish, nothing was broadcast: σ, ψ and the clients unchanged
            nan = float("nan")
            return {"server_loss": nan, **shared_model_metrics(ctx, self.global_state()), "train_loss": nan,
                    **NO_STEPS, **({"server_steps": 0.0} if cfg.labels == "server" else {})}
        if cfg.labels == "server":
            res = train_at_server(ctx, self.name, r, {**self.sigma, **self.psi}, self.server_data, self.server_task)
            self.sigma = {k: res.params[0][k] for k in self.sigma}
            metrics["server_loss"] = res.mean_loss[0]
            metrics["server_steps"] = float(res.n_steps[0])
        states, result = self._train_clients(r, sel)
        arrived = [(d, s) for d, s in zip(sel, states) if d in set(outcome.arrived)]
        if arrived:
            n = len(arrived)
            self.psi = {k: sum(s[k] for _, s in arrived) / n for k in self.psi}
            if cfg.labels == "client":
                self.sigma = {k: (sum(s[k] for _, s in arrived) / n if v.is_floating_point() else arrived[0][1][k])
                              for k, v in self.sigma.items()}
            for d, s in arrived:  # the server restores each arrived model and embeds it (after the uploads)
                sigma_d = {k: s[k] for k in self.sigma} if cfg.labels == "client" else self.sigma
                self.vectors[d] = self._embed({**sigma_d, **compose(sigma_d, s, self.keys, None)})
                self.helper_psi[d] = {k: s[k] for k in self.psi}
        metrics.update(shared_model_metrics(ctx, self.global_state()))
        metrics.update({"train_loss": mean_loss(result), **aux_metrics(result), **step_metrics(result)})
        return metrics

    def state_dict(self) -> dict:
        return {
            "sigma": to_cpu(self.sigma), "psi": to_cpu(self.psi),
            "vectors": {str(d): v.tolist() for d, v in self.vectors.items()},
            "helper_psi": {str(d): to_cpu(p) for d, p in self.helper_psi.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        self.sigma = to_device(self.ctx, state["sigma"])
        self.psi = to_device(self.ctx, state["psi"])
        self.vectors = {int(d): np.asarray(v, dtype=float) for d, v in state["vectors"].items()}
        self.helper_psi = {int(d): to_device(self.ctx, p) for d, p in state["helper_psi"].items()}


@register("fedmatch", FedMatchConfig, "FedMatch, labels at the server: sigma trained at the server, sparse psi at the "
          "clients, helpers by nearest outputs", display="FedMatch")
def build_fedmatch(ctx: Context, cfg: FedMatchConfig) -> FedMatch:
    return FedMatch(ctx, "fedmatch", cfg)


@register("fedmatch_lc", FedMatchLCConfig, "FedMatch, labels at the clients: sigma and psi trained and averaged from "
          "the clients", display="FedMatch (labels at client)")
def build_fedmatch_lc(ctx: Context, cfg: FedMatchConfig) -> FedMatch:
    return FedMatch(ctx, "fedmatch_lc", cfg)
