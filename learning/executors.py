"""Local training of many clients: one client step, run one client at a time or vectorised.

An algorithm describes *what* a client computes as a :class:`LocalTask`:

- its **loss** ``loss(net, batch, key) -> (loss, aux)`` over a :class:`Batch` —
  a mapping of named tensors (``x``, ``y``, ``u``, ``u_weak``, ``u_strong``,
  soft targets, weights…) drawn from one or more **streams** (e.g. the
  labelled data in batches of B and the unlabelled data in batches of μB,
  each with its own sampler) — and ``net``, a :class:`Net` that runs the
  model on the current parameters (``net(x)``, ``net.logits(batch, "x",
  "u_strong")`` for one joint forward pass, ``net.params``, ``net.start``);
  ``key`` is the step's random key (an int64 tensor, per client);
- or, instead of a loss, a whole client **step** (pFedMe's inner loop,
  FedDure's bi-level update) ``step(StepInputs) -> (params, opt_state, aux)``;
- its **views**: augmentations (``edgesim.learning.augment``) applied to a batch key
  on the compute device, with randomness from the client's generator;
- which keys **train** (``trainable``; everything else of the state is a
  frozen input, never mutated — nothing leaks through a shared template);
- its **optimizer** and **schedule** (``edgesim.learning.optim``: SGD with
  momentum/Nesterov/weight decay, Adam; constant or cosine), ``epochs`` and
  FedProx's ``prox_mu`` (Li et al., MLSys 2020, Eq. 2: ``μ(w − w_start)`` is
  added to the gradient, so μ = 0 is plain training bit for bit).

How it runs is separate (as in FedJAX, with torch.func):

- :class:`SequentialExecutor` — one client after another; the reference,
  and the fastest on a CPU.
- :class:`VmapExecutor` — all clients at once: the trainable tensors stacked
  along a leading client dimension, ``vmap(grad(loss))`` (or ``vmap(step)``)
  over them. Shorter clients get padded, masked rows and, once done, no-op
  steps (``torch.where``), so the result equals the sequential one to float
  rounding. BatchNorm statistics are carried functionally and computed over
  real rows only, dropout masks come from each client's own key
  (``edgesim.learning.layers``), so ResNet-9 and MC-dropout models take this path too.
  Each step gathers its rows from each client's own tensors (no concatenated
  copy of all clients' data).

**Sampling (both executors).** Per client, every stream is cut into batches
from random orders drawn on the CPU: an *epoch* is as many steps as the
stream with the most batches needs (``⌈n_s / B_s⌉``, the last batch of each
of its epochs may be smaller); every other stream cycles through fresh
permutations in batches of ``min(B_s, n_s)``. A single-stream task is the
classic loop: ``epochs`` random permutations of the client's samples in
batches of ``batch_size``.

**Common random numbers.** What is drawn is named by *what it draws*, so two
tasks that draw the same thing get the same numbers, whatever else each
draws (docs/metrics.md, "Paired comparisons"). From the client's generator
the executor takes one seed and derives from it, with :func:`derive_seed`,
independent sub-streams: the batch order of the task's *i*-th stream
(``BATCHES, i``), the dropout seed (``DROPOUT``), and the parameters of the
*j*-th view at step *s* (``VIEWS, s, j``). FedAvg and FixMatch on one device
in one round then visit the labelled data in the same order, and FixMatch's
extra unlabelled stream and augmentations change nothing of it.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Optional, Protocol, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from edgesim.learning.layers import ForwardState, forward_state, mix64, name_layers
from edgesim.learning.models import draw_seed, seeded_torch_rng, stochastic_modules
from edgesim.learning.numerics import DEFAULT_NUMERICS, Numerics, as_contiguous
from edgesim.learning.optim import SGD, Constant, Optimizer, Schedule, ema_update
from edgesim.learning.state import Params, stack_params, unstack_params  # noqa: F401 - re-exported for callers

GeneratorLike = Union[torch.Generator, int]
ClientStreams = Mapping[str, Mapping[str, torch.Tensor]]
SampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Penalty = Callable[[Params, Params], torch.Tensor]

ROW_SLOT = 1 << 24  # row ids of batch key number s are s·2²⁴ + position (dropout masks, edgesim.learning.layers)


# --------------------------------------------------------------------------- the task


@dataclass(frozen=True)
class Stream:
    """A named stream of a client's data, drawn in batches of ``batch_size``."""

    name: str
    batch_size: int

    def __post_init__(self) -> None:
        if not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise ValueError(f"stream {self.name!r}: batch_size(={self.batch_size}) must be an int >= 1")


@dataclass(frozen=True)
class View:
    """Batch key ``out`` = augmentation ``augmentation`` of batch key ``src`` (drawn per step)."""

    out: str
    src: str
    augmentation: Any


@dataclass(frozen=True)
class StepInputs:
    """What a custom client step receives (one client; under vmap, one slice of the stack).

    ``net`` runs the model with the current trainable parameters;
    ``params``/``opt_state`` the trainable tensors and optimizer state;
    ``batch``, ``key``, ``step`` (0-based), ``lr_scale`` (the schedule's factor).
    """

    net: "Net"
    params: Params
    opt_state: dict
    batch: "Batch"
    key: torch.Tensor
    step: int
    lr_scale: Any


