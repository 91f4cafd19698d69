"""The executors: run a :class:`edgesim.learning.tasks.LocalTask` on many clients, one at a time or vectorised.

What a client computes (its loss or step, streams, views, optimizer, epochs)
is the task (:mod:`edgesim.learning.tasks`); how it runs is here, separate
(as in FedJAX, with torch.func):

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

Both take ``run(model, task, start_params, data, generators)``: per client a
start state, its data (a mapping of streams to named tensors, or for a
one-stream task ``(x, y[, w])``, which becomes the stream ``main``) and its
generator (or an int seed); they return a :class:`edgesim.learning.tasks.LocalTrainResult`.
Algorithms call them through :func:`edgesim.learning.algorithms.common.train_devices`.

**Sampling (both executors).** Per client, every stream is cut into batches
from random orders drawn on the CPU: an *epoch* is as many steps as the
stream with the most batches needs (``⌈n_s / B_s⌉``, the last batch of each
of its epochs may be smaller); every other stream cycles through fresh
permutations in batches of ``min(B_s, n_s)``. A single-stream task is the
classic loop: ``epochs`` random permutations of the client's samples in
batches of ``batch_size``.

**Common random numbers.** What is drawn is named by *what it draws*, so two
tasks that draw the same thing get the same numbers, whatever else each
draws (docs/use/metrics.md, "Paired comparisons"). From the client's generator
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
from dataclasses import replace
from typing import Iterator, Mapping, Protocol, Sequence, Union

import torch
import torch.nn as nn
from torch.func import grad, vmap

from edgesim.learning.layers import ForwardState, forward_state, mix64, name_layers
from edgesim.learning.models import draw_seed, seeded_torch_rng, stochastic_modules
from edgesim.learning.numerics import DEFAULT_NUMERICS, Numerics, as_contiguous
from edgesim.learning.optim import ema_update
from edgesim.learning.state import Params, stack_params
from edgesim.learning.tasks import Batch, LocalTask, LocalTrainResult, Net, StepInputs

GeneratorLike = Union[torch.Generator, int]


# --------------------------------------------------------------------------- shared pieces


def as_streams(data: Union[Sequence[torch.Tensor], Mapping]) -> dict:
    """``(x, y)`` / ``(x, y, w)`` → ``{"main": {"x", "y"[, "w"]}}``; a mapping of streams is returned as is."""
    if isinstance(data, Mapping):
        return dict(data)
    if len(data) not in (2, 3):
        raise ValueError(f"dataset must be (x, y) or (x, y, sample_weights), got {len(data)} tensors")
    return {"main": dict(zip(("x", "y", "w"), data))}



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
    n_steps = task_steps(task, sizes)
    out = {}
    for i, s in enumerate(task.streams):
        g = _sub_generator(seed, BATCHES, i)
        if s.name == lead:
            out[s.name] = client_schedule(sizes[s.name], s.batch_size, task.epochs, g)
        else:
            out[s.name] = _cycle_schedule(sizes[s.name], s.batch_size, n_steps, g)
    return out


def task_steps(task: LocalTask, sizes: Mapping[str, int]) -> int:
    """A client's local steps: ``epochs × max_s ⌈n_s / B_s⌉`` (its largest stream sets the epoch; "Sampling")."""
    return task.epochs * max((math.ceil(sizes[s.name] / s.batch_size) for s in task.streams), default=0)


def task_rows(task: LocalTask, sizes: Mapping[str, int]) -> int:
    """Rows a client's local training draws: ``steps × Σ_s min(B_s, n_s)`` — the work a worker is dealt for
    it (:mod:`edgesim.learning.client_workers`); a view's rows are the same multiple of every client's."""
    return task_steps(task, sizes) * sum(min(s.batch_size, sizes[s.name]) for s in task.streams)


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
        tasks = [task] * len(self.sizes)
        if task.client_epochs is not None:  # each client its own epochs (per-device local_iterations)
            if len(task.client_epochs) != len(self.sizes):
                raise ValueError(f"client_epochs has {len(task.client_epochs)} entries for {len(self.sizes)} clients")
            tasks = [replace(task, epochs=e, client_epochs=None) for e in task.client_epochs]
        self.schedules = [task_schedule(t, sz, b) for t, sz, b in zip(tasks, self.sizes, self.base)]
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


class SequentialExecutor:
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


class VmapExecutor:
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
                  numerics: Numerics = DEFAULT_NUMERICS, max_clients: int | None = None) -> SequentialExecutor | VmapExecutor:
    """Executor by name: "sequential", "vmap", or "auto" (vmap on a GPU, sequential on a CPU), training in
    ``numerics``; ``max_clients``: the vectorised one's clients per pass (``None``: all)."""
    if name == "auto":
        name = "vmap" if torch.device(device).type == "cuda" else "sequential"
    if name == "sequential":
        return SequentialExecutor(numerics)
    if name == "vmap":
        return VmapExecutor(max_clients=max_clients, numerics=numerics)
    raise ValueError(f"executor(={name!r}) must be one of 'auto', 'sequential', 'vmap'")
