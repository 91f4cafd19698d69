"""Numbers the clock needs that come from the model and the data: ``"auto"`` workload fields.

``model_bits = "auto"``: the model's parameters and float buffers × 32 bits.
``cycles_source = "flops"``: C_tra = forward+backward FLOPs per sample ÷
``flops_per_cycle``. ``edgesim plan`` resolves a scenario's workload here so
that it shows the numbers a run would use. Importing this module loads no
torch (the model is built only when a number needs it).
"""

from __future__ import annotations

import dataclasses

from edgesim.config import WorkloadConfig
from edgesim.learning.data.datasets import load_dataset


def resolve_workload(scenario) -> WorkloadConfig:
    """The scenario's workload with every ``"auto"`` replaced by the number a run would use."""
    w = scenario.workload
    data, train = scenario.learning["data"], scenario.learning["train"]
    needs_model = w.model_bits == "auto" or w.cycles_source == "flops" or "auto" in (
        w.sr_cycles,
        w.pseudo_label_cycles_per_model,
    )
    if not needs_model:
        return w
    from edgesim.learning.models import build_model, flops_per_sample, model_bits  # torch: only when a number needs the model

    ds = load_dataset(data.dataset, data.data_dir, **data.loader_options())
    model = build_model(train.model, ds.input_shape, ds.n_classes, ds.vocab_size, seed=0)
    changes = {}
    if w.model_bits == "auto":
        changes["model_bits"] = model_bits(model)
    if w.cycles_source == "flops":
        changes["cycles_per_sample"] = flops_per_sample(model, ds.input_shape) / w.flops_per_cycle
        changes["cycles_source"] = "given"
    for name in ("sr_cycles", "pseudo_label_cycles_per_model"):
        if getattr(w, name) == "auto":
            from edgesim.learning.algorithms.dofed_spp import auto_cycles  # DoFed-SPP defines what its phases cost

            changes[name] = auto_cycles(name, scenario, model, ds, changes.get("cycles_per_sample", w.cycles_per_sample))
    return dataclasses.replace(w, **changes)


def dofed_target_cycles(scenario, workload: WorkloadConfig) -> float | None:
    """Cycles a device spends each round on DoFed-SPP's target model (``DofedSppConfig.target_cycles``, Eq. 15).

    C_tra = the resolved ``workload.cycles_per_sample``; |D_l|, |D_ul| the
    target sets of the SUBSET/NORMAL split (``dofed_sizes``, the same on every
    device). ``None`` for any other split, whose target sets are drawn.
    """
    from edgesim.learning.algorithm_configs.dofed_spp import DofedSppConfig
    from edgesim.learning.data.datasets import DATASETS
    from edgesim.learning.data.partitions import dofed_sizes

    data = scenario.learning["data"]
    if data.partition not in ("subset", "normal"):
        return None
    n_classes = DATASETS.lookup(data.dataset).n_classes or load_dataset(data.dataset, data.data_dir, **data.loader_options()).n_classes
    sizes = dofed_sizes(n_classes, data.n_clusters, data.size_scale)
    cfg = scenario.learning.get("algorithms", {}).get("dofed_spp") or DofedSppConfig()
    return cfg.target_cycles(workload.cycles_per_sample, sizes.labeled + sizes.unlabeled)