@dataclass(frozen=True)
class LocalTask:
    """What a client computes in one round of local training (see the module docstring).

    ``loss(net, batch, key) -> (loss, aux)``: a scalar to minimise and a dict
    of scalar tensors to report (``aux["loss"]``, if present, is the reported
    training loss; else the minimised loss). ``step``: a custom client step
    replacing gradient + optimizer (then ``loss`` may be ``None``).
    ``trainable``: the state keys that train (``None``: every parameter of the
    model); state keys that are not model keys are extra per-client tensors
    (e.g. pFedMe's local model), trainable only when listed.
    ``report_stream``: the stream whose real row count weighs the reported
    loss of each step (default: the first). ``passes``: training passes
    (forward + backward) per row of each stream per step, what the clock
    charges (``edgesim.learning.costs.task_cycles``; default 1 per stream).
    ``ema_decay``: keep an exponential moving average of the trainable
    parameters over the client's steps (``edgesim.learning.optim.ema_update``,
    from the start values, once after every step; ``None``: none is kept) and
    return it as :attr:`LocalTrainResult.ema` — FixMatch's evaluation model.
    The sequential executor keeps it; the vectorised one refuses such a task.
    """

    loss: Optional[Callable[["Net", "Batch", torch.Tensor], tuple[torch.Tensor, Mapping[str, torch.Tensor]]]]
    optimizer: Optimizer
    epochs: int = 1
    streams: tuple[Stream, ...] = (Stream("main", 32),)
    views: tuple[View, ...] = ()
    schedule: Schedule = Constant()
    trainable: Optional[frozenset] = None
    prox_mu: float = 0.0
    step: Optional[Callable[[StepInputs], tuple[Params, dict, Mapping[str, torch.Tensor]]]] = None
    report_stream: Optional[str] = None
    passes: Optional[Mapping[str, float]] = None
    ema_decay: Optional[float] = None

    def __post_init__(self) -> None:
        if self.loss is None and self.step is None:
            raise ValueError("a LocalTask needs a loss or a step")
        if self.ema_decay is not None and not (isinstance(self.ema_decay, (int, float))
                                               and not isinstance(self.ema_decay, bool) and 0 <= self.ema_decay < 1):
            raise ValueError(f"ema_decay(={self.ema_decay!r}) must be a number in [0, 1) or None")
        if not (isinstance(self.epochs, int) and self.epochs >= 0):
            raise ValueError(f"epochs(={self.epochs}) must be an int >= 0")
        if not self.prox_mu >= 0:
            raise ValueError(f"prox_mu(={self.prox_mu}) must be >= 0")
        names = [s.name for s in self.streams]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"streams(={names}) must be one or more distinct names")
        if self.report_stream is not None and self.report_stream not in names:
            raise ValueError(f"report_stream(={self.report_stream!r}) is not one of the streams {names}")


@dataclass(frozen=True)
class LocalTrainResult:
    """Per client: final state, mean reported loss over its steps (weighted by rows), steps taken, aux means.

    ``mean_loss`` is NaN for a client that took no step; ``aux[name]`` the
    mean of that aux value over the client's steps. ``ema``: per client, its
    final state with the trainable keys replaced by their moving average
    (``LocalTask.ema_decay``; the buffers, e.g. BatchNorm statistics, are the
    trained model's); ``None`` when the task keeps none.
    """

    params: list[Params]
    mean_loss: list[float]
    n_steps: list[int]
    aux: dict = field(default_factory=dict)
    ema: Optional[list[Params]] = None


# --------------------------------------------------------------------------- batches and the net


class Batch(Mapping):
    """One client's batch: named tensors, plus for each key its stream's mask, real-row count and row ids.

    ``padded``: rows may be padding (vectorised step); ``step``: the local step (0-based).
    """

    def __init__(self, tensors: Mapping[str, torch.Tensor], stream_of: Mapping[str, str], slot_of: Mapping[str, int],
                 padded: bool, step: int = 0):
        self._t, self._stream, self._slot, self.padded, self.step = tensors, stream_of, slot_of, padded, step

    def __getitem__(self, key: str) -> torch.Tensor:
        return self._t[key]

    def __iter__(self):
        return (k for k in self._t if not k.startswith("__"))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def mask(self, key: str) -> torch.Tensor:
        """1.0 for the real rows of ``key``'s stream, 0.0 for padding."""
        return self._t[f"__mask:{self._stream[key]}"]

    def count(self, key: str) -> torch.Tensor:
        """Real rows of ``key``'s stream (at least 1, to divide by)."""
        return self.mask(key).sum().clamp(min=1.0)

    def rows(self, key: str) -> torch.Tensor:
        """Row ids of ``key`` (for dropout masks): slot·2²⁴ + position."""
        n = self._t[key].shape[0]
        return torch.arange(n, device=self._t[key].device) + self._slot[key] * ROW_SLOT

    def mean(self, per_row: torch.Tensor, key: str) -> torch.Tensor:
        """``Σ mask·v / n_real`` over the rows of ``key``'s stream."""
        return (per_row * self.mask(key)).sum() / self.count(key)


