"""``edgesim plan`` as one object: a scenario's round budget, per-device times and local steps, before any training.

:func:`plan_report` computes a :class:`PlanReport`; ``edgesim plan`` prints its :meth:`~PlanReport.text` (or,
with ``--json``, its :meth:`~PlanReport.to_dict`) and ``edgesim.plan(scenario)`` returns it, so the two say the
same. What it holds: the plan of :func:`edgesim.planning.make_plan` (the budget T/G, each device's train and
upload times; DoFed-SPP's C1/C2/C3 and (B, K) pairs when an algorithm schedules under the budget), the bits of
each compressed transfer, round 0 under non-default ``[resources]`` policies, and the local optimiser steps a
device takes per round — ``I·⌈D_n/B⌉`` for each device's own data ``D_n`` of the run's partition (its min,
median and max), with a warning when a method gets fewer than :data:`FEW_LOCAL_STEPS` (docs/use/metrics.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from edgesim.config import ConfigError, WorkloadConfig
from edgesim.results.files import ROUNDS

# Fewer local optimiser steps a round than this, on the median device, and a method barely moves from its
# starting point in a round: one local epoch over ~14 labels at B = 10 is 2 steps, and such a run stayed at chance
# (issue 52). `edgesim plan` and `edgesim run` warn before any training (docs/use/metrics.md).
FEW_LOCAL_STEPS = 3


def scenario_algorithms(scenario) -> list[str]:
    """The scenario's ``[run] algorithms`` as written, then its ``[variants.NAME]`` not listed there."""
    from edgesim.learning.config import DEFAULT_ALGORITHMS

    run = scenario.raw.get("run", {})
    algorithms = run.get("algorithms", DEFAULT_ALGORITHMS) if isinstance(run, dict) else DEFAULT_ALGORITHMS
    names = list(algorithms) if isinstance(algorithms, list) else [str(algorithms)]
    variants = scenario.raw.get("variants", {})
    return names + [v for v in (variants if isinstance(variants, dict) else ()) if v not in names]


