"""What the learning costs on a device's CPU: cycles per pass and per phase (the clock's Eqs. 7 and 23).

One place for every algorithm (DoFed-SPP, FedFomo, the FedAvg family, …):

- ``C_tra`` (``cycles_per_sample``) is one training pass of one sample,
  forward + backward; a forward pass alone costs a third of it,
  ``C_fwd = C_tra / 3`` (backward ≈ 2 forwards: the weight and the input
  gradients, the ratio :func:`edgesim.learning.models.flops_per_sample` assumes).
- :func:`task_cycles` counts a round of local training from what the task
  really draws: per stream the rows of its batches over all steps (the lead
  stream ``epochs·n``, a cycling stream ``steps·min(B, n)``, see
  ``edgesim.learning.executors``), times the stream's ``passes`` (training passes per
  row per step; FixMatch's unlabelled stream: 2, the weak and the strong
  view in one joint forward–backward), times ``C_tra``. A one-stream
  supervised task is ``I·C_tra·D`` (Eq. 7) exactly.
- :func:`training_passes` turns a step's forward and backward passes per
  row into training passes (FedDure's bi-level step: docs/studies/feddure.md).
- :func:`forward_cycles` is inference: ``C_fwd`` per sample per model
  (pseudo-labelling, evaluation on a device, MC-dropout passes).
"""

from __future__ import annotations

import math
from typing import Mapping

FORWARD_SHARE = 1.0 / 3.0  # forward cycles per sample / training (forward + backward) cycles per sample


def forward_cycles_per_sample(cycles_per_sample: float) -> float:
    """``C_fwd = C_tra / 3``: one forward pass of one sample, in cycles."""
    if not cycles_per_sample >= 0:
        raise ValueError(f"cycles_per_sample(={cycles_per_sample}) must be >= 0")
    return float(cycles_per_sample) * FORWARD_SHARE


def training_passes(forward: float, backward: float) -> float:
    """``forward`` forward and ``backward`` backward passes of a row, in training passes (units of ``C_tra``).

    ``f·C_fwd + b·2·C_fwd = (f + 2b)/3·C_tra`` (a backward ≈ two forwards,
    module docstring): one forward + one backward is 1 training pass; a
    forward alone 1/3. What a task's ``passes`` counts, for steps that run
    more than one forward–backward (pFedMe's inner loop, FedDure's bi-level
    step).
    """
    for name, v in (("forward", forward), ("backward", backward)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise ValueError(f"{name}(={v!r}) must be a number >= 0")
    return (float(forward) + 2.0 * float(backward)) * FORWARD_SHARE


def forward_cycles(cycles_per_sample: float, n_samples: int, n_models: int = 1, n_passes: int = 1) -> float:
    """Cycles of ``n_passes`` forward passes of ``n_models`` models over ``n_samples``: ``C_fwd·n·M·T``."""
    for name, v in (("n_samples", n_samples), ("n_models", n_models), ("n_passes", n_passes)):
        if not (isinstance(v, int) and v >= 0):
            raise ValueError(f"{name}(={v!r}) must be an int >= 0")
    return forward_cycles_per_sample(cycles_per_sample) * n_samples * n_models * n_passes


def stream_rows(batch_sizes: Mapping[str, int], sizes: Mapping[str, int], epochs: int) -> dict[str, tuple[int, int]]:
    """Per stream ``(repeats, rows)``: its batches cover ``rows`` samples ``repeats`` times in one round.

    ``batch_sizes``/``sizes``: per stream (in the task's order) its batch size
    and number of samples. The lead stream (most batches per epoch, first on
    ties) gives ``(epochs, n)``; every other stream ``(steps, min(B, n))``.
    """
    if not batch_sizes:
        return {}
    per_epoch = {s: math.ceil(sizes[s] / b) for s, b in batch_sizes.items()}
    lead = max(batch_sizes, key=lambda s: per_epoch[s])
    steps = epochs * per_epoch[lead]
    return {s: ((epochs, sizes[s]) if s == lead else (steps, min(b, sizes[s]))) for s, b in batch_sizes.items()}


def task_cycles(task, sizes: Mapping[str, int], cycles_per_sample: float) -> float:
    """Cycles of one round of ``task`` (a ``edgesim.learning.tasks.LocalTask``) on streams of ``sizes`` samples.

    ``Σ_s passes_s · repeats_s · C_tra · rows_s`` (see :func:`stream_rows`;
    ``I·C_tra·D`` of Eq. (7) for one supervised stream); ``passes`` defaults
    to 1 per stream.
    """
    from edgesim.compute import training_cycles

    rows = stream_rows({s.name: s.batch_size for s in task.streams}, sizes, task.epochs)
    passes = task.passes or {}
    return float(sum(float(passes.get(s, 1.0)) * training_cycles(rep, cycles_per_sample, n)
                     for s, (rep, n) in rows.items()))