class Net:
    """The model as a loss sees it: a forward pass on the current parameters, in training mode.

    ``net(x, mask=None, rows=None)``; ``net.logits(batch, *keys)`` — one joint
    forward over the rows of several batch keys (their masks and row ids
    concatenated), split back per key; ``net.apply(params, x, ...)`` with other
    trainable values (a virtual step); ``net.params`` (trainable),
    ``net.start`` (their values at the start of local training), ``net.fixed``;
    ``net.running_stats()``/``net.restore_running_stats(s)`` read and reset
    the BatchNorm statistics the step's forward passes have written.
    """

    def __init__(self, model: nn.Module, params: Params, fixed: Params, start: Params, fs: ForwardState,
                 padded: bool, has_bn: bool, model_keys: frozenset, numerics: Numerics = DEFAULT_NUMERICS):
        self.model, self.params, self.fixed, self.start = model, params, fixed, start
        self._fs, self._padded, self._has_bn, self._model_keys = fs, padded, has_bn, model_keys
        self._numerics = numerics

    def apply(self, params: Params, x: torch.Tensor, mask: Optional[torch.Tensor] = None,
              rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        if mask is None and self._padded and self._has_bn:
            raise ValueError("inside a vectorised step a model with BatchNorm needs the rows' mask: "
                             "call net(x, mask=batch.mask(key)) or net.logits(batch, key)")
        fs = self._fs
        fs.mask, fs.rows = mask, rows
        state = {k: v for k, v in {**self.fixed, **params}.items() if k in self._model_keys}
        if not self._padded:  # the sequential step (vmap trains in the contiguous format: edgesim.learning.numerics)
            x = self._numerics.input(x)
        try:
            return functional_call(self.model, state, (x,))
        finally:
            fs.mask, fs.rows = None, None

    def __call__(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None, rows: Optional[torch.Tensor] = None):
        return self.apply(self.params, x, mask, rows)

    def running_stats(self) -> dict:
        """The step's BatchNorm running statistics so far (by state-dict key; empty before any BatchNorm call)."""
        return dict(self._fs.buffers)

    def restore_running_stats(self, stats: Mapping[str, torch.Tensor]) -> None:
        """Make ``stats`` the step's running statistics (drop what forward passes since wrote).

        A custom step whose forward passes run inside ``torch.func`` transforms
        returns the statistics it keeps as an output of the transform, and
        restores them here; a regulator's forward pass (FedDure's C-reg) that
        must not move the model's statistics is followed by a restore.
        """
        self._fs.buffers.clear()
        self._fs.buffers.update(stats)

    def logits(self, batch: Batch, *keys: str, params: Optional[Params] = None) -> tuple[torch.Tensor, ...]:
        xs = [batch[k] for k in keys]
        mask = torch.cat([batch.mask(k) for k in keys]) if batch.padded else None
        rows = torch.cat([batch.rows(k) for k in keys])
        out = self.apply(self.params if params is None else params, torch.cat(xs) if len(xs) > 1 else xs[0], mask, rows)
        return tuple(out.split([x.shape[0] for x in xs])) if len(xs) > 1 else (out,)

    def logits_and_stats(self, batch: Batch, *keys: str, params: Optional[Params] = None) -> tuple[tuple, dict]:
        """``(net.logits(batch, *keys, params=params), the running statistics they wrote)``, the step's own
        statistics left as they were: for a forward inside a ``torch.func`` transform, which returns the
        statistics it keeps as an output (restore them with :meth:`restore_running_stats`)."""
        before = self.running_stats()
        out = self.logits(batch, *keys, params=params)
        after = self.running_stats()
        self.restore_running_stats(before)
        return out, after

    def logits_frozen_stats(self, batch: Batch, key: str, params: Params) -> torch.Tensor:
        """One key's forward with ``params`` that leaves the running statistics as they were (a regulator's or
        an auxiliary model's pass, which must not move the model's BatchNorm statistics)."""
        stats = self.running_stats()
        out = self.apply(params, batch[key], batch.mask(key) if batch.padded else None, batch.rows(key))
        self.restore_running_stats(stats)
        return out


# --------------------------------------------------------------------------- the supervised task (classic API)


@dataclass(frozen=True)
class LocalTrainConfig:
    """SGD hyper-parameters of one round of supervised local training (the classic API).

    ``lr`` step size; ``momentum``, ``weight_decay`` as ``torch.optim.SGD``;
    ``batch_size`` samples per step (last batch of an epoch may be smaller);
    ``epochs`` passes over the client's data; ``prox_mu`` FedProx's μ ≥ 0.
    """

    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    batch_size: int = 32
    epochs: int = 1
    prox_mu: float = 0.0

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"lr(={self.lr}) must be > 0")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum(={self.momentum}) must be in [0, 1)")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay(={self.weight_decay}) must be >= 0")
        if not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise ValueError(f"batch_size(={self.batch_size}) must be an int >= 1")
        if not (isinstance(self.epochs, int) and self.epochs >= 0):
            raise ValueError(f"epochs(={self.epochs}) must be an int >= 0")
        if not self.prox_mu >= 0:
            raise ValueError(f"prox_mu(={self.prox_mu}) must be >= 0")

    def optimizer(self) -> SGD:
        return SGD(self.lr, self.momentum, self.weight_decay)


