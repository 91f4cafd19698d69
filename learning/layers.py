"""BatchNorm and dropout that the executors can run functionally, for one client or many at once.

The models of ``edgesim.learning.models`` use :class:`BatchNorm2d` and
:class:`Dropout` (subclasses of torch's, with the same ``state_dict`` keys).
Outside an executor they *are* torch's layers. Inside one, a
:class:`ForwardState` (set with :func:`forward_state`) changes two things:

- **BatchNorm, functionally.** In training mode the batch statistics are
  taken over the rows marked real by ``state.mask`` only (padding rows of a
  shorter client in a vectorised step count for nothing), and the new
  running statistics are *returned* in ``state.buffers`` instead of written
  into the module's buffers — so many clients' statistics can be carried
  side by side under ``torch.func.vmap``, and a client whose steps are over
  keeps its own (the executor selects with ``torch.where``). The formulas
  are torch's: ``x̂ = (x − μ_B)/√(σ²_B + ε)``, ``y = γ·x̂ + β``,
  running ``μ ← (1 − m)·μ + m·μ_B``, ``σ² ← (1 − m)·σ² + m·σ²_B·n/(n − 1)``
  (unbiased), ``n`` the real values per channel. A batch with a single value
  per channel, which torch's own layer refuses, normalises to β and leaves
  the running statistics as they were.
- **Dropout, from explicit keys.** The keep-mask of element ``j`` of row
  ``r`` in the ``c``-th dropout call of a step is a counter-based hash of
  ``(key, c, row id r, j)`` (SplitMix64 finaliser, Steele et al., OOPSLA
  2014), so it depends on the client's key and on the row's *identity*, not
  on its position in a padded batch nor on which clients share a call: the
  sequential and the vectorised executor draw the same masks.

Without a forward state (plain ``model(x)``) both layers behave exactly as
torch's own.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Iterator, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

_STATE: contextvars.ContextVar[Optional["ForwardState"]] = contextvars.ContextVar("edgesim_forward", default=None)

# SplitMix64 constants as signed int64 (torch has no uint64 arithmetic).
_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15
_MIX1 = -4658895280553007687  # 0xBF58476D1CE4E5B9
_MIX2 = -7723592293110705685  # 0x94D049BB133111EB


def _shr(z: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 values (torch's ``>>`` is arithmetic)."""
    return (z >> s) & ((1 << (64 - s)) - 1)


_CONSTANTS: dict = {}


def _c(value: int, like: torch.Tensor) -> torch.Tensor:
    """An int64 constant on ``like``'s device, made once per (value, device): no transfer per call."""
    key = (value, like.device)
    if key not in _CONSTANTS:
        _CONSTANTS[key] = torch.tensor(value, dtype=torch.int64, device=like.device)
    return _CONSTANTS[key]


def mix64(z: torch.Tensor) -> torch.Tensor:
    """The SplitMix64 finaliser on int64 tensors (wrap-around arithmetic): a bijective 64-bit hash."""
    z = (z ^ _shr(z, 30)) * _c(_MIX1, z)
    z = (z ^ _shr(z, 27)) * _c(_MIX2, z)
    return z ^ _shr(z, 31)


def _mix64_(z: torch.Tensor) -> torch.Tensor:
    """:func:`mix64` in place on ``z`` (one scratch tensor instead of a new tensor per operation): the same
    integers — the operations and their order are the same — at about half the memory traffic of a large one."""
    t = torch.empty_like(z)
    for s, m in ((30, _MIX1), (27, _MIX2), (31, None)):
        z.bitwise_xor_(t.copy_(z).bitwise_right_shift_(s).bitwise_and_((1 << (64 - s)) - 1))
        if m is not None:
            z.mul_(_c(m, z))
    return z


def hash_uniform(key: torch.Tensor, call: int, rows: torch.Tensor, row_numel: int) -> torch.Tensor:
    """Uniform [0, 1) floats of shape ``(len(rows), row_numel)`` from ``(key, call, row id, element)``.

    24 random bits per value; ``key`` is an int64 scalar (batched under vmap),
    ``rows`` int64 row ids. The ``(rows, row_numel)`` hash is mixed in place (:func:`_mix64_`).
    """
    j = torch.arange(row_numel, device=rows.device, dtype=torch.int64)
    golden, m2 = _c(_GOLDEN, rows), _c(_MIX2, rows)
    z = mix64(key.to(rows.device) * golden + (call + 1))
    z = _mix64_(z + rows.to(torch.int64).unsqueeze(1) * m2 + j.unsqueeze(0) * golden)
    return _shr(z, 40).to(torch.float32) * (1.0 / (1 << 24))


