"""The FedAvg family: one round loop, its variants as config values (docs/model/fedavg_family.md).

One round (FedAvg, McMahan et al., AISTATS 2017, Alg. 1): K devices are
sampled; each downloads the global part of the model, trains ``I`` local
epochs and uploads the global part; the server averages the uploads that
*arrived* (the engine's deadline may drop some), weighted by the samples each
device trained on. What varies, each a config value:

- ``objective`` — ``"supervised"`` (cross-entropy on labelled data);
  ``"fixmatch"`` (Sohn et al. 2020) or ``"uda"`` (Xie et al. 2020) on the
  labelled stream plus an unlabelled stream of μB weak/strong views
  (``edgesim.learning.objectives``);
- ``data`` — ``"labeled"`` (the labelled data only; FedDure's FedAvg*) or
  ``"all_labels"`` (the unlabelled data too, with its true labels: the
  fully-supervised ``-SL`` upper bounds);
- ``mu`` — FedProx's proximal weight (Li et al., MLSys 2020, Eq. 2; μ = 0 is
  FedAvg exactly);
- ``local`` — the keys that never leave the device: ``"batchnorm"`` (FedBN,
  Li et al., ICLR 2021: every BatchNorm weight, bias and statistic),
  ``"head"`` (FedPer, Arivazhagan et al. 2019: the last linear layer),
  ``"lg"`` (LG-FedAvg, Liang et al. 2020: everything but the last
  ``lg_global_layers`` weight layers, which are averaged and copied to *all*
  devices), or ``"none"``;
- ``server_optimizer`` — the server step after averaging
  (:mod:`edgesim.learning.server_optim`): ``"sgd"`` with ``server_lr = 1`` is FedAvg;
  ``"momentum"`` (FedAvgM), ``"adam"`` (FedAdam), ``"yogi"`` (FedYogi).

The server step is the family's aggregation hook: :meth:`FedAvg.server_step`
takes the arrived ``(state, weight)`` uploads and sets the global model; a
variant overrides that one method (docs/extend/writing_an_algorithm.md).

Bits are what is sent: the global keys' share of the model's numbers ×
``model_bits`` up and down (FedBN sends no BatchNorm tensor, FedPer no head,
LG-FedAvg only its global layers — to every device, selected or not). Cycles
are the task's real passes (``edgesim.learning.costs.task_cycles``): FixMatch trains
B labelled and 2μB unlabelled rows per step.

Compression (``[compression]``, docs/model/compression.md): the download is the
global keys' model, encoded once per round; the upload is each device's
update (its trained global keys minus the model it downloaded), encoded with
its error-feedback residual; the server adds the decoded updates' average to
its own model. Compression off, nothing of this runs.

Evaluation: the model each device would use — the global model with its own
local keys — on its test set (mean and spread over devices), and as the
labeller of its unlabelled data. With ``ema_decay = d`` the global part is an
exponential moving average of the global model instead, kept by the server
and updated after every aggregation, ``ē ← d·ē + (1 − d)·w`` from ``ē = w₀``
(:func:`edgesim.learning.optim.ema_update`): FixMatch's evaluation model
(Sohn et al., NeurIPS 2020, §4) with a round for a step. Training never sees
it; it is checkpointed with the run.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn

from edgesim.backend import RoundOutcome, RoundPlan, SystemView
from edgesim.learning.aggregation import merge, over_the_air_average, split_keys, weighted_average
from edgesim.learning.algorithms import register_variants
from edgesim.learning.algorithms.common import (
    arrived_updates,
    clone_state,
    round_metrics,
    sample_clients,
    to_cpu,
    to_device,
    train_devices,
    training_plan,
)
from edgesim.learning.algorithms.fedavg.config import (  # noqa: F401 - re-exported
    DATA,
    LOCAL,
    OBJECTIVES,
    VARIANTS,
    FedAdamConfig,
    FedAvgConfig,
    FedAvgMConfig,
    FedBNConfig,
    FedProxConfig,
    FedYogiConfig,
)
from edgesim.learning.compression import transfers_for
from edgesim.learning.context import Context
from edgesim.learning.costs import task_cycles
from edgesim.learning.label_quality import TRUTH
from edgesim.learning.objectives import cross_entropy_loss, fixmatch_loss, uda_loss
from edgesim.learning.optim import ema_update, make_schedule
from edgesim.learning.server_optim import ServerOptimizer
from edgesim.learning.tasks import LocalTask, Stream, View

# --------------------------------------------------------------------------- which keys stay on the device


def batchnorm_keys(model: nn.Module) -> frozenset[str]:
    """State-dict keys that belong to BatchNorm layers (weights, biases, running statistics)."""
    keys = set()
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            keys.update(f"{name}.{k}" for k in m.state_dict())
    return frozenset(keys)


def _weight_layers(model: nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if isinstance(m, (nn.modules.conv._ConvNd, nn.Linear, nn.EmbeddingBag))]


def head_keys(model: nn.Module) -> frozenset[str]:
    """FedPer's personal layer: the keys of the model's last linear layer."""
    linear = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not linear:
        raise ValueError(f"{type(model).__name__} has no linear layer to keep as FedPer's head")
    return frozenset(k for k in model.state_dict() if k.startswith(linear[-1] + "."))


def lg_personal_keys(model: nn.Module, n_global: int) -> frozenset[str]:
    """LG-FedAvg's personal keys: all but the last ``n_global`` weight layers (and the BatchNorms after the first)."""
    layers = _weight_layers(model)
    if n_global > len(layers):
        raise ValueError(f"lg_global_layers(={n_global}) exceeds the {len(layers)} weight layers of "
                         f"{type(model).__name__}")
    order = [n for n, _ in model.named_modules()]
    first = order.index(layers[-n_global])
    global_modules = [n for n in order[first:] if n]
    keys = model.state_dict().keys()
    return frozenset(k for k in keys if not any(k.startswith(g + ".") for g in global_modules))