def cross_entropy_per_sample(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample cross-entropy; ``target`` is class indices ``(B,)`` or probabilities ``(B, C)``."""
    return F.cross_entropy(output, target, reduction="none")


@dataclass(frozen=True)
class LocalObjective:
    """The supervised objective of the classic API: ``(1/|b|) Σ ω_i ℓ(f(x_i), y_i) + penalty(w, w_start)``.

    ``sample_loss(output, target) -> (B,)``; ``penalty(params, start) -> scalar``
    on the trainable parameters. Pure torch (no ``.item()``, no branches on
    values), so that vmap can run them.
    """

    sample_loss: SampleLoss = cross_entropy_per_sample
    penalty: Penalty | None = None


DEFAULT_OBJECTIVE = LocalObjective()


def supervised_loss(objective: LocalObjective = DEFAULT_OBJECTIVE, x_key: str = "x") -> Callable:
    """The batch loss of :class:`LocalObjective` on batch keys ``x_key`` → ``y``, with weights ``w`` if present:
    the masked mean of the per-sample losses over the real rows (``Batch.mean``)."""

    def loss(net: Net, batch: Batch, key: torch.Tensor):
        (out,) = net.logits(batch, x_key)
        per = objective.sample_loss(out, batch["y"])
        if per.shape != batch[x_key].shape[:1]:
            raise ValueError(f"sample_loss must return one loss per sample, shape ({batch[x_key].shape[0]},); "
                             f"got {tuple(per.shape)}")
        if "w" in batch:
            per = per * batch["w"]
        data = batch.mean(per, x_key)
        total = data if objective.penalty is None else data + objective.penalty(net.params, net.start)
        return total, {"loss": data}

    return loss


def supervised_task(cfg: LocalTrainConfig, objective: LocalObjective = DEFAULT_OBJECTIVE) -> LocalTask:
    """The classic supervised SGD round as a :class:`LocalTask` (one stream ``main`` of ``x``, ``y``[, ``w``])."""
    return LocalTask(
        loss=supervised_loss(objective),
        optimizer=cfg.optimizer(),
        epochs=cfg.epochs,
        streams=(Stream("main", cfg.batch_size),),
        prox_mu=cfg.prox_mu,
    )


def as_streams(data: Union[Sequence[torch.Tensor], Mapping]) -> dict:
    """``(x, y)`` / ``(x, y, w)`` → ``{"main": {"x", "y"[, "w"]}}``; a mapping of streams is returned as is."""
    if isinstance(data, Mapping):
        return dict(data)
    if len(data) not in (2, 3):
        raise ValueError(f"dataset must be (x, y) or (x, y, sample_weights), got {len(data)} tensors")
    return {"main": dict(zip(("x", "y", "w"), data))}


# --------------------------------------------------------------------------- shared pieces


def as_generator(g: GeneratorLike) -> torch.Generator:
    """A CPU ``torch.Generator``: ``g`` itself, or a new one seeded with the int ``g``."""
    if isinstance(g, torch.Generator):
        if g.device.type != "cpu":
            raise ValueError(f"generator device(={g.device}) must be cpu (sample orders are drawn on the CPU)")
        return g
    if isinstance(g, int) and not isinstance(g, bool):
        return torch.Generator().manual_seed(g)
    raise ValueError(f"generator(={g!r}) must be a torch.Generator or an int seed")


def client_schedule(n_samples: int, batch_size: int, epochs: int, generator: torch.Generator) -> list[torch.Tensor]:
    """One stream's batches for ``epochs`` epochs: per epoch ``randperm(n)`` split into ``batch_size`` chunks."""
    steps: list[torch.Tensor] = []
    for _ in range(epochs):
        if n_samples == 0:
            break
        steps.extend(torch.randperm(n_samples, generator=generator).split(batch_size))
    return steps


def _cycle_schedule(n: int, batch: int, n_steps: int, generator: torch.Generator) -> list[torch.Tensor]:
    """``n_steps`` batches of ``min(batch, n)`` from consecutive random permutations (empty if n = 0)."""
    if n == 0:
        return [torch.zeros(0, dtype=torch.long)] * n_steps
    b = min(batch, n)
    need = n_steps * b
    perms = [torch.randperm(n, generator=generator) for _ in range(math.ceil(need / n))]
    flat = torch.cat(perms) if perms else torch.zeros(0, dtype=torch.long)
    return list(flat[:need].split(b)) if need else []


# Sub-stream tags of derive_seed: what a seed draws.
BATCHES, DROPOUT, VIEWS = 1, 2, 3
_MASK64 = (1 << 64) - 1


def _splitmix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def derive_seed(seed: int, *keys: int) -> int:
    """A non-negative int63 seed for the sub-stream ``keys`` of ``seed`` (SplitMix64 chained over the keys).

    A pure function: the same ``(seed, keys)`` always gives the same seed, and
    sub-streams with different keys are independent of one another.
    """
    z = _splitmix64(int(seed) & _MASK64)
    for k in keys:
        z = _splitmix64(z ^ _splitmix64(int(k) & _MASK64))
    return z >> 1


def _sub_generator(seed: int, *keys: int) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(seed, *keys))


def task_schedule(task: LocalTask, sizes: Mapping[str, int], generator: GeneratorLike) -> dict[str, list[torch.Tensor]]:
    """One client's batches per stream (see "Sampling" in the module docstring).

    ``generator``: the client's generator (one seed is drawn from it) or that
    seed itself; the *i*-th stream's order comes from ``derive_seed(seed, BATCHES, i)``.
    """
    seed = generator if isinstance(generator, int) else draw_seed(as_generator(generator))
    per_epoch = {s.name: math.ceil(sizes[s.name] / s.batch_size) for s in task.streams}
    lead = max(task.streams, key=lambda s: per_epoch[s.name]).name  # first of the largest
    n_steps = task.epochs * per_epoch[lead]
    out = {}
    for i, s in enumerate(task.streams):
        g = _sub_generator(seed, BATCHES, i)
        if s.name == lead:
            out[s.name] = client_schedule(sizes[s.name], s.batch_size, task.epochs, g)
        else:
            out[s.name] = _cycle_schedule(sizes[s.name], s.batch_size, n_steps, g)
    return out


def step_keys(base_seed: int, n_steps: int) -> torch.Tensor:
    """int64 key of each step, ``mix64(seed + step)`` (CPU)."""
    return mix64(torch.arange(n_steps, dtype=torch.int64) + int(base_seed))


@contextlib.contextmanager
def _mode(model: nn.Module, training: bool) -> Iterator[None]:
    modes = {m: m.training for m in model.modules()}
    try:
        model.train(training)
        yield
    finally:
        for m, t in modes.items():
            m.training = t


def _has_bn(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats for m in model.modules())