def max_pool2d(x: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """``F.max_pool2d(x, kernel_size)``, through torch's channels-last kernel where ``x`` is an NCHW map of
    several channels that needs no gradient (evaluation, pseudo-labels, MC-dropout passes).

    The same values bit for bit: a maximum involves no rounding, so the memory order cannot change it. On the
    CPU torch's NCHW max-pool kernel is several times slower than its channels-last one (2048 maps of 32×28×28:
    355 ms against 132 ms to re-order plus 108 ms to pool; docs/model/numerics.md, "Where the time goes"). The result
    is handed back contiguous, so every later layer runs exactly as before. With a gradient (training) or under
    a ``torch.func`` transform (vmap) it is ``F.max_pool2d`` itself.
    """
    if (not torch._C._functorch.is_functorch_wrapped_tensor(x) and x.dim() == 4 and x.shape[1] > 1
            and not (torch.is_grad_enabled() and x.requires_grad)
            and x.is_contiguous() and not x.is_contiguous(memory_format=torch.channels_last)):
        return F.max_pool2d(x.contiguous(memory_format=torch.channels_last), kernel_size).contiguous()
    return F.max_pool2d(x, kernel_size)


@dataclass
class ForwardState:
    """What a forward pass inside an executor needs besides parameters.

    ``mask``: (B,) 1.0 for real rows, 0.0 for padding (``None``: all real).
    ``rows``: (B,) int64 row ids for dropout (``None``: 0..B−1).
    ``key``: int64 scalar tensor seeding dropout (``None``: torch's own dropout).
    ``buffers``: new running statistics by state-dict key (filled by BatchNorm;
    read back by the next BatchNorm call of the same step).
    ``names``: module → its state-dict prefix (set by :func:`forward_state`).
    """

    mask: Optional[torch.Tensor] = None
    rows: Optional[torch.Tensor] = None
    key: Optional[torch.Tensor] = None
    buffers: dict = field(default_factory=dict)
    calls: int = 0


@contextlib.contextmanager
def forward_state(state: ForwardState) -> Iterator[ForwardState]:
    """Run a block with ``state`` as the forward state of every :class:`BatchNorm2d`/:class:`Dropout`."""
    token = _STATE.set(state)
    try:
        yield state
    finally:
        _STATE.reset(token)


def name_layers(model: nn.Module) -> nn.Module:
    """Give each functional layer of ``model`` its state-dict prefix (idempotent); returns ``model``."""
    for name, m in model.named_modules():
        if isinstance(m, (BatchNorm2d, Dropout)):
            m._prefix = f"{name}." if name else ""
    return model


class BatchNorm2d(nn.BatchNorm2d):
    """``nn.BatchNorm2d`` with masked, functional training statistics inside an executor (module docstring)."""

    _prefix = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        st = _STATE.get()
        if st is None or not self.training or not self.track_running_stats:
            return super().forward(x)
        keys = [self._prefix + k for k in ("running_mean", "running_var", "num_batches_tracked")]
        rm = st.buffers.get(keys[0], self.running_mean)
        rv = st.buffers.get(keys[1], self.running_var)
        nbt = st.buffers.get(keys[2], self.num_batches_tracked)
        mom = 0.1 if self.momentum is None else self.momentum
        per_row = x[0].numel() // x.shape[1] if x.shape[0] else 1
        if st.mask is None and x.shape[0] * per_row > 1:
            rm, rv = rm.clone(), rv.clone()
            out = F.batch_norm(x, rm, rv, self.weight, self.bias, True, mom, self.eps)
        else:
            dtype = x.dtype
            if dtype in (torch.bfloat16, torch.float16):  # statistics in float32, as torch's own batch_norm keeps them
                x = x.float()
            mask = st.mask if st.mask is not None else x.new_ones(x.shape[0])
            m = mask.to(x.dtype).reshape(-1, *([1] * (x.dim() - 1)))
            dims = [0] + list(range(2, x.dim()))
            count = mask.to(x.dtype).sum() * per_row
            n = count.clamp(min=1.0)
            mean = (x * m).sum(dims) / n
            shape = (1, -1) + (1,) * (x.dim() - 2)
            centred = x - mean.reshape(shape)
            var = (centred * centred * m).sum(dims) / n
            # a client with no real row this step (its steps are over): unit variance, so padding stays finite
            var_used = torch.where(count > 0, var, torch.ones_like(var))
            out = centred * torch.rsqrt(var_used.reshape(shape) + self.eps)
            if self.affine:
                out = out * self.weight.reshape(shape) + self.bias.reshape(shape)
            unbiased = var.detach() * n / (n - 1.0).clamp(min=1.0)
            moved = count > 1  # one value per channel: no variance to learn from (torch refuses such a batch)
            rm = torch.where(moved, rm * (1.0 - mom) + mean.detach() * mom, rm)
            rv = torch.where(moved, rv * (1.0 - mom) + unbiased * mom, rv)
            out = out.to(dtype)
        st.buffers[keys[0]], st.buffers[keys[1]], st.buffers[keys[2]] = rm, rv, nbt + 1
        return out


class Dropout(nn.Dropout):
    """``nn.Dropout`` whose masks come from the forward state's key inside an executor (module docstring)."""

    _prefix = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        st = _STATE.get()
        if st is None or st.key is None or not self.training or self.p == 0:
            return super().forward(x)
        st.calls += 1
        b = x.shape[0]
        rows = st.rows if st.rows is not None else torch.arange(b, device=x.device)
        u = hash_uniform(st.key, st.calls, rows, x[0].numel() if b else 0).reshape(x.shape)
        return x * (u >= self.p).to(x.dtype) * (1.0 / (1.0 - self.p))
