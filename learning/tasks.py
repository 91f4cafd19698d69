"""What a client computes in one round of local training: the task types an algorithm builds.

An algorithm describes *what* a client computes as a :class:`LocalTask`:

- its **loss** ``loss(net, batch, key) -> (loss, aux)`` over a :class:`Batch` —
  a mapping of named tensors (``x``, ``y``, ``u``, ``u_weak``, ``u_strong``,
  soft targets, weights…) drawn from one or more **streams** (:class:`Stream`;
  e.g. the labelled data in batches of B and the unlabelled data in batches
  of μB, each with its own sampler) — and ``net``, a :class:`Net` that runs
  the model on the current parameters (``net(x)``, ``net.logits(batch, "x",
  "u_strong")`` for one joint forward pass, ``net.params``, ``net.start``);
  ``key`` is the step's random key (an int64 tensor, per client); the losses
  algorithms share are in :mod:`edgesim.learning.objectives`;
- or, instead of a loss, a whole client **step** (pFedMe's inner loop,
  FedDure's bi-level update) ``step(StepInputs) -> (params, opt_state, aux)``;
- its **views** (:class:`View`): augmentations (``edgesim.learning.augment``)
  applied to a batch key on the compute device, with randomness from the
  client's generator;
- which keys **train** (``trainable``; everything else of the state is a
  frozen input, never mutated — nothing leaks through a shared template);
- its **optimizer** and **schedule** (``edgesim.learning.optim``: SGD with
  momentum/Nesterov/weight decay, Adam; constant or cosine), ``epochs`` and
  FedProx's ``prox_mu`` (Li et al., MLSys 2020, Eq. 2: ``μ(w − w_start)`` is
  added to the gradient, so μ = 0 is plain training bit for bit).

How a task runs — one client after another or vectorised, its sampling and
random numbers — is :mod:`edgesim.learning.executors`; what it costs on the
simulated clock is :func:`edgesim.learning.costs.task_cycles`; an algorithm
runs it on its selected devices with
:func:`edgesim.learning.algorithms.common.train_devices`. A
:class:`LocalTrainResult` is what comes back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import torch
import torch.nn as nn
from torch.func import functional_call

from edgesim.learning.layers import ForwardState
from edgesim.learning.numerics import DEFAULT_NUMERICS, Numerics
from edgesim.learning.optim import Constant, Optimizer, Schedule
from edgesim.learning.state import Params

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
    ``client_epochs``: per client of one call (in its order), the epochs that client trains instead of ``epochs``
    (per-device ``workload.local_iterations``, :meth:`edgesim.learning.context.Context.epochs_of`); ``None``:
    ``epochs`` for every client.
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
    client_epochs: Optional[tuple[int, ...]] = None

    def __post_init__(self) -> None:
        if self.loss is None and self.step is None:
            raise ValueError("a LocalTask needs a loss or a step")
        if self.ema_decay is not None and not (isinstance(self.ema_decay, (int, float))
                                               and not isinstance(self.ema_decay, bool) and 0 <= self.ema_decay < 1):
            raise ValueError(f"ema_decay(={self.ema_decay!r}) must be a number in [0, 1) or None")
        if not (isinstance(self.epochs, int) and self.epochs >= 0):
            raise ValueError(f"epochs(={self.epochs}) must be an int >= 0")
        if self.client_epochs is not None and not all(isinstance(e, int) and not isinstance(e, bool) and e >= 0
                                                      for e in self.client_epochs):
            raise ValueError(f"client_epochs(={self.client_epochs!r}) must be ints >= 0, one per client")
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