class _Plan:
    """Everything about a call that does not depend on the executor: keys, schedules, checks."""

    def __init__(self, model: nn.Module, task: LocalTask, starts, data, generators, numerics: Numerics = DEFAULT_NUMERICS):
        if not (len(starts) == len(data) == len(generators)):
            raise ValueError(
                f"start_params, datasets and generators must have one entry per client "
                f"(got {len(starts)}, {len(data)}, {len(generators)})"
            )
        name_layers(model)
        self.model, self.task = model, task
        self.model_keys = list(model.state_dict().keys())
        self.model_key_set = frozenset(self.model_keys)
        self.buffer_keys = [n for n, _ in model.named_buffers()]
        params = [n for n, _ in model.named_parameters()]
        self.trainable = params if task.trainable is None else self._order(task.trainable, starts)
        self.streams = [s.name for s in task.streams]
        self.data = [as_streams(d) for d in data]
        self.stream_of, self.slot_of = {}, {}
        for c, (sp, d) in enumerate(zip(starts, self.data)):
            missing = set(self.model_keys) - set(sp)
            if missing:
                raise ValueError(f"client {c}: start_params keys must include the model's state_dict keys; "
                                 f"missing {sorted(missing)}")
            absent = set(self.trainable) - set(sp)
            if absent:
                raise ValueError(f"client {c}: trainable keys {sorted(absent)} are not in its state")
            if set(d) != set(self.streams):
                raise ValueError(f"client {c}: data streams {sorted(d)} differ from the task's {self.streams}")
            for s, tensors in d.items():
                lengths = {k: t.shape[0] for k, t in tensors.items()}
                if len(set(lengths.values())) > 1:
                    raise ValueError(f"client {c}: stream {s!r} tensors differ in length {lengths}")
                for k in tensors:
                    self.stream_of.setdefault(k, s)
        for v in task.views:
            if v.src not in self.stream_of:
                raise ValueError(f"view {v.out!r}: source key {v.src!r} is in no stream")
            self.stream_of[v.out] = self.stream_of[v.src]
        for i, k in enumerate(self.stream_of):
            self.slot_of[k] = i
        self.fixed = [k for k in starts[0] if k not in self.trainable and k not in self.buffer_keys] if starts else []
        self.base = [draw_seed(as_generator(g)) for g in generators]  # each client's one draw (module docstring)
        self.sizes = [{s: (next(iter(d[s].values())).shape[0] if d[s] else 0) for s in self.streams} for d in self.data]
        self.schedules = [task_schedule(task, sz, b) for sz, b in zip(self.sizes, self.base)]
        self.n_steps = [max((len(v) for v in sch.values()), default=0) for sch in self.schedules]
        self.stochastic = bool(stochastic_modules(model))
        self.seeds = [derive_seed(b, DROPOUT) if self.stochastic else 0 for b in self.base]
        self.keys = [step_keys(s, n) for s, n in zip(self.seeds, self.n_steps)]
        self.has_bn = _has_bn(model)
        self.report = task.report_stream or self.streams[0]
        self.numerics = numerics
        first = next(iter(starts[0].values()), None) if starts else None
        self.device = first.device if first is not None else torch.device("cpu")

    @staticmethod
    def _order(trainable, starts) -> list[str]:
        order = list(starts[0]) if starts else sorted(trainable)
        return [k for k in order if k in trainable]

    def lr_scale(self, c: int, s: int) -> float:
        return self.task.schedule.factor(s, self.n_steps[c])

    def draw_views(self, c: int, s: int, widths: Mapping[str, int]) -> list:
        """This client's augmentation parameters for step ``s`` (one per view, in order; view ``j`` from
        ``derive_seed(base, VIEWS, s, j)``)."""
        return [v.augmentation.draw(widths[self.stream_of[v.src]], _sub_generator(self.base[c], VIEWS, s, j))
                for j, v in enumerate(self.task.views)]

    def collect(self, c: int, state: Params, loss_sum: float, rows: int, aux_sums: dict) -> tuple:
        mean = loss_sum / rows if rows else float("nan")
        return state, mean, {k: float(v) / self.n_steps[c] for k, v in aux_sums.items()} if self.n_steps[c] else {}


def _apply_views(task: LocalTask, tensors: dict, params_per_client: list, real_rows: list, padded: bool) -> None:
    """Add each view's augmented tensor to ``tensors`` (clients' real rows augmented together, then re-padded)."""
    if not task.views:
        return
    from edgesim.learning.augment import concat_params

    for i, v in enumerate(task.views):
        src = tensors[v.src]
        if not padded:
            tensors[v.out] = v.augmentation.apply(src, params_per_client[0][i])
            continue
        parts = [src[c, :n] for c, n in enumerate(real_rows[v.src])]
        out = v.augmentation.apply(torch.cat(parts), concat_params([p[i] for p in params_per_client]))
        full = src.clone()
        start = 0
        for c, n in enumerate(real_rows[v.src]):
            full[c, :n] = out[start:start + n]
            start += n
        tensors[v.out] = full


class Executor(Protocol):
    name: str

    def run(self, model: nn.Module, task: LocalTask, start_params: list[Params], data: list, generators: list) -> LocalTrainResult: ...


class _Base:
    """The classic API on top of :meth:`run`: supervised training from ``(x, y[, w])`` tuples."""

    def train(self, model, start_params, datasets, generators, cfg, *, objective=DEFAULT_OBJECTIVE) -> list[Params]:
        """Final state of each client after supervised local training."""
        return self.train_with_stats(model, start_params, datasets, generators, cfg, objective=objective).params

    def train_with_stats(self, model, start_params, datasets, generators, cfg: LocalTrainConfig, *,
                         objective: LocalObjective = DEFAULT_OBJECTIVE) -> LocalTrainResult:
        """Supervised local training (:func:`supervised_task`) of every client."""
        return self.run(model, supervised_task(cfg, objective), start_params, datasets, generators)  # _Plan normalises


def _step_loss(plan: _Plan, padded: bool, s: int = 0):
    """The per-client function of step ``s``: ``(train, fixed, start, batch, key) -> (loss, (aux, buffers))``."""
    task, model = plan.task, plan.model

    def fn(train: Params, fixed: Params, start: Params, batch: dict, key: torch.Tensor):
        fs = ForwardState(key=key if plan.stochastic else None)
        with forward_state(fs):
            net = Net(model, train, fixed, start, fs, padded, plan.has_bn, plan.model_key_set, plan.numerics)
            b = Batch(batch, plan.stream_of, plan.slot_of, padded, s)
            with plan.numerics.autocast(plan.device):
                loss, aux = task.loss(net, b, key)
        aux = dict(aux)
        aux.setdefault("loss", loss)
        return loss, ({k: v.detach() for k, v in aux.items()}, fs.buffers)

    return fn