def personal_keys(model: nn.Module, cfg: FedAvgConfig) -> frozenset[str]:
    if cfg.local == "batchnorm":
        return batchnorm_keys(model)
    if cfg.local == "head":
        return head_keys(model)
    if cfg.local == "lg":
        return lg_personal_keys(model, cfg.lg_global_layers)
    return frozenset()


# --------------------------------------------------------------------------- the client task


def make_task(ctx: Context, cfg: FedAvgConfig) -> LocalTask:
    """The local training of one round for ``cfg``'s objective, optimizer and proximal term."""
    t = ctx.train_cfg
    opt = ctx.optimizer(optimizer=cfg.optimizer, lr=cfg.lr, nesterov=cfg.nesterov)
    schedule = make_schedule(cfg.schedule or t.schedule)
    epochs = 1 if ctx.per_device_epochs else ctx.epochs  # per-device I_k: FedAvg.task_for sets each client's
    if cfg.objective == "supervised":
        return LocalTask(loss=cross_entropy_loss("x"), optimizer=opt, epochs=epochs, schedule=schedule,
                         streams=(Stream("main", t.batch_size),), prox_mu=cfg.mu)
    weak, strong = ctx.augmentation("weak"), ctx.augmentation("strong")
    if cfg.objective == "fixmatch":
        loss = fixmatch_loss(cfg.threshold, cfg.lambda_u)
    else:
        loss = uda_loss(cfg.uda_threshold, cfg.uda_temperature, cfg.uda_lambda, cfg.uda_ramp_steps)
    return LocalTask(
        loss=loss, optimizer=opt, epochs=epochs, schedule=schedule, prox_mu=cfg.mu,
        streams=(Stream("lab", t.batch_size), Stream("unl", cfg.unlabeled_ratio * t.batch_size)),
        views=(View("x_aug", "x", weak), View("u_weak", "u", weak), View("u_strong", "u", strong)),
        passes={"lab": 1.0, "unl": 2.0},
    )


def client_streams(ctx: Context, cfg: FedAvgConfig, d: int) -> dict:
    """Device ``d``'s data as the task's streams (the unlabelled stream carries the hidden true labels under
    ``TRUTH``, read only to score the pseudo-labels, ``edgesim.learning.label_quality``)."""
    c = ctx.clients[d]
    if cfg.objective != "supervised":
        return {"lab": {"x": c.x_sup, "y": c.y_sup}, "unl": {"u": c.x_unl, TRUTH: c.y_unl_hidden}}
    if cfg.data == "all_labels":
        return {"main": {"x": torch.cat([c.x_sup, c.x_unl]), "y": torch.cat([c.y_sup, c.y_unl_hidden])}}
    return {"main": {"x": c.x_sup, "y": c.y_sup}}


