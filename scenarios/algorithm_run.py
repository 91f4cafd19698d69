"""One algorithm of a run: its clock, its backend and its rounds (what a ``--jobs`` worker runs too).

:func:`make_backends` loads the scenario's data once and gives the builder of every algorithm's
learning backend (or the torch-free curve of a physics-only run); :func:`run_algorithm` runs one
algorithm on its own clock (:func:`make_simulation`), with checkpoints and a warm start; :func:`resolved_config`
is the scenario as ``config.toml`` records it. :mod:`edgesim.scenarios.run` (every algorithm, the run folder)
and :mod:`edgesim.scenarios.parallel` (algorithms in worker processes) both call it, so neither imports the other
back.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Callable, Mapping, Optional

from edgesim.async_rules import is_hierarchical
from edgesim.backend import DeviceLoss, Diverged, loss_feedback
from edgesim.budget import InfeasibleBudgetError
from edgesim.config import ConfigError
from edgesim.engine import Simulation
from edgesim.learning.config import LOCAL_POOL, RAY_POOL
from edgesim.results.metrics import final_accuracy
from edgesim.scenarios import checkpoint
from edgesim.scenarios.checkpoint import AlgorithmRun
from edgesim.scenarios.round_watch import round_watch
from edgesim.scenarios.schema import Scenario
from edgesim.scenarios.signals import raise_if_signalled
from edgesim.scenarios.warm_start import flagged


def _drop_none(obj):
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


def resolved_config(sc: Scenario) -> dict:
    """Every section with every default filled in, and the seed (``None`` values omitted): a scenario that
    ``edgesim run`` accepts and that reproduces the run. Provenance (versions, host, times): ``run.json``."""
    out = {"name": sc.name, "description": sc.description, "seed": sc.seed}
    for name in ("system", "budget", "workload"):
        out[name] = dataclasses.asdict(getattr(sc, name))
    if sc.asynchronous:
        out["async"] = dataclasses.asdict(sc.asynchrony)
    if is_hierarchical(sc.budget.round_mode):
        out["hierarchy"] = dataclasses.asdict(sc.hierarchy)
    if sc.availability.model != "always":
        out["availability"] = dataclasses.asdict(sc.availability)
    if not sc.resources.is_default:  # only when set: the defaults' runs keep their fingerprint
        out["resources"] = {k: v for k, v in dataclasses.asdict(sc.resources).items()  # a key added later: only
                            if not (k == "resource_blocks" and v == "equal")}  # when set, old fingerprints kept
    if sc.access is not None and dataclasses.asdict(sc.access):  # a scheme with options (tdma, fdma have none)
        out["access"] = dataclasses.asdict(sc.access)
    if sc.physics_only:  # only what the run uses: no data, no training, no algorithms
        out["run"] = dataclasses.asdict(sc.learning.run)
        out["parametric"] = dataclasses.asdict(sc.parametric)
    else:
        for name in ("data", "train", "run"):
            out[name] = dataclasses.asdict(getattr(sc.learning, name))
        out["run"].pop("client_workers")  # where the clients train, not what: the run folder is the same bytes
        variants = sc.learning.variants
        out["algorithms"] = {a: dataclasses.asdict(sc.learning.options(a)) for a in sc.learning.run.algorithms
                             if a not in variants}
        if variants:  # each variant's algorithm, every option and its round mode: a scenario that runs it again
            out["variants"] = {n: {"algorithm": v.algorithm, **dataclasses.asdict(sc.learning.options(n)),
                                   **({"round_mode": v.round_mode} if v.round_mode is not None else {})}
                               for n, v in variants.items()}
        for a, table in resolved_compression(sc).items():  # "" is [compression]; a name its own table
            (out["variants"][a] if a in variants else out["algorithms"][a] if a else out)["compression"] = table
    return _drop_none(out)


def resolved_compression(sc: Scenario) -> dict:
    """``{"": [compression], NAME: [algorithms.NAME.compression] where it differs}`` as tables, only when the
    run compresses anything: without it, ``config.toml`` is what it was before compression existed."""
    codecs = sc.learning.codecs  # every algorithm's, resolved by the scenario
    names = sc.learning.run.algorithms
    if all(codecs[a].is_none for a in names):
        return {}
    default = sc.learning.compression[""]
    variants = sc.learning.variants

    def own(a: str) -> bool:  # a variant's table is also kept where its algorithm's differs (it would inherit it)
        return codecs[a] != default or (a in variants and codecs[variants[a].algorithm] != default)

    return {"": default.to_dict(), **{a: codecs[a].to_dict() for a in names if own(a)}}


def _finished(sc: Scenario, sim: Simulation, accs: list[float]) -> bool:
    """Whether the algorithm stops before another round (rounds, simulated time, plateau)."""
    run_cfg = sc.learning.run
    if sim.round_index >= (run_cfg.rounds or sc.budget.rounds):
        return True
    if run_cfg.max_time_s is not None and sim.now_s >= run_cfg.max_time_s:
        return True
    if not accs or not run_cfg.stop_on_plateau:
        return False
    return final_accuracy(accs, run_cfg.plateau_tol, run_cfg.plateau_patience)[2]


def run_algorithm(
    sc: Scenario,
    build_backend: Callable,
    name: str,
    on_round: Optional[Callable] = None,
    *,
    checkpoint_dir: Optional[Path] = None,
    fingerprint: str = "",
    saved: Optional[dict] = None,
    warm=None,
) -> AlgorithmRun:
    """Run one algorithm on its own clock; returns its records, events and final clock.

    ``build_backend(name)`` gives the algorithm's learning backend. With
    ``checkpoint_dir`` and ``run.checkpoint_every > 0`` the state is saved
    every that many rounds and when the algorithm finishes; ``saved`` (a
    :func:`edgesim.scenarios.checkpoint.load` result) is where it starts from (a
    finished algorithm is not run again). ``warm`` (a
    :class:`edgesim.scenarios.warm_start.WarmStart`) is the run's warm start: its
    rounds are this algorithm's first, its model the backend's initial model
    and its engine state the clock's start.
    """
    every = sc.learning.run.checkpoint_every if checkpoint_dir is not None else 0
    out = AlgorithmRun(name)
    if saved is not None:
        out.records, out.events, out.now_s = saved["records"], saved["events"], float(saved["now_s"])
        out.graphs = list(saved["graphs"])
        if on_round is not None:
            for rec in out.records:
                on_round(name, rec)
        if saved["done"]:
            return out
    elif warm is not None:
        out.records, out.events = list(warm.records), list(warm.events)
        if on_round is not None:
            for rec in out.records:
                on_round(name, rec)
    sc = scenario_for(sc, name)
    backend = build_backend(name) if warm is None else build_backend(name, warm.model)
    sim = make_simulation(sc, backend, name, device_losses=loss_feedback(build_backend, backend))
    backend = sim.backend
    if every:
        checkpoint.check_resumable(backend, name)
    if saved is not None:
        sim.load_state_dict(saved["engine"])
        backend.load_state_dict(saved["backend"])
    elif warm is not None:
        sim.load_state_dict(warm.engine)
    accs = [r.metrics.get("accuracy", float("nan")) for r in out.records]
    n_events = len(out.events)
    measure = getattr(build_backend, "measure", None)  # which rounds and devices are evaluated
    watch = round_watch(name)  # --round-timeout-s (None without a limit)
    while not _finished(sc, sim, accs):
        raise_if_signalled()  # a Ctrl-C or kill whose exception a finalizer dropped ends the run here
        if measure is not None:
            measure.round_index = sim.round_index
        try:
            with watch.round(sim.round_index) if watch is not None else contextlib.nullcontext():
                rec = sim.run_round()
        except Diverged as e:  # keep its rounds so far; the other algorithms go on
            out.diverged = divergence_message(sc, name, str(e))
            break
        except InfeasibleBudgetError as e:  # a later round's channel left no (B, K) that fits
            raise ConfigError(f"{sc.path}: {e}") from None
        if rec is None:  # asynchronous: no device can ever update again (all offline for good)
            break
        check_record(sc, name, rec)
        if warm is not None:
            rec = flagged(rec, False)
        out.records.append(rec)
        accs.append(rec.metrics.get("accuracy", float("nan")))
        if callable(getattr(backend, "graph", None)):
            out.graphs.append((rec.round_index, rec.end_time_s, backend.graph()))
        if on_round is not None:
            on_round(name, rec)
        if every:
            done = _finished(sc, sim, accs)
            if done or sim.round_index % every == 0:
                events = out.events[:n_events] + sim.events
                checkpoint.save(checkpoint_dir, name, fingerprint=fingerprint, sim=sim, backend=backend,
                                records=out.records, events=events, done=done, use_torch=not sc.physics_only,
                                graphs=out.graphs)
    if measure is not None:
        measure.round_index = None
    if watch is not None:
        watch.close()
    out.events = out.events[:n_events] + sim.events
    out.now_s = sim.now_s
    if out.diverged is not None:  # nothing of the round that diverged: it has no record
        last = out.records[-1] if out.records else None
        out.events = [e for e in out.events if last is not None and e.round_index <= last.round_index]
        out.now_s = last.end_time_s if last is not None else 0.0
    return out


def scenario_for(sc: Scenario, name: str) -> Scenario:
    """The scenario as algorithm ``name`` runs it: the run's, with a variant's own ``round_mode``
    (:func:`edgesim.scenarios.schema.variant_budget`)."""
    from edgesim.scenarios.schema import variant_budget

    budget = variant_budget(sc.budget, sc.learning, name)
    return sc if budget is sc.budget else dataclasses.replace(sc, budget=budget)


def make_simulation(sc: Scenario, backend, name: str, device_losses: Optional[Callable] = None):
    """The clock of one algorithm, with the scenario's ``[availability]``: rounds (:class:`Simulation`) or, for
    ``round_mode = "fedasync"``/``"fedbuff"``, :class:`edgesim.asynchrony.AsyncSimulation` with its ``[async]``
    table (the backend's own ``asynchronous()`` mode — the FedAvg family has one — unless it is the torch-free
    curve)."""
    from edgesim.availability import make_availability

    availability = make_availability(sc.availability, sc.system.n_devices, sc.seed)
    if is_hierarchical(sc.budget.round_mode):
        from edgesim.hierarchy import HierarchicalSimulation

        if not callable(getattr(backend, "hierarchical", None)):
            from edgesim.learning.registry import hierarchical_algorithms

            raise ConfigError(f"{sc.path}: [budget] round_mode = 'hierarchical': algorithm {name!r} "
                              f"({type(backend).__name__}) has no hierarchical form; expected one of "
                              f"{', '.join(hierarchical_algorithms())}")
        try:
            backend = backend.hierarchical()
        except ValueError as e:
            raise ConfigError(f"{sc.path}: [algorithms.{name}] {e}") from None
        return HierarchicalSimulation(sc.system, sc.budget, backend, sc.hierarchy, seed=sc.seed,
                                      availability=availability, resources=sc.resources, device_losses=device_losses,
                                      access_options=sc.access)
    if not sc.asynchronous:
        return Simulation(sc.system, sc.budget, backend, seed=sc.seed, availability=availability,
                          resources=sc.resources, device_losses=device_losses, access_options=sc.access)
    from edgesim.asynchrony import AsyncBackend, AsyncSimulation

    if not isinstance(backend, AsyncBackend):
        if not callable(getattr(backend, "asynchronous", None)):
            from edgesim.learning.registry import asynchronous_algorithms

            raise ConfigError(
                f"{sc.path}: [budget] round_mode = {sc.budget.round_mode!r}: algorithm {name!r} "
                f"({type(backend).__name__}) has no asynchronous mode: FedAsync and FedBuff combine independent "
                f"device updates of one shared model, which only the algorithms that declare one do "
                f"({', '.join(asynchronous_algorithms())}); its round couples the devices (or the server) in ways an "
                f"arrival-by-arrival server does not have")
        backend = backend.asynchronous()
    return AsyncSimulation(sc.system, sc.budget, backend, sc.asynchrony, seed=sc.seed, availability=availability,
                           resources=sc.resources, device_losses=device_losses, access_options=sc.access)


def check_record(sc: Scenario, name: str, rec) -> None:
    """A round's record holds what a run folder may: finite times, bits and energies >= 0 and an ``accuracy`` in
    [0, 1] (the rules its readers apply, docs/use/run_folders.md). Anything else is named here, with its round and the
    scenario keys behind it, instead of as a corrupt ``rounds.csv`` later."""
    import math
    from numbers import Real

    values = {"start_time_s": rec.start_time_s, "time_s": rec.end_time_s, "bits_up": rec.bits_up,
              "bits_down": rec.bits_down, "cum_bits_up": rec.cum_bits_up, "cum_bits_down": rec.cum_bits_down,
              "cum_wasted_bits": rec.cum_wasted_bits, "energy_j": rec.radio_energy_j + rec.compute_energy_j,
              "cum_energy_j": rec.cum_energy_j, "server_s": rec.server_s}
    for key, value in values.items():
        if not (isinstance(value, Real) and math.isfinite(value) and value >= 0):
            source = {"energy_j": "system.kappa, system.cpu_freq_hz, system.tx_power_dbm and the workload's cycles",
                      "cum_energy_j": "system.kappa, system.cpu_freq_hz, system.tx_power_dbm and the workload's cycles"
                      }.get(key, "the scenario's [system], [budget] and [workload] values")
            raise ConfigError(f"{sc.path}: {name}, round {rec.round_index}: {key} = {value!r}; expected a finite "
                              f"number >= 0 (check {source})")
    for key, value in rec.metrics.items():
        if key == "accuracy" and not (isinstance(value, Real) and 0 <= value <= 1):
            raise ConfigError(f"{sc.path}: {name}, round {rec.round_index}: its backend reported accuracy = "
                              f"{value!r}; expected an accuracy in [0, 1] (the algorithm's complete_round)")
        if isinstance(value, Real) and math.isinf(value):
            raise ConfigError(f"{sc.path}: {name}, round {rec.round_index}: its backend reported {key} = {value!r}; "
                              f"expected a finite number (the algorithm's complete_round)")


def check_budgets(sc: Scenario, build_backend: Callable) -> None:
    """Before any round: each algorithm that decides its round under the budget (it declares a planning hook; its
    backend's ``check_budget(view)``, DoFed-SPP's Ineq. 26) checks it at the first round's system view, with the
    cycles its rounds charge — exactly as ``edgesim plan`` reports it. An infeasible budget is one line naming the
    scenario, and nothing is written."""
    if sc.physics_only:
        return
    from edgesim.learning.config import algorithm_of
    from edgesim.learning.registry import decides_budget

    for name in sc.learning.run.algorithms:
        if not decides_budget(algorithm_of(sc.learning, name)):  # a planning hook; no backend built only to be asked
            continue
        backend = build_backend(name)
        check = getattr(backend, "check_budget", None)
        if check is None:
            continue
        try:
            check(Simulation(sc.system, scenario_for(sc, name).budget, backend, seed=sc.seed,
                             access_options=sc.access).system_view())
        except InfeasibleBudgetError as e:
            raise ConfigError(f"{sc.path}: {e}") from None


def divergence_message(sc: Scenario, name: str, error: str) -> str:
    """The backend's divergence note with the learning rate that was in effect: the algorithm's own ``lr`` when
    its table (or its defaults, FedDure's) sets one, else ``train.lr``; and what else its config names
    (``divergence_hint()``: pFedMe's inner step size); under FedBuff, ``async.server_lr`` too — first when it is
    above 1, its default."""
    cfg = sc.learning.algorithms.get(name)
    if cfg is None:
        from edgesim.learning.algorithms import ALGORITHMS

        cfg = ALGORITHMS[name].config_cls()
    table = f"[variants.{name}]" if name in sc.learning.variants else f"[algorithms.{name}]"
    own = getattr(cfg, "lr", None)
    hint = (f"lower {table} lr (= {own:g})" if own is not None
            else f"lower train.lr (= {sc.learning.train.lr:g})")
    other = getattr(cfg, "divergence_hint", None)  # another step size of its own (pFedMe's inner one)
    if callable(other):
        hint = f"{hint} or {table} {other()}"
    if sc.budget.round_mode == "fedbuff":  # the server's own step multiplies every buffered update
        server_lr = float(sc.asynchrony.server_lr)
        step = f"lower async.server_lr (= {server_lr:g}, FedBuff's server step)"
        first, then = (step, hint) if server_lr > 1 else (hint, step)
        hint = f"{first} or {then.removeprefix('lower ')}"
    return f"{error.split('; lower ')[0]}; {hint} or check the data"


class LossReportingBuilder:
    """A run's backend builder (``builder(name, start=None)``) whose algorithms record their devices' losses in one
    shared log: it is the run's :class:`edgesim.backend.LossFeedback` (``device_losses()``, each trained device's
    statistic since the last call), which :func:`run_algorithm` hands the engine."""

    def __init__(self, build: Callable, log) -> None:
        self.build, self.log = build, log

    def __call__(self, name: str, start: Optional[dict] = None):
        return self.build(name, start)

    def device_losses(self) -> Mapping[int, DeviceLoss]:
        return self.log.take()

    def __getattr__(self, name: str):  # what the run reads off the builder (``measure``, ``close``) is the build's
        if name == "build":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.build, name)


def make_backends(sc: Scenario, client_pool: str = LOCAL_POOL, ray_address: Optional[str] = None
                  ) -> tuple[Callable, float, dict]:
    """``(build_backend, model_bits, extra summary)`` of a scenario; data errors are :class:`ConfigError`.

    With ``[run] client_workers`` > 1 (or ``client_pool = "ray"``) each round's clients train on that many
    workers (:class:`edgesim.learning.client_workers.WorkerExecutor`: local processes, or Ray actors on
    ``ray_address``'s cluster); ``build_backend.close()`` stops them."""
    if sc.physics_only:
        from edgesim.curve import ParametricBackend

        p, run_cfg = sc.parametric, sc.learning.run

        def build(name: str):
            return ParametricBackend(sc.system.n_devices, run_cfg.clients_per_round, sc.workload, sc.seed,
                                     a0=p.a0, a_max=p.a_max, rate=p.rate, download_bits=p.download_bits)

        return build, float(sc.workload.model_bits), {}
    from edgesim.learning.algorithms import REGISTRY
    from edgesim.learning.config import algorithm_of
    from edgesim.learning.context import build_context
    from edgesim.learning.data.datasets import DatasetError

    data_cfg = sc.learning.data
    try:
        ctx = build_context(
            sc.seed, data_cfg, sc.learning.train, sc.learning.run, sc.workload, sc.system.n_devices
        )
    except DatasetError as e:
        raise ConfigError(f"{sc.path}: [data] {e}") from None
    except ConfigError as e:  # [train] precision on hardware without it
        raise ConfigError(f"{sc.path}: {e}") from None
    except ValueError as e:
        raise ConfigError(f"{sc.path}: [data] partition {data_cfg.partition!r}: {e}") from None

    def build(name: str, start: Optional[dict] = None):
        """``name``'s backend on the run's context; ``start``: the model it starts from (a warm start's). A
        variant is built by its algorithm's builder, under the algorithm's name: the same random streams."""
        spec = REGISTRY[algorithm_of(sc.learning, name)]
        cfg = sc.learning.options(name)
        own = ctx if sc.learning.compression is None else dataclasses.replace(
            ctx, compression=sc.learning.codec(name))
        if start is None:
            return spec.build(own, cfg)
        from edgesim.learning.algorithms.common import to_device

        return spec.build(dataclasses.replace(own, start_state=to_device(ctx, start)), cfg)

    check_data(sc, ctx)
    check_encodings(sc)
    ctx.measure = build.measure = evaluation_of(sc, ctx)  # set to each round by run_algorithm
    workers = sc.learning.run.client_workers or 1
    if workers > 1 or client_pool == RAY_POOL:
        import torch

        from edgesim.learning.client_workers import WorkerExecutor

        ray = {}
        if client_pool == RAY_POOL:  # the application owns Ray's import and how a cluster is joined
            from edgesim.scenarios.ray_cluster import import_ray, join_cluster

            module = import_ray()
            ray = {"ray": module, "join": lambda address: join_cluster(module, address)}
        try:
            ctx.executor = WorkerExecutor(ctx.executor, workers, ctx, threads=torch.get_num_threads(),
                                          pool=client_pool, address=ray_address, **ray)
        except ValueError as e:
            raise ConfigError(f"{sc.path}: [run] client_workers = {workers}: {e} ([train] executor = "
                              f"{sc.learning.train.executor!r}; expected \"sequential\", or \"auto\" on a "
                              f"CPU)") from None
        build.close = ctx.executor.close
    if sc.resources.scheduling != "random":  # a scheduling policy may rank by the devices' losses (Oort)
        from edgesim.learning.algorithms.common import LossLog

        ctx.loss_log = LossLog()
        build = LossReportingBuilder(build, ctx.loss_log)  # the run's loss feedback, read after every round

    held = [len(c.x_sup) + len(c.x_unl) for c in ctx.clients]
    planned = sc.workload.samples_per_device
    if planned == "auto":
        from edgesim.learning.sizing import median_samples

        planned = median_samples(held)
    extra = {"samples_per_device": {
        "plan": planned,
        "note": "workload.samples_per_device is the D of `edgesim plan`; this run charges each device I*C*D_n "
                "for its own data (min/mean/max below: samples each device holds)",
        "min": min(held), "mean": sum(held) / len(held), "max": max(held),
    }}
    if ctx.data_record is not None:  # a user's own npz / image folder: the file, class counts, normalisation
        extra["dataset"] = ctx.data_record
    return build, ctx.model_bits, extra


def check_encodings(sc: Scenario) -> None:
    """Every codec the run's algorithms use has its encoder and decoder registered (a codec plugin registers both
    sides, docs/extend/writing_a_codec.md), before any round: one line naming the table and the codec."""
    from edgesim.learning.compression import ENCODINGS

    for name in sc.learning.run.algorithms:
        cfg = sc.learning.codec(name)
        for direction in ("uplink", "downlink"):
            method = getattr(cfg, direction).method
            if method not in ENCODINGS:
                raise ConfigError(f"{sc.path}: [compression] {direction}.method = {method!r} (for {name!r}): the codec "
                                  f"has no encoding on the learning side; expected its plugin to register one with "
                                  f"edgesim.learning.compression.register_encoding({method!r})")


def evaluation_of(sc: Scenario, ctx):
    """The run's :class:`edgesim.learning.evaluation.Measure`: ``[run] eval_every``, ``eval_devices`` (a sample
    from the run's seed, stream ``"eval_devices"``, the same for every algorithm) and ``label_quality``."""
    from edgesim.learning.evaluation import EvalPlan, Measure

    run_cfg = sc.learning.run
    rounds = run_cfg.rounds or sc.budget.rounds
    return Measure(EvalPlan.from_config(run_cfg, ctx.n_devices, rounds, ctx.rng("eval_devices")))


def check_data(sc: Scenario, ctx) -> None:
    """Each algorithm's ``check_data(ctx, cfg)`` on the loaded data, before any algorithm runs (one line)."""
    from edgesim.learning.algorithms import REGISTRY
    from edgesim.learning.config import algorithm_of

    for name in sc.learning.run.algorithms:
        spec = REGISTRY[algorithm_of(sc.learning, name)]
        if spec.check_data is not None:
            try:
                spec.check_data(ctx, sc.learning.options(name))
            except ValueError as e:
                table = "variants" if name in sc.learning.variants else "algorithms"
                raise ConfigError(f"{sc.path}: [{table}.{name}] {e}") from None