def _custom_step(plan: _Plan, padded: bool, s: int):
    task, model = plan.task, plan.model

    def fn(train: Params, fixed: Params, start: Params, opt_state: dict, batch: dict, key: torch.Tensor, lr_scale):
        fs = ForwardState(key=key if plan.stochastic else None)
        with forward_state(fs):
            net = Net(model, train, fixed, start, fs, padded, plan.has_bn, plan.model_key_set, plan.numerics)
            b = Batch(batch, plan.stream_of, plan.slot_of, padded, s)
            with plan.numerics.autocast(plan.device):
                new, new_opt, aux = task.step(StepInputs(net, train, opt_state, b, key, s, lr_scale))
        aux = {k: v.detach() for k, v in dict(aux).items()}
        return new, new_opt, aux, fs.buffers

    return fn


def _add_prox(task: LocalTask, grads: Params, params: Params, start: Params, model_keys) -> Params:
    if task.prox_mu == 0:
        return grads
    return {k: (g.add(params[k] - start[k], alpha=task.prox_mu) if k in model_keys else g) for k, g in grads.items()}


# --------------------------------------------------------------------------- sequential


class SequentialExecutor(_Base):
    """One client after another: ``functional_call`` + autograd + the task's functional optimizer.

    ``model`` is only a template (its structure and train/eval behaviour); its
    own tensors are never touched. ``numerics``: memory format and precision
    (:mod:`edgesim.learning.numerics`).
    """

    name = "sequential"

    def __init__(self, numerics: Numerics = DEFAULT_NUMERICS) -> None:
        self.numerics = numerics

    def run(self, model: nn.Module, task: LocalTask, start_params: list[Params], data: list, generators: list) -> LocalTrainResult:
        plan = _Plan(model, task, start_params, data, generators, self.numerics)
        out, means, auxes, emas = [], [], [], []
        with _mode(model, True):
            for c in range(len(start_params)):
                state, mean, aux, ema = self._one(plan, c, start_params[c])
                out.append(state)
                means.append(mean)
                auxes.append(aux)
                emas.append(ema)
        names = sorted({k for a in auxes for k in a})
        return LocalTrainResult(out, means, plan.n_steps, {k: [a.get(k, float("nan")) for a in auxes] for k in names},
                                ema=None if task.ema_decay is None else emas)

    @staticmethod
    def _one(plan: _Plan, c: int, sp: Params):
        task = plan.task
        start = plan.numerics.params_in({k: sp[k].detach() for k in plan.trainable})
        train = {k: v.clone() for k, v in start.items()}  # this client's own tensors, updated in place
        fixed = plan.numerics.params_in({k: sp[k] for k in plan.fixed})
        buffers = {k: sp[k] for k in plan.buffer_keys}
        opt_state = task.optimizer.init(train)
        device = next(iter(sp.values())).device if sp else torch.device("cpu")
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        rows, aux_sums = 0, {}
        moved = {name: _to_device_split(plan.schedules[c][name], device) if plan.schedules[c][name] else []
                 for name in plan.streams}
        keys = plan.keys[c].to(device)
        ema = None if task.ema_decay is None else {k: v.clone() for k, v in start.items()}
        # torch's own dropout layers (not edgesim.learning.layers') draw from the global RNG: seed it from the client
        rng = seeded_torch_rng(plan.seeds[c], device) if plan.stochastic else contextlib.nullcontext()
        with rng:
            for s in range(plan.n_steps[c]):
                train, opt_state, buffers, loss_sum, rows = SequentialExecutor._step(
                    plan, c, s, train, start, fixed, buffers, opt_state, loss_sum, rows, aux_sums, device,
                    {name: moved[name][s] for name in plan.streams}, keys[s])
                if ema is not None:
                    ema = ema_update(ema, train, task.ema_decay)
        train = as_contiguous(train)
        state = {k: (train[k] if k in train else buffers[k] if k in buffers else sp[k]) for k in sp}
        if ema is not None:
            ema = as_contiguous(ema)
            ema = {k: (ema[k] if k in ema else state[k]) for k in sp}
        return (*plan.collect(c, state, float(loss_sum), rows, aux_sums), ema)

    @staticmethod
    def _step(plan, c, s, train, start, fixed, buffers, opt_state, loss_sum, rows, aux_sums, device, idx, key):
        """One step of client ``c``: gather its batch, views, loss and gradient (or custom step), update."""
        task, data = plan.task, plan.data[c]
        batch = {}
        for name in plan.streams:
            i = idx[name]
            for k, t in data[name].items():
                batch[k] = t[i]
            batch[f"__mask:{name}"] = torch.ones(idx[name].numel(), device=device)
        widths = {name: idx[name].numel() for name in plan.streams}
        if task.views:
            _apply_views(task, batch, [plan.draw_views(c, s, widths)], {}, padded=False)
        scale = plan.lr_scale(c, s)
        if task.step is None:
            live = {k: v.detach().requires_grad_(True) for k, v in train.items()}
            loss, (aux, new_buf) = _step_loss(plan, False, s)(live, {**fixed, **buffers}, start, batch, key)
            grads = dict(zip(live, torch.autograd.grad(loss, list(live.values()), allow_unused=True)))
            grads = {k: (g if g is not None else torch.zeros_like(live[k])) for k, g in grads.items()}
            grads = _add_prox(task, grads, train, start, plan.model_keys)
            opt_state = task.optimizer.update_(train, grads, opt_state, s, scale)
        else:
            fn = _custom_step(plan, False, s)
            train, opt_state, aux, new_buf = fn(train, {**fixed, **buffers}, start, opt_state, batch, key, scale)
            train = plan.numerics.params_in(train)  # a step's new tensors in the training format (a no-op if they are)
        buffers = {**buffers, **{k: v.detach() for k, v in new_buf.items()}}
        n = max(widths[plan.report], 1)  # an empty report stream (a device without labels): each step weighs 1
        loss_sum = loss_sum + aux["loss"].detach().double() * n
        rows += n
        for k, v in aux.items():
            if k != "loss":
                aux_sums[k] = aux_sums.get(k, 0.0) + v.detach().double()
        return train, opt_state, buffers, loss_sum, rows