# --------------------------------------------------------------------------- the backend


class FedAvg:
    """The FedAvg family as a :class:`edgesim.backend.LearningBackend` (module docstring)."""

    def __init__(self, ctx: Context, name: str, cfg: FedAvgConfig):
        self.ctx, self.name, self.cfg = ctx, name, cfg
        self.task = make_task(ctx, cfg)
        keep = personal_keys(ctx.model, cfg)
        self.is_personal = keep.__contains__
        self.global_state, first_personal = split_keys(ctx.init_state(), self.is_personal)
        self.personal = [clone_state(first_personal) for _ in range(ctx.n_devices)]
        self.data = [client_streams(ctx, cfg, d) for d in range(ctx.n_devices)]  # built once (the -SL joins copy)
        self.sizes = [{s: next(iter(t.values())).shape[0] for s, t in streams.items()} for streams in self.data]
        self.bits = ctx.bits_of(list(self.global_state))
        self.transfers = transfers_for(ctx, list(self.global_state))
        self.selected: tuple[int, ...] = ()
        self.server_opt = ServerOptimizer(cfg.server_optimizer, cfg.server_lr, cfg.server_momentum, cfg.server_beta2,
                                          cfg.server_tau, trainable=(n for n, _ in ctx.model.named_parameters()))
        self.ema = None if cfg.ema_decay is None else clone_state(self.global_state)

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx = self.ctx
        self.selected = sample_clients(ctx, view.round_index, ctx.run_cfg.clients_per_round, view)
        return self.plan_for(self.selected)

    def plan_for(self, selected) -> RoundPlan:
        """The round plan of ``selected``: each trains the task and sends the global keys both ways (LG-FedAvg:
        every device receives them)."""
        ctx = self.ctx
        cycles = {d: self.cycles_of(d) for d in selected}
        listeners = range(ctx.n_devices) if self.cfg.local == "lg" else ()
        t = self.transfers
        up, down = (self.bits, self.bits) if t is None else (t.up_bits, t.down_bits)
        return training_plan(selected, cycles, up, down, listeners=listeners)

    def task_for(self, devices) -> LocalTask:
        """The local task of ``devices`` (in that order): the family's task, each device its own I_k epochs when
        ``workload.local_iterations`` differs by device (:meth:`edgesim.learning.context.Context.epochs_of`)."""
        if not self.ctx.per_device_epochs:
            return self.task
        return dataclasses.replace(self.task, client_epochs=tuple(self.ctx.epochs_of(d) for d in devices))

    def cycles_of(self, device: int) -> float:
        """Device ``device``'s training cycles in a round: its task's real passes over its data
        (:func:`edgesim.learning.costs.task_cycles`) for its own I_k epochs — what the clock charges for the work
        :meth:`task_for` trains."""
        task = self.task
        if self.ctx.per_device_epochs:
            task = dataclasses.replace(task, epochs=self.ctx.epochs_of(device))
        return task_cycles(task, self.sizes[device], self.ctx.cycles_per_sample)

    def complete_round(self, outcome: RoundOutcome) -> dict[str, float]:
        updates, result, extra = self.learn(outcome, self.selected, self.global_state)
        self.server_step(updates)
        self.advance_ema()
        return {**self.metrics(result), **extra}

    def learn(self, outcome: RoundOutcome, sel, model: dict) -> tuple[list[tuple[dict, float]], object, dict]:
        """One round's learning from the server model ``model``: ``sel`` receive it, train, and upload; the
        (global keys' state, weight) of each upload that arrived as the server has it, the training result and
        the compression metrics. The round of :meth:`complete_round` and of each edge server (HierFAVG)."""
        ctx, t, r = self.ctx, self.transfers, outcome.round_index
        sent, down_error = (model, None) if t is None else t.download(r, model)
        starts = [merge(sent, self.personal[d]) for d in sel]
        data = [self.data[d] for d in sel]
        result = train_devices(ctx, self.name, r, sel, starts, data, self.task_for(sel))
        shared = []
        for d, state in zip(sel, result.params):
            g, personal = split_keys(state, self.is_personal)
            self.personal[d] = personal  # personal keys never leave the device, whatever the uplink did
            shared.append(g)
        extra = {}
        if t is not None:  # what the server rebuilds from the encoded updates
            shared, up_errors = t.upload(r, sel, [sent] * len(sel), shared, model)
            extra = t.metrics(up_errors, down_error)
        weights = [1.0 if self.cfg.weighting == "uniform" else float(sum(self.sizes[d].values())) for d in sel]
        updates = arrived_updates(outcome, sel, shared, weights)
        noise_var = getattr(outcome, "over_the_air_noise_var", None)
        if noise_var is not None and updates:  # AirComp: the server received their sum plus the channel's noise
            generator = torch.Generator().manual_seed(ctx.seed_for(r, "over_the_air"))
            updates = [(over_the_air_average(updates, noise_var, generator), 1.0)]
        return updates, result, extra

    def advance_ema(self) -> None:
        """After an aggregation: the evaluation model's step ``ē ← d·ē + (1 − d)·w`` (nothing without ``ema_decay``)."""
        if self.ema is not None:
            self.ema = ema_update(self.ema, self.global_state, self.cfg.ema_decay)

    def metrics(self, result) -> dict[str, float]:
        """The round's metrics (:func:`round_metrics`) of the evaluated model: the global part (or its moving
        average, ``ema_decay``) with each device's local keys."""
        evaluated = self.global_state if self.ema is None else self.ema
        if any(self.personal):
            return round_metrics(self.ctx, [merge(evaluated, p) for p in self.personal], result)
        return round_metrics(self.ctx, [evaluated] * self.ctx.n_devices, result, shared=evaluated)

    def server_step(self, updates: list[tuple[dict, float]]) -> None:
        """The aggregation hook: the round's arrived uploads, ``(global keys' state, weight)`` each (none when
        every upload was dropped), become ``self.global_state``.

        FedAvg: their weighted average, then the server optimizer's step (:meth:`aggregate`). A variant overrides
        this method alone (a robust aggregate, another server rule); the round loop stays this class's."""
        self.global_state = self.aggregate(self.global_state, updates)

    def aggregate(self, model: dict, updates: list[tuple[dict, float]]) -> dict:
        """The server model after ``updates``: their weighted average, then the server optimizer's step from
        ``model``; ``model`` itself when nothing (of weight > 0) arrived."""
        if updates and sum(w for _, w in updates) > 0:
            return self.server_opt.step(model, weighted_average(updates))
        return model

    def asynchronous(self):
        """This backend under FedAsync/FedBuff (:class:`AsyncFedAvg`, docs/model/asynchrony.md): the family's mode
        without rounds."""
        from edgesim.learning.algorithms.fedavg.asynchronous import AsyncFedAvg  # it wraps this class

        return AsyncFedAvg(self)

    def hierarchical(self):
        """This backend under ``round_mode = "hierarchical"`` (:class:`HierFedAvg`, HierFAVG; docs/model/hierarchy.md):
        an edge model per cell, a cloud model over them."""
        from edgesim.learning.algorithms.fedavg.hierarchical import HierFedAvg  # it wraps this class

        return HierFedAvg(self)

    def state_dict(self) -> dict:
        out = {"global": to_cpu(self.global_state), "personal": [to_cpu(p) for p in self.personal],
               "server": self.server_opt.state_dict()}
        if self.transfers is not None:
            out["transfers"] = self.transfers.state_dict()
        if self.ema is not None:
            out["ema"] = to_cpu(self.ema)
        return out

    def load_state_dict(self, state: dict) -> None:
        self.global_state = to_device(self.ctx, state["global"])
        self.personal = [to_device(self.ctx, p) for p in state["personal"]]
        if "server" in state:
            self.server_opt.load_state_dict(state["server"], self.ctx.device)
        if self.transfers is not None and "transfers" in state:
            self.transfers.load_state_dict(state["transfers"])
        if self.ema is not None:
            self.ema = to_device(self.ctx, state["ema"])


# --------------------------------------------------------------------------- the registered variants


register_variants(VARIANTS, FedAvg)
