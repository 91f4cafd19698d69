"""Numbers the clock needs that come from the model and the data: ``"auto"`` workload fields.

``model_bits = "auto"``: the model's parameters and float buffers × 32 bits.
``samples_per_device = "auto"``: the samples the median device holds in the run's own partition.
``cycles_source = "flops"``: C_tra = forward+backward FLOPs per sample ÷
``flops_per_cycle``. ``edgesim plan`` resolves a scenario's workload here so
that it shows the numbers a run would use. Importing this module loads no
torch (the model is built only when a number needs it).
"""

from __future__ import annotations

import dataclasses
import math

from edgesim.config import WorkloadConfig
from edgesim.learning.algorithms import ALGORITHMS, planning_hooks
from edgesim.learning.data.datasets import load_dataset
from edgesim.learning.registry import resolve


def resolve_workload(scenario) -> WorkloadConfig:
    """The scenario's workload with every ``"auto"`` replaced by the number a run would use."""
    w = scenario.workload
    data, train = scenario.learning.data, scenario.learning.train
    needs_model = w.model_bits == "auto" or w.cycles_source == "flops" or "auto" in (
        w.sr_cycles,
        w.pseudo_label_cycles_per_model,
    )
    if not needs_model and w.samples_per_device != "auto":
        return w
    ds = load_dataset(data.dataset, data.data_dir, **data.loader_options())
    changes = {}
    if w.samples_per_device == "auto":
        changes["samples_per_device"] = partition_samples_per_device(scenario, ds)
    if not needs_model:
        return dataclasses.replace(w, **changes)
    from edgesim.learning.models import (  # torch: only when a number needs the model
        build_model,
        flops_per_sample,
        model_bits,
    )

    model = build_model(train.model, ds.input_shape, ds.n_classes, ds.vocab_size, seed=0)
    if w.model_bits == "auto":
        changes["model_bits"] = model_bits(model)
    if w.cycles_source == "flops":
        changes["cycles_per_sample"] = flops_per_sample(model, ds.input_shape) / w.flops_per_cycle
        changes["cycles_source"] = "given"
    for hook in planning_hooks(ALGORITHMS).values():
        for name in hook.auto_fields:
            if getattr(w, name) == "auto":  # the algorithm whose phases the field costs defines its number
                cycles = changes.get("cycles_per_sample", w.cycles_per_sample)
                changes[name] = resolve(hook.auto_cycles)(name, scenario, model, ds, cycles)
    return dataclasses.replace(w, **changes)


def median_samples(held) -> int:
    """``samples_per_device = "auto"``: the samples the median device holds, ``⌈median(D_n)⌉`` (at least 1)."""
    ordered = sorted(int(n) for n in held)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return max(1, math.ceil(median))


def partition_samples_per_device(scenario, ds) -> int:
    """``samples_per_device = "auto"`` of a scenario on its data set ``ds``: :func:`median_samples` of what each
    device holds (reciprocal train set, labelled and unlabelled data) in the run's own partition
    (:func:`edgesim.learning.data.partitions.device_splits`: the same seed and streams as the run)."""
    from edgesim.learning.data.partitions import device_splits

    _, _, splits = device_splits(ds.y_train, ds.y_test, ds.n_classes, scenario.learning.data,
                                 scenario.system.n_devices, scenario.seed, ds.name)
    return median_samples(len(s.train) + len(s.labeled) + len(s.unlabeled) for s in splits)


def model_tensor_sizes(scenario) -> list[int]:
    """The numbers of each floating-point tensor of the scenario's model (what a compressed transfer encodes,
    :func:`edgesim.compression.encoded_bits`)."""
    from edgesim.learning.models import build_model  # torch: only when a compressed transfer is shown

    data, train = scenario.learning.data, scenario.learning.train
    ds = load_dataset(data.dataset, data.data_dir, **data.loader_options())
    model = build_model(train.model, ds.input_shape, ds.n_classes, ds.vocab_size, seed=0)
    return [int(v.numel()) for v in model.state_dict().values() if v.is_floating_point()]