# --------------------------------------------------------------------------- vectorised


class VmapExecutor(_Base):
    """All clients at once with ``torch.func``: ``vmap(grad(loss))`` over stacked parameters.

    ``max_clients`` bounds memory by vectorising at most that many clients per
    pass (``None``: all of them). Every model runs here: BatchNorm and dropout
    are handled functionally (``edgesim.learning.layers``). A model whose layers are
    torch's own ``nn.BatchNorm*``/``nn.Dropout*`` rather than ours would
    silently differ, so :meth:`unsupported_reason` names them and ``run``
    trains such a model with :class:`SequentialExecutor` (with a warning) or,
    with ``fallback="error"``, refuses it.
    """

    name = "vmap"

    def __init__(self, fallback: str = "sequential", max_clients: int | None = None,
                 numerics: Numerics = DEFAULT_NUMERICS) -> None:
        if fallback not in ("sequential", "error"):
            raise ValueError(f"fallback(={fallback!r}) must be 'sequential' or 'error'")
        if max_clients is not None and max_clients < 1:
            raise ValueError(f"max_clients(={max_clients}) must be >= 1 or None")
        self.fallback = fallback
        self.max_clients = max_clients
        self.numerics = numerics

    @staticmethod
    def unsupported_reason(model: nn.Module) -> str | None:
        """Why ``model`` cannot be trained vectorised with results equal to the loop; ``None`` if it can."""
        from edgesim.learning.layers import BatchNorm2d, Dropout

        foreign = [n for n, m in model.named_modules()
                   if (isinstance(m, nn.modules.batchnorm._BatchNorm) and not isinstance(m, BatchNorm2d))
                   or (n in stochastic_modules(model) and not isinstance(m, Dropout))]
        if foreign:
            return (f"layers {', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''} are torch's own "
                    f"BatchNorm/dropout, not edgesim.learning.layers' functional ones")
        return None

    def run(self, model: nn.Module, task: LocalTask, start_params: list[Params], data: list, generators: list) -> LocalTrainResult:
        if task.ema_decay is not None:
            raise ValueError(f"LocalTask.ema_decay(={task.ema_decay}): the weights' moving average is kept by the "
                             f"sequential executor only; expected ema_decay=None with VmapExecutor")
        reason = self.unsupported_reason(model)
        if reason is not None:
            if self.fallback == "error":
                raise ValueError(f"VmapExecutor cannot vectorise {type(model).__name__}: {reason}")
            warnings.warn(f"VmapExecutor: {type(model).__name__}: {reason}; training it with SequentialExecutor",
                          stacklevel=2)
            return SequentialExecutor(self.numerics).run(model, task, start_params, data, generators)
        k = len(start_params)
        plan = _Plan(model, task, start_params, data, generators, self.numerics)
        if k == 0:
            return LocalTrainResult([], [], [])
        chunk = self.max_clients or k
        states, means, auxes = [], [], []
        with _mode(model, True):
            for i in range(0, k, chunk):
                s, m, a = self._stacked(plan, list(range(i, min(k, i + chunk))), start_params)
                states += s
                means += m
                auxes += a
        names = sorted({n for a in auxes for n in a})
        return LocalTrainResult(states, means, plan.n_steps, {n: [a.get(n, float("nan")) for a in auxes] for n in names})

    @staticmethod
    def _stacked(plan: _Plan, clients: list[int], start_params: list[Params]):
        task, k = plan.task, len(clients)
        starts = [start_params[c] for c in clients]
        device = next(iter(starts[0].values())).device
        stacked = stack_params([{key: sp[key] for key in plan.trainable + plan.fixed + plan.buffer_keys} for sp in starts])
        train = {n: stacked[n] for n in plan.trainable}
        start = dict(train)
        fixed = {n: stacked[n] for n in plan.fixed}
        buffers = {n: stacked[n] for n in plan.buffer_keys}
        opt_state = task.optimizer.init(train)
        n_steps = [plan.n_steps[c] for c in clients]
        max_steps = max(n_steps)
        loss_sum = torch.zeros(k, dtype=torch.float64, device=device)
        rows = torch.zeros(k, dtype=torch.float64)
        aux_sums: dict[str, torch.Tensor] = {}
        sched = _stacked_schedule(plan, clients, n_steps, device)
        for s in range(max_steps):
            active = [s < n for n in n_steps]
            st = sched[s]
            batch, real = {}, st["real"]
            for name in plan.streams:
                pad_d, width = st["idx"][name], st["width"][name]
                for key_ in plan.data[clients[0]][name]:
                    parts = []
                    for j, c in enumerate(clients):
                        t = plan.data[c][name][key_]
                        parts.append(t.index_select(0, pad_d[j]) if t.shape[0] else t.new_zeros((width, *t.shape[1:])))
                    batch[key_] = torch.stack(parts)
                batch[f"__mask:{name}"] = st["mask"][name]
            if task.views:
                views = [plan.draw_views(c, s, {n: real[n][j] for n in plan.streams}) if active[j] else None
                         for j, c in enumerate(clients)]
                live_views = [v for v in views if v is not None]
                rr = {v.src: [real[plan.stream_of[v.src]][j] if active[j] else 0 for j in range(k)] for v in task.views}
                _apply_views(task, batch, live_views, rr, padded=True)
            keys = st["keys"]
            scale = st["scale"]
            both = {**fixed, **buffers}
            if task.step is None:
                grads, (aux, new_buf) = vmap(grad(_step_loss(plan, True, s), has_aux=True))(train, both, start, batch, keys)
                grads = _add_prox(task, grads, train, start, plan.model_keys)
                new_train, new_opt = task.optimizer.update(train, grads, opt_state, s, scale)
            else:
                fn = vmap(_custom_step(plan, True, s), in_dims=(0, 0, 0, 0, 0, 0, None if not torch.is_tensor(scale) else 0))
                new_train, new_opt, aux, new_buf = fn(train, both, start, opt_state, batch, keys, scale)
            act_d = st["active"]
            if all(active):
                train, opt_state = new_train, new_opt
                buffers.update(new_buf)
            else:
                train = {n: _where(act_d, new_train[n], train[n]) for n in train}
                opt_state = _tree_where(act_d, new_opt, opt_state)
                buffers.update({n: _where(act_d, v, buffers[n]) for n, v in new_buf.items()})
            loss_sum += torch.where(st["active"], aux["loss"].detach().double(), 0.0) * st["rows"]
            rows += st["report_rows"]
            for name, v in aux.items():
                if name != "loss":
                    aux_sums[name] = aux_sums.get(name, torch.zeros(k, device=device)) + torch.where(act_d, v.detach().float(), 0.0)
        loss_l, aux_l = loss_sum.tolist(), {n: v.tolist() for n, v in aux_sums.items()}
        states, means, auxes = [], [], []
        for j, c in enumerate(clients):
            sp = start_params[c]
            state = {key: (train[key][j] if key in train else buffers[key][j] if key in buffers else sp[key]) for key in sp}
            st, mean, aux = plan.collect(c, state, loss_l[j], int(rows[j]), {n: v[j] for n, v in aux_l.items()})
            states.append(st)
            means.append(mean)
            auxes.append(aux)
        return states, means, auxes


