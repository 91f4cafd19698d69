"""Round scaffolding every algorithm calls: sampling, round plans, training the selected devices,
collecting the arrived uploads, evaluation, metrics, divergence checks, checkpoint state.

An algorithm module keeps only what is its own (config, loss or step,
server step, costs); the loop around it is these functions.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Sequence

import numpy as np
import torch

from edgesim.backend import DeviceLoss, DeviceWork, Diverged, RoundPlan
from edgesim.learning.context import Context
from edgesim.learning.costs import task_cycles
from edgesim.learning.inference import evaluate
from edgesim.learning.label_quality import TRUTH, start_label_rates
from edgesim.learning.label_quality import finish as finish_label_metrics
from edgesim.learning.phases import phase
from edgesim.learning.tasks import LocalTask, LocalTrainResult, Stream

Params = dict[str, torch.Tensor]


class DivergenceError(Diverged):
    """Training produced a NaN or infinite loss; the message names the algorithm, device and round."""


def sample_clients(ctx: Context, round_index: int, k: int, view=None) -> tuple[int, ...]:
    """K of the N devices, uniformly without replacement, from rng(seed, "sample", round); sorted.

    With a ``[resources] scheduling`` policy, the first K of its ranking (``view.schedule``; fewer when it rules
    devices out), sorted."""
    n = ctx.n_devices
    k = min(k, n)
    if view is not None and view.schedule is not None:
        return tuple(sorted(int(i) for i in view.schedule[:k]))
    return tuple(sorted(int(i) for i in ctx.rng("sample", round_index).choice(n, size=k, replace=False)))


def sgd_task(ctx: Context, *, epochs: int | None = None, lr: float | None = None, momentum: float | None = None,
             weight_decay: float | None = None, batch_size: int | None = None) -> LocalTask:
    """Supervised local SGD as a :class:`LocalTask`: mean cross-entropy on one stream ``main`` of
    ``(x, y[, w])``, plain SGD (``[train]`` lr, momentum, weight decay), ``batch_size`` samples per step
    (default ``[train] batch_size``) and ``epochs`` passes (default I, :attr:`Context.epochs`);
    any of them given here replaces the run's. Local, FedFomo, FedBE and DoFed-SPP train with it.
    """
    from edgesim.learning.objectives import cross_entropy_loss
    from edgesim.learning.optim import SGD

    t = ctx.train_cfg

    def pick(value, default):
        return default if value is None else value

    return LocalTask(
        loss=cross_entropy_loss("x"),
        optimizer=SGD(pick(lr, float(t.lr)), pick(momentum, float(t.momentum)),
                      pick(weight_decay, float(t.weight_decay))),
        epochs=pick(epochs, ctx.epochs),
        streams=(Stream("main", pick(batch_size, t.batch_size)),),
    )


def sgd_cycles(ctx: Context, task: LocalTask, n_samples: int) -> float:
    """Cycles of one round of a :func:`sgd_task` on ``n_samples`` samples (:func:`edgesim.learning.costs.task_cycles`:
    ``epochs · C_tra · D``, Eq. 7)."""
    return task_cycles(task, {"main": n_samples}, ctx.cycles_per_sample)


def sampled_training_plan(ctx: Context, selected: Sequence[int]) -> RoundPlan:
    """The round plan of a FedAvg-style round: each selected device downloads the model (m bits),
    trains on its labelled data (I·C_tra·D cycles) and uploads it (m bits)."""
    task = sgd_task(ctx)
    cycles = {d: sgd_cycles(ctx, task, ctx.clients[d].y_sup.shape[0]) for d in selected}
    return training_plan(selected, cycles, ctx.model_bits, ctx.model_bits)


def training_plan(
    selected: Sequence[int],
    train_cycles: Mapping[int, float],
    upload_bits: float,
    download_bits: float,
    *,
    listeners: Sequence[int] = (),
    info: Mapping[str, float] | None = None,
) -> RoundPlan:
    """A round in which ``selected`` download ``download_bits``, compute their ``"train"`` cycles and upload
    ``upload_bits``; ``listeners`` (devices not selected) only receive the same download."""
    work = [
        DeviceWork(device=d, compute_cycles={"train": float(train_cycles[d])}, upload_bits=float(upload_bits),
                   download_bits=float(download_bits))
        for d in selected
    ]
    chosen = set(selected)
    work += [DeviceWork(device=d, download_bits=float(download_bits)) for d in listeners if d not in chosen]
    work.sort(key=lambda w: w.device)
    return RoundPlan(tuple(work), info={"K": len(selected), **(info or {})})


def train_devices(
    ctx: Context,
    name: str,
    round_index: int,
    devices: Sequence[int],
    starts: Sequence[Mapping[str, torch.Tensor]],
    data: Sequence,
    task: LocalTask,
    stream: str = "train",
    labellers: Sequence[Mapping[str, torch.Tensor]] | None = None,
) -> LocalTrainResult:
    """Run ``task`` on ``devices`` with the run's executor and their derived generators; check for divergence.

    Generators come from ``(seed, stream, round, device)`` — not from the
    algorithm's name — so every algorithm of a run draws the same batch
    orders, dropout and augmentations for a device in a round (common random
    numbers, docs/use/metrics.md), and a device's randomness never depends on
    which other devices train with it. ``name`` only names the algorithm in a
    divergence error. With a ``ctx.loss_log`` (a ``[resources]`` scheduling policy is set) each device's
    loss statistic is recorded first (:func:`device_losses`): every algorithm that trains here feeds Oort.

    A pseudo-labelling task (a stream of ``data`` carries the hidden labels, ``TRUTH``) also gets the one-rule
    label figures of the model each device starts from (:func:`start_label_aux`) in its ``aux``: ``labellers``,
    the models (``ctx.model``'s keys) the devices label with at their first step, when a start holds more or other
    keys than that model (FedMatch's σ and ψ: σ + ψ); default each start's model keys.
    """
    if ctx.loss_log is not None:
        ctx.loss_log.record(devices, device_losses(ctx, devices, starts))
    start_aux = {}
    if any(isinstance(s, Mapping) and TRUTH in s for d in data if isinstance(d, Mapping) for s in d.values()):
        start_aux = start_label_aux(ctx, devices, starts if labellers is None else labellers)
    gens = [ctx.generator(stream, round_index, d) for d in devices]
    with phase("training"):
        result = ctx.executor.run(ctx.model, task, list(starts), list(data), gens)
    check_losses(name, round_index, devices, result)
    if start_aux:
        result = dataclasses.replace(result, aux={**result.aux, **start_aux})
    return result


def start_label_rates_of(ctx: Context, devices: Sequence[int],
                         labellers: Sequence[Mapping[str, torch.Tensor]]) -> list[dict[str, float]]:
    """Per device, :func:`edgesim.learning.label_quality.start_label_rates` of the model ``labellers[i]`` on
    device ``devices[i]``'s unlabelled rows against their hidden labels (one eval-mode forward pass, no draw,
    host time only; ``{}`` for a device without unlabelled rows, or outside the labelling diagnostic's devices
    of this round, :func:`due_devices` — none in a round not evaluated)."""
    from edgesim.learning.inference import predict_proba

    keys = ctx.model.state_dict().keys()
    due = set(due_devices(ctx, labels=True) or ())
    out = []
    with phase("labelling"):
        for d, state in zip(devices, labellers):
            c = ctx.clients[d]
            if c.x_unl.shape[0] == 0 or d not in due:
                out.append({})
                continue
            with torch.no_grad():
                p = predict_proba(ctx.model, [{k: state[k] for k in keys}], c.x_unl,
                                  batch_size=ctx.train_cfg.eval_batch_size, vectorize=False)[0]
            out.append(start_label_rates(p.float(), c.y_unl_hidden))
    return out


def start_label_aux(ctx: Context, devices: Sequence[int],
                    labellers: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, list[float]]:
    """:func:`start_label_rates_of` as per-device aux lists (NaN for a device without unlabelled rows), the form
    :func:`aux_metrics` averages over the devices that trained."""
    rates = start_label_rates_of(ctx, devices, labellers)
    names = sorted({k for r in rates for k in r})
    return {k: [r.get(k, float("nan")) for r in rates] for k in names}


class LossLog:
    """Each trained device's :class:`edgesim.backend.DeviceLoss` since the last :meth:`take` — the run's source of
    ``Simulation(device_losses=...)``, read by the engine after every round. A device trained twice in a round
    (two models, two groups) keeps its first statistic: the round's first local training."""

    def __init__(self) -> None:
        self._losses: dict[int, DeviceLoss] = {}

    def record(self, devices: Sequence[int], losses: Sequence[DeviceLoss]) -> None:
        for d, loss in zip(devices, losses):
            self._losses.setdefault(int(d), loss)

    def take(self) -> dict[int, DeviceLoss]:
        out, self._losses = self._losses, {}
        return out


def device_losses(ctx: Context, devices: Sequence[int], starts: Sequence[Mapping[str, torch.Tensor]]
                  ) -> list[DeviceLoss]:
    """Oort's input per device (Lai et al., OSDI 2021, §4.2): ``Σ_k L(k)²`` and ``|B_i|`` over the device's
    labelled training samples ``B_i`` (``ctx.clients[d].x_sup``), ``L(k)`` the cross-entropy (nats) of sample k
    under the model the device starts its local training from — the per-sample losses of the first pass of its
    training, taken in one forward pass before it (eval mode: BatchNorm on running statistics, no dropout; no
    random stream is drawn, so the training is the same with or without it). Oort records them during training
    at no cost; here the pass costs host time only, never simulated time. A device without labelled samples
    reports ``(0, 0)``; a semi-supervised method's unlabelled samples have no loss of their own and do not count.
    """
    import torch.nn.functional as F

    from edgesim.learning.inference import logits

    keys = ctx.model.state_dict().keys()
    out = []
    for d, start in zip(devices, starts):
        c = ctx.clients[d]
        n = int(c.y_sup.shape[0])
        if n == 0:
            out.append(DeviceLoss(0.0, 0))
            continue
        with torch.no_grad():
            z = logits(ctx.model, [{k: start[k] for k in keys}], c.x_sup,
                       batch_size=ctx.train_cfg.eval_batch_size, vectorize=False)[0]
            loss = F.cross_entropy(z.float(), c.y_sup, reduction="none").double()
        out.append(DeviceLoss(float((loss * loss).sum()), n))
    return out


def arrived_updates(
    outcome,
    devices: Sequence[int],
    states: Sequence[Mapping[str, torch.Tensor]],
    weights: Sequence[float],
) -> list[tuple[Mapping[str, torch.Tensor], float]]:
    """(state, weight) of the devices whose upload arrived this round (the engine's deadline may drop some)."""
    arrived = set(outcome.arrived)
    return [(s, float(w)) for d, s, w in zip(devices, states, weights) if d in arrived]


def round_metrics(ctx: Context, models: Sequence[Mapping[str, torch.Tensor]], result: LocalTrainResult,
                  shared: Mapping[str, torch.Tensor] | None = None) -> dict[str, float]:
    """A round's metrics: each device's model on its test set (``shared``: one model for all, evaluated in one
    pass), the training loss, the loss's aux values and, where there is unlabelled data, the labelling accuracy."""
    accs = evaluate_shared(ctx, shared) if shared is not None else evaluate_personal(ctx, models)
    metrics = {**accuracy_metrics(accs), "train_loss": mean_loss(result), **aux_metrics(result),
               **step_metrics(result)}
    if has_unlabeled(ctx):
        metrics.update(accuracy_metrics(labeling_accuracy(ctx, models), "labeling_accuracy"))
    return metrics


def step_metrics(*results: LocalTrainResult) -> dict[str, float]:
    """The round's local optimiser steps (``rounds.csv``; docs/use/metrics.md).

    ``S_k`` = the steps device k took this round, summed over ``results`` (the round's local training runs,
    aligned device by device: DoFed-SPP's target and recognition models, …). A run of ``E`` epochs takes
    ``E·⌈n_lead / B_lead⌉`` steps, the lead stream being the one with the most batches per epoch
    (``edgesim.learning.executors.task_schedule``: FixMatch's unlabelled stream of μB rows, a supervised
    task's only stream). ``local_steps = Σ_k S_k`` over the devices that trained;
    ``local_steps_per_device`` = that sum over their number (0 when none trained).
    """
    per_device = [sum(steps) for steps in zip(*(r.n_steps for r in results))] if results else []
    total = float(sum(per_device))
    return {"local_steps": total, "local_steps_per_device": total / len(per_device) if per_device else 0.0}


NO_STEPS = {"local_steps": 0.0, "local_steps_per_device": 0.0}
"""A round in which no device trained."""


def aux_metrics(result: LocalTrainResult) -> dict[str, float]:
    """Mean over the devices that took a step of each aux value the loss reported (e.g. ``mask_rate``); the
    pseudo-label tallies become ``pseudo_label_accuracy``/``_all`` (:func:`edgesim.learning.label_quality.finish`)."""
    out = {}
    for k, vals in result.aux.items():
        v = [x for x, s in zip(vals, result.n_steps) if s > 0 and not math.isnan(x)]
        if v:
            out[k] = float(np.mean(v))
    return finish_label_metrics(out)


def check_losses(algorithm: str, round_index: int, devices: Sequence[int], result: LocalTrainResult) -> None:
    """Raise :class:`DivergenceError` naming the first device whose training loss is NaN or infinite.

    A device that took no step (no samples) reports NaN by design and is not divergence.
    """
    for d, loss, steps in zip(devices, result.mean_loss, result.n_steps):
        if steps > 0 and not math.isfinite(loss):
            raise DivergenceError(
                f"{algorithm}: training diverged on device {d} in round {round_index} (mean loss = {loss}); "
                f"lower train.lr or check the data"
            )


def mean_loss(result: LocalTrainResult) -> float:
    """Mean training loss over the devices that took at least one step (NaN if none did)."""
    vals = [loss for loss, s in zip(result.mean_loss, result.n_steps) if s > 0]
    return float(np.mean(vals)) if vals else float("nan")


def accuracy_metrics(accuracies: Sequence[float] | None, prefix: str = "accuracy") -> dict[str, float]:
    """Mean, standard deviation, variance (UM-pFSSL's fairness measure, Fig. 5), min and max over devices
    (population statistics, ddof = 0; NaN accuracies — devices without test data, or not in the evaluated
    sample — are skipped). ``None`` (a round not evaluated, :mod:`edgesim.learning.evaluation`): ``{}``."""
    if accuracies is None:
        return {}
    a = np.asarray([x for x in accuracies if not math.isnan(x)], dtype=float)
    if a.size == 0:
        return {prefix: float("nan")}
    return {
        prefix: float(a.mean()),
        f"{prefix}_std": float(a.std()),
        f"{prefix}_var": float(a.var()),
        f"{prefix}_min": float(a.min()),
        f"{prefix}_max": float(a.max()),
    }


def due_devices(ctx: Context, labels: bool = False) -> tuple[int, ...] | None:
    """The devices evaluated in the current round (``labels``: by the labelling diagnostic), or ``None`` when the
    round is not evaluated (``[run] eval_every``, ``eval_devices``, ``label_quality``; ``ctx.measure``)."""
    measure = getattr(ctx, "measure", None)
    return tuple(range(ctx.n_devices)) if measure is None else measure.devices(ctx.n_devices, labels)


def measured(ctx: Context, values: Sequence[float], labels: bool = False) -> list[float] | None:
    """Per-device values an algorithm computed anyway, as the evaluation reports them: NaN outside the evaluated
    sample, ``None`` in a round not evaluated (:func:`due_devices`)."""
    due = due_devices(ctx, labels)
    if due is None:
        return None
    keep = set(due)
    return [v if d in keep else float("nan") for d, v in enumerate(values)]


def evaluate_shared(ctx: Context, state: Mapping[str, torch.Tensor]) -> list[float] | None:
    """Accuracy of one model on every evaluated device's test set (one forward pass over their union; NaN for
    the others), or ``None`` in a round not evaluated.

    Devices whose test sets are the same samples (labels-at-server: every device holds the whole test
    pool) are evaluated once and share the result.
    """
    due = due_devices(ctx)
    if due is None:
        return None
    first: dict[bytes, int] = {}
    owner = {d: first.setdefault(np.asarray(ctx.clients[d].split.test).tobytes(), d) for d in due}
    distinct = sorted(set(owner.values()))
    with phase("evaluation"):
        accs = dict(zip(distinct, accuracy_per_part(ctx, state, [(ctx.clients[d].x_test, ctx.clients[d].y_test)
                                                                 for d in distinct])))
    return [accs[owner[d]] if d in owner else float("nan") for d in range(ctx.n_devices)]


def shared_model_metrics(ctx: Context, state: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """One shared model's accuracy metrics on the devices' test sets, and ``val_accuracy`` on the server's
    validation set when one is held out (``[data] server_validation``: what hyper-parameters are chosen by)."""
    accs = evaluate_shared(ctx, state)
    out = accuracy_metrics(accs)
    if ctx.val_x is not None and accs is not None:
        out["val_accuracy"] = accuracy_per_part(ctx, state, [(ctx.val_x, ctx.val_y)])[0]
    return out


def accuracy_per_part(ctx: Context, state: Mapping[str, torch.Tensor],
                      parts: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> list[float]:
    """Accuracy of one model on each ``(x, y)`` part, in one eval-mode forward pass over their union
    (NaN for an empty part)."""
    correct = _correct_over_union(ctx, state, parts)
    if correct is None:
        return [float("nan")] * len(parts)
    correct = correct.float()
    out, start = [], 0
    for _, y in parts:
        n = y.shape[0]
        out.append(float(correct[start : start + n].mean()) if n else float("nan"))
        start += n
    return out


def counts_per_part(ctx: Context, state: Mapping[str, torch.Tensor],
                    parts: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> list[float]:
    """As :func:`accuracy_per_part`, each accuracy as :func:`edgesim.learning.inference.evaluate` writes it:
    right answers / rows, in double precision."""
    correct = _correct_over_union(ctx, state, parts)
    out, start = [], 0
    for _, y in parts:
        n = int(y.shape[0])
        out.append(int(correct[start:start + n].sum()) / n if n else float("nan"))
        start += n
    return out


def _correct_over_union(ctx: Context, state, parts) -> torch.Tensor | None:
    """``argmax == y`` (bool) over the concatenated parts, ``eval_batch_size`` rows a call; ``None`` if empty."""
    if not parts:
        return None
    xs = torch.cat([x for x, _ in parts])
    ys = torch.cat([y for _, y in parts])
    if xs.shape[0] == 0:
        return None
    with torch.no_grad():
        from torch.func import functional_call

        was = ctx.model.training
        ctx.model.eval()
        try:
            preds = torch.cat(
                [functional_call(ctx.model, dict(state), (xb,)).argmax(-1) for xb in xs.split(ctx.train_cfg.eval_batch_size)]
            )
        finally:
            ctx.model.train(was)
    return preds == ys


def accuracy_per_device(ctx: Context, states: Sequence[Mapping[str, torch.Tensor]],
                        parts: Sequence[tuple[torch.Tensor, torch.Tensor]], *, one_model_pass: bool = False
                        ) -> list[float]:
    """Accuracy of ``states[i]`` on ``parts[i] = (x, y)``, for every i, batched: the parts of one model (the same
    state object) in one pass over their union (:func:`accuracy_per_part`); the models of one part each, stacked
    and ``vmap``'d over their own padded rows when the run's executor is the vectorised one and the model
    allows it (:func:`edgesim.learning.inference.paired_accuracy`, ``[train] vmap_max_clients`` at a time), else
    one after another (:func:`edgesim.learning.inference.evaluate`: on a CPU a loop is the faster of the two).
    Accuracies are counts: every path gives the numbers of evaluating each device alone, written as
    right / rows (``one_model_pass``: when every part has the same model, :func:`accuracy_per_part`'s single-
    precision mean, as the labelling accuracy of a shared model has always been written)."""
    from edgesim.learning.executors import VmapExecutor
    from edgesim.learning.inference import paired_accuracy

    out = [float("nan")] * len(parts)
    groups: dict[int, list[int]] = {}
    for i, s in enumerate(states):
        groups.setdefault(id(s), []).append(i)
    if one_model_pass and len(groups) == 1 and len(states) > 1:
        return accuracy_per_part(ctx, states[0], parts)
    singles = []
    for ids in groups.values():
        if len(ids) == 1:
            singles.append(ids[0])
            continue
        for i, a in zip(ids, counts_per_part(ctx, states[ids[0]], [parts[i] for i in ids])):
            out[i] = a
    bs = ctx.train_cfg.eval_batch_size
    executor = ctx.executor
    if len(singles) > 1 and getattr(executor, "name", "") == "vmap" and \
            VmapExecutor.unsupported_reason(ctx.model) is None:
        accs = paired_accuracy(ctx.model, [states[i] for i in singles], [parts[i] for i in singles],
                               batch_size=bs, max_models=getattr(executor, "max_clients", None))
    else:
        accs = [evaluate(ctx.model, [states[i]], *parts[i], bs)[0] for i in singles]
    for i, a in zip(singles, accs):
        out[i] = a
    return out


def _on_due(ctx: Context, states: Sequence[Mapping[str, torch.Tensor]], part, labels: bool) -> list[float] | None:
    due = due_devices(ctx, labels)
    if due is None:
        return None
    with phase("labelling" if labels else "evaluation"):
        accs = accuracy_per_device(ctx, [states[d] for d in due], [part(ctx.clients[d]) for d in due],
                                   one_model_pass=labels)
    out = [float("nan")] * len(states)
    for d, a in zip(due, accs):
        out[d] = a
    return out


def evaluate_personal(ctx: Context, states: Sequence[Mapping[str, torch.Tensor]]) -> list[float] | None:
    """Accuracy of device n's own model on device n's test set, for every evaluated device (NaN for the others;
    ``None`` in a round not evaluated), batched by :func:`accuracy_per_device`."""
    return _on_due(ctx, states, lambda c: (c.x_test, c.y_test), labels=False)


def labeling_accuracy(ctx: Context, states: Sequence[Mapping[str, torch.Tensor]]) -> list[float] | None:
    """Accuracy of device n's model as a labeller of its unlabelled data (vs the hidden true labels).

    DoFed-SPP's labelling metric for a baseline whose one classifier also
    labels the unlabelled target set (docs/studies/dofed_spp.md). NaN for a device
    without unlabelled data or outside the evaluated sample; ``None`` in a round the
    labelling diagnostic is not measured (``[run] label_quality``). One model on
    every device (a shared global model): one forward pass over all the unlabelled
    data (:func:`accuracy_per_device`).
    """
    return _on_due(ctx, states, lambda c: (c.x_unl, c.y_unl_hidden), labels=True)


# --------------------------------------------------------------------------- labels at the server


def server_labeled_set(ctx: Context, algorithm: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The server's labelled ``(x, y)`` (labels-at-server partitions); a clear error when there is none."""
    if ctx.server_x is None or ctx.server_x.shape[0] == 0:
        raise ValueError(f"{algorithm}: needs a labelled set at the server; set [data] partition = "
                         f"\"labels_at_server\" (got {ctx.data_cfg.partition!r})")
    return ctx.server_x, ctx.server_y


def train_at_server(ctx: Context, algorithm: str, round_index: int, start: Mapping[str, torch.Tensor], data,
                    task: LocalTask) -> LocalTrainResult:
    """Run ``task`` once at the base station from ``start`` on ``data`` (generator ``(seed, "server", round)``,
    shared by every algorithm of the run); check for divergence. Its cycles go into the plan's server phase."""
    with phase("training"):
        result = ctx.executor.run(ctx.model, task, [dict(start)], [data], [ctx.generator("server", round_index)])
    check_losses(f"{algorithm} (server)", round_index, [-1], result)
    return result


def has_unlabeled(ctx: Context) -> bool:
    return any(c.x_unl.shape[0] for c in ctx.clients)


def clone_state(state: Mapping[str, torch.Tensor]) -> Params:
    return {k: v.detach().clone() for k, v in state.items()}


def to_cpu(state: Mapping[str, torch.Tensor]) -> Params:
    """A state dict on the CPU (for checkpoints)."""
    return {k: v.detach().cpu().clone() for k, v in state.items()}


def to_device(ctx: Context, state: Mapping[str, torch.Tensor]) -> Params:
    return {k: v.to(ctx.device) for k, v in state.items()}