def schedulers(scenario) -> dict:
    """The scenario's algorithms that schedule under the round budget: ``{name: PlanningHook}``."""
    from edgesim.learning.algorithms import planning_hooks

    return planning_hooks(scenario_algorithms(scenario))


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _median(values: list[int]) -> float:
    v = sorted(values)
    mid = len(v) // 2
    return float(v[mid]) if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def local_steps(iterations: int, samples: int, batch_size: int) -> int:
    """The local optimiser steps of one supervised stream in a round: ``I·⌈D/B⌉`` (0 for a device with no data)."""
    return iterations * -(-samples // batch_size)


def held_samples(scenario, *, required: bool = False) -> list[int] | None:
    """Each device's supervised training samples ``D_n`` (its labelled data and DoFed-SPP's reciprocal train set)
    in the run's own partition (same seed and streams, :func:`edgesim.learning.data.partitions.device_splits`).

    ``None`` for a physics-only run (no data), and when the data set's files are not here unless ``required``
    (a scenario that gives ``samples_per_device`` plans without its data; ``"auto"`` needs them)."""
    if scenario.physics_only or scenario.learning.data is None:
        return None
    from edgesim.learning.data.datasets import DatasetError, load_dataset
    from edgesim.learning.data.partitions import device_splits

    data = scenario.learning.data
    try:
        ds = load_dataset(data.dataset, data.data_dir, **data.loader_options())
    except DatasetError as e:
        if not required:
            return None
        raise ConfigError(f"{scenario.path}: [data] {e}") from None
    try:
        _, _, splits = device_splits(ds.y_train, ds.y_test, ds.n_classes, data, scenario.system.n_devices,
                                     scenario.seed, ds.name)
    except ValueError as e:
        raise ConfigError(f"{scenario.path}: [data] {e}") from None
    return [len(s.train) + len(s.labeled) for s in splits]


def steps_summary(scenario, workload: WorkloadConfig) -> dict:
    """The local steps per device-round of one supervised stream of the plan's D: ``I·⌈D/B⌉`` (``{}`` for a
    physics-only run, which has no batches)."""
    if scenario.learning.train is None:
        return {}
    batch = scenario.learning.train.batch_size
    samples, iterations = workload.samples_per_device, workload.local_iterations
    if workload.varies:  # lists or tables: the device with the most local steps (its I_k and D_k)
        from edgesim.config import iterations_per_device, workload_per_device

        n = scenario.system.n_devices
        i = iterations_per_device(workload, n, scenario.seed)
        d = workload_per_device(workload, n, scenario.seed)[1] if workload.per_device else [samples] * n
        k = max(range(n), key=lambda j: local_steps(int(i[j]), d[j], batch))
        iterations, samples = int(i[k]), d[k] if not workload.per_device else int(d[k])
    return {"local_iterations": iterations, "samples_per_device": samples, "batch_size": batch,
            "local_steps_per_device": local_steps(iterations, samples, batch)}


def device_steps(scenario, workload: WorkloadConfig, held: list[int] | None) -> dict:
    """Over the devices' own data ``D_n`` of the partition: the min, median and max of ``I·⌈D_n/B⌉`` and of
    ``D_n`` (``{}`` when the partition is not known)."""
    if not held or scenario.learning.train is None:
        return {}
    batch = scenario.learning.train.batch_size
    from edgesim.config import iterations_per_device

    iterations = [int(i) for i in iterations_per_device(workload, len(held), scenario.seed)]
    steps = [local_steps(i, n, batch) for i, n in zip(iterations, held)]
    return {"min": min(steps), "median": _median(steps), "max": max(steps),
            "samples_min": min(held), "samples_median": _median(held), "samples_max": max(held),
            **({"iterations_median": _median(iterations)} if workload.iterations_vary else {})}


def few_steps_warning(scenario, steps: dict, per_device: dict) -> str | None:
    """One line when the median device takes fewer than :data:`FEW_LOCAL_STEPS` local steps a round (by the
    partition when known, else by the plan's D); else ``None``."""
    count = per_device["median"] if per_device else steps.get("local_steps_per_device")
    if count is None or count >= FEW_LOCAL_STEPS:
        return None
    d = per_device["samples_median"] if per_device else steps["samples_per_device"]
    i = per_device.get("iterations_median", steps["local_iterations"]) if per_device else steps["local_iterations"]
    return (f"{scenario.path}: the median device takes {count:g} local step(s) a round (I·⌈D/B⌉ = "
            f"{i:g}·⌈{d:g}/{steps['batch_size']}⌉), fewer than {FEW_LOCAL_STEPS}: a "
            f"method may barely move from its start each round; raise workload.local_iterations or lower "
            f"train.batch_size")


@dataclass(frozen=True)
class PlanReport:
    """What ``edgesim plan`` prints for a scenario (module docstring); ``edgesim.plan()`` returns it.

    ``plan``: :class:`edgesim.planning.Plan`; ``workload``: the workload with every ``"auto"`` resolved;
    ``compression``: per compressing algorithm and direction, its bits; ``allocation``: round 0 under the
    ``[resources]`` policies (``None`` for the defaults); ``local_steps``: :func:`steps_summary`;
    ``device_steps``: :func:`device_steps`; ``warnings``: lines said before any training
    (:func:`few_steps_warning`); ``cells``: with several cells, per cell its base station, band, devices and mean
    SNR / SINR in round 0 (:func:`edgesim.planning.cell_table`; ``None`` with one cell).
    """

    scenario: Any = field(repr=False)
    algorithms: tuple[str, ...]
    plan: Any
    workload: WorkloadConfig
    scheduled: bool
    compression: dict
    allocation: list | None
    local_steps: dict
    device_steps: dict
    warnings: tuple[str, ...] = ()
    cells: list | None = None
    hierarchy: dict | None = None  # round_mode = "hierarchical": edgesim.hierarchy.edge_cloud_schedule

    @property
    def infeasible(self) -> str | None:
        """The message of a budget no (B, K) pair fits, when an algorithm schedules under it; else ``None``."""
        if self.scheduled and not self.plan.feasible:
            return f"{self.scenario.path}: {self.plan.infeasibility_message()}"
        return None

    def to_dict(self) -> dict:
        """The ``--json`` object."""
        extra = {"compression": self.compression} if self.compression else {}
        if self.allocation is not None:
            extra["resources"] = self.allocation
        if self.cells is not None:
            extra["cells"] = self.cells
        if self.hierarchy is not None:
            extra["hierarchy"] = self.hierarchy
        return {"algorithms": list(self.algorithms), **self.plan.to_dict(), **extra, "local_steps": self.local_steps,
                "device_local_steps": self.device_steps, "warnings": list(self.warnings)}

    def json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def text(self) -> str:
        """The table ``edgesim plan`` prints (without its warnings, which go to stderr)."""
        return "\n".join(self._plan_lines() + self._cell_lines() + self._compression_lines()
                         + self._allocation_lines() + self._hierarchy_lines())

    def __str__(self) -> str:
        return self.text()

    def _plan_lines(self) -> list[str]:
        sc, plan = self.scenario, self.plan
        lines = [f"Scenario: {sc.name} ({sc.path})"]
        kind = "heterogeneous — planned for the " + plan.reference if plan.heterogeneous else "identical"
        lines.append(f"Devices: {plan.n_devices} ({kind}); access: {sc.system.access}")
        lines.append(f"Round budget T/G = {_fmt(sc.budget.total_time_s)} s / {sc.budget.rounds} "
                     f"= {_fmt(plan.round_budget_s)} s")
        lines += ["", f"Algorithms: {', '.join(self.algorithms)}"]
        sr = f" {'target s':>9} {'SR s':>8} {'PL/model s':>10}" if self.scheduled else ""
        lines.append(f"{'device':>6} {'cpu GHz':>8} {'gain dB':>8} {'uplink Mbit/s':>13} {'train s':>9}{sr} "
                     f"{'upload s':>9}")
        rows = plan.devices if len(plan.devices) <= 12 else plan.devices[:10]
        for d in rows:
            sr = (f" {d.target_train_s:>9.4g} {d.sr_s:>8.4g} {d.pseudo_label_per_model_s:>10.4g}"
                  if self.scheduled else "")
            lines.append(f"{d.device:>6} {d.cpu_freq_hz / 1e9:>8.3g} {10 * math.log10(d.channel_gain):>8.2f} "
                         f"{d.uplink_rate_bps / 1e6:>13.4g} {d.train_s:>9.4g}{sr} {d.upload_s:>9.4g}")
        if len(rows) < len(plan.devices):
            lines.append(f"   ... {len(plan.devices) - len(rows)} more devices (the JSON form lists all)")
        steps = self.local_steps
        if steps:
            lines.append(f"Local steps per device-round: I·⌈D/B⌉ = {steps['local_iterations']}·⌈"
                         f"{steps['samples_per_device']}/{steps['batch_size']}⌉ = {steps['local_steps_per_device']} "
                         f"(one supervised stream of D samples; a semi-supervised method's lead stream sets its "
                         f"count: {ROUNDS}'s local_steps_per_device)")
            per = self.device_steps
            if per:
                lines.append(f"  over each device's own data D_n of the partition (min / median / max): "
                             f"{per['min']} / {per['median']:g} / {per['max']} steps, from "
                             f"{per['samples_min']} / {per['samples_median']:g} / {per['samples_max']} samples")
        lines.append("")
        fits = sum(d.train_s + d.upload_s <= plan.round_budget_s for d in plan.devices)
        lines.append(f"Train + upload within T/G: {fits} of {plan.n_devices} devices (alone on the uplink)")
        if not self.scheduled:
            return lines
        data = sc.learning.data
        if data is not None and data.partition not in ("subset", "normal"):
            lines.append("Target model (Eq. 15) counted over workload.samples_per_device samples: a drawn split's "
                         "target sets are each device's own data (the run checks its budget with them before its "
                         "first round)")
        lines.append(f"C1 = {_fmt(plan.c1_s)} s  (T/G minus training, the target model and similarity ratios: left "
                     "for pseudo-labelling and uploads)")
        lines.append(f"C2 = {_fmt(plan.c2_s)} s  (pseudo-labelling with one downloaded model)")
        lines.append(f"C3 = {_fmt(plan.c3_s)} s  (one upload of m = {plan.model_bits:.0f} bits at "
                     f"{_fmt(plan.uplink_rate_bps)} bit/s)")
        pairs = [f"({b}, {k})" for b, k in plan.pairs]
        if len(pairs) > 12:
            pairs = pairs[:5] + [f"... {len(pairs) - 10} more ..."] + pairs[-5:]
        lines.append(f"(B, K) pairs examined: {', '.join(pairs) or 'none'}")
        n = plan.n_devices
        lines.append(f"Feasible pairs (1 <= B <= K <= N, B*C2 + K*C3 <= C1): {plan.feasible_count} of "
                     f"{n * (n + 1) // 2}")
        return lines

    def _cell_lines(self) -> list[str]:
        if self.cells is None:
            return []
        sys = self.scenario.system
        lines = ["", f"Cells: {len(self.cells)} (association {sys.association!r}, placement {sys.placement!r}, "
                     f"frequency reuse {sys.frequency_reuse}; docs/model/system_model.md, Several cells); round 0, "
                     f"SINR with one transmitter of every other cell on air:",
                 f"{'cell':>6} {'x m':>8} {'y m':>8} {'band MHz':>14} {'devices':>7} {'mean SNR dB':>11} "
                 f"{'mean SINR dB':>12}"]
        for c in self.cells:
            band = f"{c['band_low_hz'] / 1e6:.4g}+{c['band_hz'] / 1e6:.4g}"
            snr = "-" if c["mean_snr_db"] is None else f"{c['mean_snr_db']:.2f}"
            sinr = "-" if c["mean_sinr_db"] is None else f"{c['mean_sinr_db']:.2f}"
            lines.append(f"{c['cell']:>6} {c['x_m']:>8.6g} {c['y_m']:>8.6g} {band:>14} {c['devices']:>7} {snr:>11} "
                         f"{sinr:>12}")
        return lines

    def _compression_lines(self) -> list[str]:
        if not self.compression:
            return []
        rate = min(d.uplink_rate_bps for d in self.plan.devices)
        lines = ["", f"Compression (one transfer of the whole model, m = {self.plan.model_bits:.0f} bits; "
                     f"docs/model/compression.md):"]
        for name, dirs in self.compression.items():
            up, down = dirs["uplink"], dirs["downlink"]
            back = dirs.get("backhaul")
            lines.append(f"  {name}: uplink {up['method']} {up['bits']} bits ({up['ratio']:.3g} m, "
                         f"{_fmt(up['bits'] / rate)} s at the slowest uplink), downlink {down['method']} "
                         f"{down['bits']} bits ({down['ratio']:.3g} m)"
                         + (f", backhaul {back['method']} {back['bits']} bits ({back['ratio']:.3g} m)" if back else ""))
        return lines

    def _hierarchy_lines(self) -> list[str]:
        h = self.hierarchy
        if h is None:
            return []
        k, clouds = h["edge_rounds"], h["cloud_rounds"]
        after = ", ".join(str(r) for r in h["cloud_after_edge_rounds"][:8]) + (", ..." if clouds > 8 else "")
        lines = ["", f"Edge/cloud schedule (round_mode = 'hierarchical', docs/model/hierarchy.md): κ = {k} edge "
                     f"rounds per cloud round, {h['rounds']} edge rounds in every cell = {clouds} cloud rounds "
                     f"(after edge rounds {after}); the cells run their edge rounds independently between them",
                 f"{'cell':>6} {'devices':>8} {'backhaul Mbit/s':>15} {'latency s':>10} {'model one way s':>16}"]
        for c in h["cells"]:
            lines.append(f"{c['cell']:>6} {c['devices']:>8} {c['backhaul_bps'] / 1e6:>15.6g} "
                         f"{c['backhaul_latency_s']:>10.6g} {c['model_one_way_s']:>16.6g}")
        for name, b in h["backhaul_bits"].items():
            lines.append(f"  {name}: backhaul {b['model']:.6g} bits a model, {b['cloud_round']:.6g} a cloud round "
                         f"(every edge model up, the cloud model down), {b['run']:.6g} in the run")
        return lines

    def _allocation_lines(self) -> list[str]:
        if self.allocation is None:
            return []
        r, rows = self.scenario.resources, self.allocation
        lines = ["", f"Round 0 under [resources] scheduling = {r.scheduling!r}, bandwidth = {r.bandwidth!r}, "
                     f"power = {r.power!r}, cpu_freq = {r.cpu_freq!r} (the physics-only backend's work: I·C·D "
                     f"cycles, model_bits up):",
                 f"{'device':>6} {'band kHz':>9} {'power W':>8} {'cpu GHz':>8} {'compute s':>10} {'airtime s':>10} "
                 f"{'energy J':>9} {'arrived':>7}"]
        shown = rows if len(rows) <= 12 else rows[:10]
        for d in shown:
            lines.append(f"{d['device']:>6} {d['bandwidth_hz'] / 1e3:>9.4g} {d['tx_power_w']:>8.4g} "
                         f"{d['cpu_freq_hz'] / 1e9:>8.4g} {d['compute_s']:>10.4g} {d['upload_airtime_s']:>10.4g} "
                         f"{d['radio_energy_j'] + d['compute_energy_j']:>9.4g} {str(d['arrived']):>7}")
        if len(shown) < len(rows):
            lines.append(f"   ... {len(rows) - len(shown)} more devices (the JSON form lists all)")
        return lines


def compression_plan(sc, workload: WorkloadConfig) -> dict:
    """Per compressing algorithm (its variants included, each as its algorithm) and direction: the encoded bits of
    one transfer (docs/model/compression.md), from the codecs the scenario resolved."""
    from edgesim.compression import SENDS_NOTHING, plan_table
    from edgesim.learning.algorithms import ALGORITHMS
    from edgesim.learning.config import algorithm_of

    codecs = sc.learning.codecs  # every algorithm's, resolved by the scenario (none: physics only)
    if not codecs:
        return {}
    names = [a for a in sc.learning.run.algorithms
             if getattr(getattr(ALGORITHMS.get(algorithm_of(sc.learning, a)), "config_cls", None), "COMPRESSION",
                        None) != SENDS_NOTHING]
    if all(codecs[a].is_none for a in names):
        return {}
    from edgesim.learning.data.datasets import DatasetError
    from edgesim.learning.sizing import model_tensor_sizes

    try:
        sizes = model_tensor_sizes(sc)
    except DatasetError as e:
        raise ConfigError(f"{sc.path}: [data] {e}") from None
    return plan_table(codecs, names, sizes, workload.model_bits)


def resolved_workload(sc) -> WorkloadConfig:
    """The scenario's workload with every ``"auto"`` replaced by the number a run would use (the model's bits, the
    FLOPs' cycles, the partition's samples per device)."""
    w = sc.workload
    if sc.physics_only or not ("auto" in (w.model_bits, w.sr_cycles, w.pseudo_label_cycles_per_model,
                                          w.samples_per_device) or w.cycles_source == "flops"):
        return w
    from edgesim.learning.data.datasets import DatasetError
    from edgesim.learning.sizing import resolve_workload

    try:
        return resolve_workload(sc)
    except DatasetError as e:
        raise ConfigError(f"{sc.path}: [data] {e}") from None


def plan_report(sc) -> PlanReport:
    """The :class:`PlanReport` of a loaded scenario. :class:`ConfigError` (one line naming the scenario) for what
    the formulas refuse; an infeasible budget is a report with :attr:`PlanReport.infeasible` set. Its workload,
    model size and local steps each ask for the data set: it is read once
    (:func:`edgesim.learning.data.datasets.loaded_once`)."""
    from edgesim.learning.data.datasets import loaded_once

    with loaded_once():
        return _plan_report(sc)


def _plan_report(sc) -> PlanReport:
    from edgesim.planning import cell_table, first_round_allocation, make_plan

    workload = resolved_workload(sc)
    hooks = schedulers(sc)
    target_cycles = 0.0  # what the schedulers' extra models train every round (DoFed-SPP's target model)
    for hook in hooks.values():
        target_cycles += hook.target_cycles(sc, workload) or 0.0
    try:
        result = make_plan(sc.system, sc.budget, workload, workload.model_bits, sc.seed, target_cycles)
    except ConfigError:
        raise
    except ValueError as e:  # a plan the formulas refuse (e.g. a zero uplink rate)
        raise ConfigError(f"{sc.path}: {e}") from None
    compressed = compression_plan(sc, workload)
    allocation = None
    if not sc.resources.is_default:  # the [resources] policies' round 0, run on the clock
        run_cfg = sc.learning.run
        k = run_cfg.clients_per_round if run_cfg is not None else sc.system.n_devices
        try:
            allocation = first_round_allocation(sc.system, sc.budget, workload, sc.resources, k, sc.seed,
                                                access_options=sc.access)
        except ValueError as e:
            raise ConfigError(f"{sc.path}: {e}") from None
    steps = steps_summary(sc, workload)
    per_device = device_steps(sc, workload, held_samples(sc))
    warning = few_steps_warning(sc, steps, per_device)
    cells = cell_table(sc.system, sc.seed) if sc.system.n_cells > 1 else None
    return PlanReport(sc, tuple(scenario_algorithms(sc)), result, workload, bool(hooks), compressed, allocation,
                      steps, per_device, (warning,) if warning else (), cells,
                      hierarchy_plan(sc, workload, compressed))


def hierarchy_plan(sc, workload: WorkloadConfig, compressed: dict) -> dict | None:
    """A hierarchical run's edge/cloud schedule (:func:`edgesim.hierarchy.edge_cloud_schedule`; ``None`` for any
    other round mode): one model's bits over the backhaul per algorithm — its ``[compression] backhaul`` codec's, else
    the model's."""
    from edgesim.async_rules import is_hierarchical

    if not is_hierarchical(sc.budget.round_mode):
        return None
    from edgesim.channel import ChannelModel
    from edgesim.hierarchy import edge_cloud_schedule

    n = sc.system.n_cells
    serving = ChannelModel(sc.system, sc.seed).serving_cell
    per_cell = [sum(1 for c in serving if c == cell) for cell in range(n)]
    rounds = (sc.learning.run.rounds if sc.learning.run is not None else None) or sc.budget.rounds
    bits = {a: float(compressed.get(a, {}).get("backhaul", {}).get("bits", workload.model_bits))
            for a in sc.learning.run.algorithms}
    return edge_cloud_schedule(sc.hierarchy, n, rounds, bits, per_cell)