def _stacked_schedule(plan: _Plan, clients: list[int], n_steps: list[int], device) -> list[dict]:
    """Every step's padded indices, masks, keys, active flags, real-row counts and lr factors, moved to ``device`` at once.

    Built on the CPU once per call and packed into one int64, one float32
    (and, for per-client learning rates, one float64) buffer, so a vectorised step needs no host-to-device transfer (and no
    host synchronisation) of its own.
    """
    k = len(clients)
    ints, floats, doubles, layout = [], [], [], []
    for s in range(max(n_steps)):
        active = [s < n for n in n_steps]
        entry = {"idx": {}, "mask": {}, "width": {}, "real": {}}
        for name in plan.streams:
            idxs = [plan.schedules[c][name][s] if active[j] else torch.zeros(0, dtype=torch.long)
                    for j, c in enumerate(clients)]
            width = max(1, max(i.numel() for i in idxs))
            pad = torch.zeros((k, width), dtype=torch.long)
            mask = torch.zeros((k, width), dtype=torch.float32)
            for j, i in enumerate(idxs):
                pad[j, : i.numel()] = i
                mask[j, : i.numel()] = 1.0
            entry["idx"][name], entry["mask"][name] = len(ints), len(floats)
            ints.append(pad)
            floats.append(mask)
            entry["width"][name] = width
            entry["real"][name] = [i.numel() for i in idxs]
        entry["keys"] = len(ints)
        ints.append(torch.stack([plan.keys[c][s] if active[j] else torch.zeros((), dtype=torch.int64)
                                 for j, c in enumerate(clients)]))
        entry["active"] = len(ints)
        ints.append(torch.tensor(active, dtype=torch.long))
        entry["rows"] = len(floats)
        # the reported loss's weight: the report stream's real rows (at least 1 on an active step, as sequentially)
        report_rows = [max(n, 1) if active[j] else 0 for j, n in enumerate(entry["real"][plan.report])]
        entry["report_rows"] = torch.tensor(report_rows, dtype=torch.float64)
        floats.append(torch.tensor(report_rows, dtype=torch.float32))
        scales = [plan.lr_scale(c, s) if active[j] else 1.0 for j, c in enumerate(clients)]
        entry["scale"] = scales[0] if len(set(scales)) == 1 else len(doubles)
        if not isinstance(entry["scale"], float):
            doubles.append(torch.tensor(scales, dtype=torch.float64))
        layout.append(entry)
    if not layout:
        return []
    ints_d = _to_device_split(ints, device)
    floats_d = _to_device_split(floats, device)
    doubles_d = _to_device_split(doubles, device) if doubles else []
    for e in layout:
        if not isinstance(e["scale"], float):
            e["scale"] = doubles_d[e["scale"]]
        e["idx"] = {n: ints_d[i] for n, i in e["idx"].items()}
        e["mask"] = {n: floats_d[i] for n, i in e["mask"].items()}
        e["keys"], e["active"] = ints_d[e["keys"]], ints_d[e["active"]].bool()
        e["rows"] = floats_d[e["rows"]].double()
    return layout


def _to_device_split(tensors: list[torch.Tensor], device) -> list[torch.Tensor]:
    """``tensors`` (one dtype) on ``device`` through one copy of their concatenation; views with the same shapes."""
    flat = torch.cat([t.reshape(-1) for t in tensors])
    if torch.device(device).type == "cuda":
        flat = flat.pin_memory().to(device, non_blocking=True)
    parts = flat.split([t.numel() for t in tensors])
    return [p.view(t.shape) for p, t in zip(parts, tensors)]


def _where(active: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    return torch.where(active.view(-1, *([1] * (new.dim() - 1))), new, old)


def _tree_where(active, new, old):
    if isinstance(new, dict):
        return {k: _tree_where(active, v, old[k]) for k, v in new.items()}
    return _where(active, new, old)


# --------------------------------------------------------------------------- choice


def make_executor(name: str, device: torch.device | str = "cpu",
                  numerics: Numerics = DEFAULT_NUMERICS) -> SequentialExecutor | VmapExecutor:
    """Executor by name: "sequential", "vmap", or "auto" (vmap on a GPU, sequential on a CPU), training in ``numerics``."""
    if name == "auto":
        name = "vmap" if torch.device(device).type == "cuda" else "sequential"
    if name == "sequential":
        return SequentialExecutor(numerics)
    if name == "vmap":
        return VmapExecutor(numerics=numerics)
    raise ValueError(f"executor(={name!r}) must be one of 'auto', 'sequential', 'vmap'")
