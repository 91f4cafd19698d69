"""``edgesim run``: a co-simulated run of every algorithm of a scenario, written to a run folder.

Each algorithm gets its own clock (an :class:`edgesim.engine.Simulation`)
over the same channel realisation (same seed) and the same data partition,
so their curves are comparable point for point. Rounds stop at ``run.rounds``
(default: the budget's G), before a round would start at or past ``run.max_time_s`` of simulated time (the
round in progress ends as it would), or — with
``run.stop_on_plateau`` — when the paper's final-accuracy rule is met.

With ``run.checkpoint_every = N`` each algorithm saves its engine and learning
state every N rounds (:mod:`edgesim.scenarios.checkpoint`); ``resume=True`` goes on
from the last checkpoint of a killed run and writes the same bytes as a run
that was never stopped.

``--out`` is checked before any work (:func:`edgesim.results.writing.check_out`):
nothing a user made is ever deleted or renamed; an older run is replaced only
with ``overwrite``. A scenario with ``[run] backend = "parametric"`` is a
physics-only run: the clock with :class:`edgesim.curve.ParametricBackend`,
and torch is never imported.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Callable, Optional

import tomli_w

from edgesim.config import ConfigError, as_written
from edgesim.learning.config import CLIENT_POOLS, LOCAL_POOL, PARAMETRIC, RAY_POOL
from edgesim.learning.data.datasets import DATASETS, loaded_once
from edgesim.records import UPDATE_FIELDS
from edgesim.results.files import CHECKPOINT_DIR, CONFIG, SUMMARY
from edgesim.results.files import PROVENANCE as RUN_JSON
from edgesim.results.metrics import DEFAULT_SUSTAIN_ROUNDS, final_accuracy, time_to_accuracy
from edgesim.results.tables import DEVICE_FIELDS, PLANNED_FIELDS, RESOURCE_FIELDS, LiveTables, write_tables
from edgesim.results.writing import RunFolder, RunLock, check_out, is_finished, is_started_run
from edgesim.scenarios import checkpoint, warm_start
from edgesim.scenarios.algorithm_run import check_budgets, make_backends, resolved_config, run_algorithm
from edgesim.scenarios.checkpoint import AlgorithmRun
from edgesim.scenarios.feasibility import check_deadline_can_be_met, check_updates_can_finish
from edgesim.scenarios.provenance import changed_inputs, input_files, now, provenance
from edgesim.scenarios.schema import Scenario
from edgesim.scenarios.threads import resolve_threads, threads
from edgesim.scenarios.tracking import check_available as check_tracking
from edgesim.scenarios.tracking import make_tracker


def display_name(name: str) -> str:
    """The name plots show for an algorithm (its registration's ``display``; torch-free for physics-only runs)."""
    if name == PARAMETRIC:
        return "Parametric curve"
    from edgesim.learning.algorithms import REGISTRY

    return REGISTRY[name].display if name in REGISTRY else name


def summarize(sc: Scenario, sims: dict[str, AlgorithmRun], model_bits: int, extra: Optional[dict] = None) -> dict:
    """``summary.json``: per algorithm its final accuracy, times to accuracy and totals; ``warnings``.

    At the training-time budget T (``budget.total_time_s``): ``accuracy_at_budget``
    (the last round ending at or before T; ``None`` if none does) and
    ``time_to_accuracy_within_budget_s`` (a crossing after T counts as not
    reached), beside the final accuracy by the plateau rule over all rounds run.
    An algorithm whose every upload was dropped is flagged (``every_upload_dropped``) and named in ``warnings``;
    so is one with rounds in which no device took part (``empty_rounds``, ``no_device_scheduled``: also when no
    round or aggregation happened at all).
    The final, last and best accuracies are those of the rounds that evaluated (``async.eval_every`` > 1 leaves
    some aggregations without an accuracy).
    """
    run_cfg = sc.learning.run
    budget_s = float(sc.budget.total_time_s)
    sustain = DEFAULT_SUSTAIN_ROUNDS if run_cfg.sustain_rounds is None else run_cfg.sustain_rounds
    algs = {}
    for name, sim in sims.items():
        recs = sim.records
        times = [r.end_time_s for r in recs]
        accs = [r.metrics.get("accuracy", float("nan")) for r in recs]
        final, idx, settled = final_accuracy(accs, run_cfg.plateau_tol, run_cfg.plateau_patience) if recs else (float("nan"), -1, False)
        last = recs[-1] if recs else None
        seen = [a for a in accs if not math.isnan(a)]  # the evaluated rounds' ([run] eval_every)
        in_budget = [a for a, t in zip(accs, times) if t <= budget_s and not math.isnan(a)]
        tta = {str(t): time_to_accuracy(times, accs, t, sustain) for t in run_cfg.accuracy_thresholds}
        algs[name] = {
            "display": display_name(name),
            "rounds": len(recs),
            "simulated_time_s": sim.now_s,
            "final_accuracy": final,
            "final_round": idx,
            "final_time_s": times[idx] if recs else None,
            "plateau_reached": settled,
            "last_accuracy": seen[-1] if seen else accs[-1] if recs else None,
            "best_accuracy": max(seen) if seen else max(accs) if recs else None,
            "final_accuracy_var": recs[idx].metrics.get("accuracy_var") if recs else None,
            "time_to_accuracy_s": tta,
            "accuracy_at_budget": in_budget[-1] if in_budget else None,
            "rounds_within_budget": len(in_budget),
            "time_to_accuracy_within_budget_s": {t: (v if v is not None and v <= budget_s else None) for t, v in tta.items()},
            "total_bits_up": last.cum_bits_up if last else 0.0,
            "total_bits_down": last.cum_bits_down if last else 0.0,
            "total_wasted_bits": last.cum_wasted_bits if last else 0.0,
            "total_energy_j": last.cum_energy_j if last else 0.0,
            "every_upload_dropped": every_upload_dropped(recs),
            "empty_rounds": [r.round_index for r in recs if not r.devices and r.level != "cloud"],
            "no_device_scheduled": (not recs and sim.diverged is None) or any(not r.devices and r.level != "cloud"
                                                                              for r in recs),
            "diverged": sim.diverged,
        }
        clouds = [r for r in recs if r.level == "cloud"]
        if any(r.level for r in recs):  # a hierarchical run (docs/model/hierarchy.md): its cloud rounds, backhaul
            algs[name]["cloud_rounds"] = len(clouds)
            algs[name]["total_backhaul_bits"] = clouds[-1].info["cum_backhaul_bits"] if clouds else 0.0
    warnings = [
        f"{name}: every upload of every round was dropped at the deadline (budget.deadline_s = "
        f"{sc.budget.round_deadline_s:g} s); nothing was learned from the devices"
        for name, a in algs.items() if a["every_upload_dropped"]
    ]
    warnings += [empty_rounds_warning(sc, name, a["empty_rounds"], a["rounds"]) for name, a in algs.items()
                 if a["no_device_scheduled"]]
    return {
        "scenario": sc.name,
        "seed": sc.seed,
        "model_bits": model_bits,
        "budget_s": budget_s,
        "final_accuracy_rule": f"first round ending {run_cfg.plateau_patience} consecutive rounds whose mean "
        f"accuracy changes by less than {run_cfg.plateau_tol} from the previous round (else the last round)",
        "time_to_accuracy_rule": f"end of the first round from which the mean accuracy stays at or above the "
        f"threshold for {sustain} evaluated rounds (run.sustain_rounds)",
        "sustain_rounds": sustain,
        "algorithms": algs,
        "warnings": warnings,
        **(extra or {}),
    }


def _spans(indices: list[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2, 5"``."""
    spans: list[list[int]] = []
    for i in indices:
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def empty_rounds_warning(sc: Scenario, name: str, empty: list[int], n_rounds: int) -> str:
    """The one line saying that rounds of ``name`` had no device (``empty``), or that no round or aggregation
    happened at all, and the reasons the scenario allows: no device online, the scheduling policy choosing none."""
    reasons = []
    if sc.availability.model != "always":
        reasons.append(f"no device was online ([availability] model = {sc.availability.model!r})")
    if sc.resources.scheduling != "random":
        reasons.append(f"[resources] scheduling = {sc.resources.scheduling!r} chose no device"
                       + (f" (budget.deadline_s = {sc.budget.deadline_s:g} s)" if sc.budget.deadline_s else ""))
    why = " or ".join(reasons) or "no device took part"
    if not n_rounds:
        return f"{name}: no aggregation or round happened: {why}; nothing was learned ({SUMMARY} marks it)"
    return (f"{name}: {len(empty)} of {n_rounds} rounds had no device (rounds {_spans(empty)}): {why}; nothing was "
            f"learned in them ({SUMMARY} marks it)")


def device_fields(sc: Scenario) -> tuple[str, ...]:
    """``devices.csv``'s columns after ``algorithm``: an async run adds a row per update's fields; devices that
    come and go add why each was dropped ("deadline"/"offline"); a round-based run the resources each device had."""
    fields = DEVICE_FIELDS + (UPDATE_FIELDS if sc.asynchronous else ("drop_reason",) if sc.availability.model != "always"
                              else ())
    if sc.asynchronous:
        return fields
    from edgesim.access import scheme_class

    # the round's band, power and CPU frequency, and the columns the access scheme fills (OFDMA: resource_blocks)
    fields += RESOURCE_FIELDS
    fields += tuple(c for c in scheme_class(sc.system.access).columns if c not in fields)
    # imperfect CSI (system.csi): the gain and rate the round was planned on, beside channel_gain and rate_bps
    return fields + (PLANNED_FIELDS if sc.system.csi not in (None, "perfect") else ())


PLOTS_ENV = "EDGESIM_PLOTS"


def plots_wanted(plots: Optional[bool] = None) -> bool:
    """Whether a run or a sweep draws its figures: ``plots`` when given (``--plots``/``--no-plots``), else the
    environment's :data:`PLOTS_ENV` (``1`` or ``0``; unset or empty: ``1``). Without figures a run folder holds its
    tables, summary and logs; ``edgesim plot FOLDER`` draws the figures later from them (a sweep of many runs, or a
    test suite, skips ~0.3 s of drawing a run). A :class:`ConfigError` names the variable for another value."""
    if plots is not None:
        return bool(plots)
    text = os.environ.get(PLOTS_ENV, "").strip()
    if text not in ("", "0", "1"):
        raise ConfigError(f"{PLOTS_ENV}={text!r}: expected 1 (draw the figures) or 0 (do not; `edgesim plot` "
                          f"draws them later)")
    return text != "0"


def write_results(folder: RunFolder, sc: Scenario, sims: dict[str, AlgorithmRun], model_bits: int,
                  extra: Optional[dict] = None, formats: tuple[str, ...] = ("png",)) -> None:
    from edgesim.plots.curves import RUN_FIGURES, plot_run

    write_tables(folder, sims, device_fields(sc))
    folder.write_json(SUMMARY, summarize(sc, sims, model_bits, extra))
    from edgesim.scenarios.graphs import graph_path, node_link

    for name, sim in sims.items():
        for round_index, time_s, graph in sim.graphs:
            folder.write_json(graph_path(name, round_index), node_link(graph, round_index, time_s))
    if sc.system.n_cells > 1:  # several cells: their layout (cells.csv) and its figure, the same for every algorithm
        write_cells(folder, sc, formats)
    if not formats or not any(sim.records for sim in sims.values()):  # no figures asked for, or every algorithm
        return  # diverged in its first round: no curve
    for stem in RUN_FIGURES:  # listed in the manifest before they are drawn (each with its data, <stem>.csv)
        for fmt in (*formats, "csv"):
            folder.path(f"{stem}.{fmt}")
    plot_run(folder.work, title=f"{sc.name} (seed {sc.seed})", formats=formats)


def write_cells(folder: RunFolder, sc: Scenario, formats: tuple[str, ...] = ("png",)) -> None:
    """``cells.csv`` (the base stations with their bands, devices and round-0 mean SNR/SINR, then each device's
    serving cell and position at placement) and its figure ``cells.<format>`` (docs/model/system_model.md)."""
    from edgesim.planning import cell_table, device_layout
    from edgesim.plots.cells import plot_cells
    from edgesim.results.files import CELLS, CELLS_FIGURE
    from edgesim.results.tables import CELL_FIELDS, cell_rows

    folder.write_csv(CELLS, CELL_FIELDS, cell_rows(cell_table(sc.system, sc.seed), device_layout(sc.system, sc.seed)))
    if not formats:
        return
    for fmt in formats:
        folder.path(f"{CELLS_FIGURE}.{fmt}")
    plot_cells(folder.work, formats, title=f"{sc.name} (seed {sc.seed}): {sc.system.n_cells} cells")


def every_upload_dropped(records: list) -> bool:
    """Every participant of every round was dropped at the deadline (nothing ever arrived)."""
    return bool(records) and all(not r.arrived and r.devices and len(r.dropped) == len(r.devices) for r in records)


def _check_algorithms(sc: Scenario) -> None:
    if sc.physics_only:
        return
    from edgesim.learning.algorithms import REGISTRY
    from edgesim.learning.config import algorithm_of

    for name in sc.learning.run.algorithms:
        if algorithm_of(sc.learning, name) not in REGISTRY:
            raise ConfigError(f"{sc.path}: [run] algorithms: unknown algorithm {name!r}; expected one of: "
                              f"{', '.join(sorted(REGISTRY))}")


def run_scenario(
    sc: Scenario,
    out: Path,
    on_round: Optional[Callable] = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    say: Optional[Callable[[str], None]] = None,
    jobs: int = 1,
    formats: tuple[str, ...] = ("png",),
    argv: Optional[list[str]] = None,
    client_executor: str = LOCAL_POOL,
    ray_address: Optional[str] = None,
    plots: Optional[bool] = None,
) -> Path:
    """Run every algorithm of ``sc`` and write the run folder ``out``; returns its path.

    ``out`` is checked first (:func:`edgesim.results.writing.check_out`), then
    locked (:class:`edgesim.results.writing.RunLock`: a second run, resume or
    overwrite of the same ``out`` is refused naming this process), then checked
    again under the lock, so two runs never mix their files; bad data or
    configuration raise :class:`ConfigError` before anything is written.
    ``resume``: a finished ``out`` of the same scenario is returned as it is;
    an unfinished ``out.incomplete`` goes on from its checkpoints (from scratch
    in it where it has none); a folder whose recorded scenario is missing,
    unreadable or different is refused and left untouched. ``overwrite``
    replaces an older run folder (and only that). ``say(line)`` gets one-line
    notes for the user (what ``resume`` found). ``formats``: the figures' file
    types (``png``, ``pdf``, ``svg``); ``plots``: whether to draw them (:func:`plots_wanted`: ``None``, the
    environment's ``EDGESIM_PLOTS``). ``run.json`` records the provenance, with
    ``argv`` as the command line (default: this process's; a sweep passes its own, since a Ray
    worker's is Ray's).
    The run trains with ``run.threads`` torch threads (:mod:`edgesim.scenarios.threads`);
    the process's own setting is back when it returns. ``jobs`` > 1 trains the
    algorithms in that many worker processes at once (:mod:`edgesim.scenarios.parallel`),
    writing the same bytes. ``client_executor = "ray"`` trains each round's clients on ``run.client_workers`` Ray
    actors (``ray_address``: a cluster's; unset: a Ray on this machine), the same bytes too
    (:mod:`edgesim.learning.client_workers`).
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ConfigError(f"⟨jobs=⟩{jobs!r}: expected an integer >= 1")
    if client_executor not in CLIENT_POOLS:
        raise ConfigError(f"⟨executor=⟩{client_executor!r}: expected one of {', '.join(CLIENT_POOLS)}")
    if ray_address and client_executor != RAY_POOL:
        raise ConfigError("⟨ray-address⟩ needs ⟨executor=⟩ray")
    if client_executor == RAY_POOL and jobs > 1:
        raise ConfigError(f"⟨jobs=⟩{jobs} with ⟨executor=⟩ray: the Ray actors train one algorithm's clients; "
                          f"expected ⟨jobs=⟩1 (the algorithms one after another)")
    if client_executor == RAY_POOL and sc.physics_only:
        raise ConfigError("⟨executor=⟩ray: a physics-only run trains no clients; expected ⟨executor=⟩local")
    formats = formats if plots_wanted(plots) else ()
    out = Path(out)
    check_out(out, overwrite=overwrite, resume=resume)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"⟨out=⟩{out}: cannot create {out.parent}: {e.strerror or e}") from None
    from edgesim.scenarios.parallel import workers_for

    with RunLock(out), threads(resolve_threads(sc.learning.run.threads)), loaded_once(), \
            workers_for(sc, jobs, True) as workers:  # every round comes back: rounds.csv grows as the run goes
        return _run_scenario(sc, out, on_round, resume=resume, overwrite=overwrite, say=say, workers=workers,
                             formats=formats, argv=argv, clients=(client_executor, ray_address))


def _run_scenario(sc: Scenario, out: Path, on_round: Optional[Callable], *, resume: bool, overwrite: bool,
                  say: Optional[Callable[[str], None]], workers, formats: tuple[str, ...],
                  argv: Optional[list[str]], clients: tuple = (LOCAL_POOL, None)) -> Path:
    say = say or (lambda line: None)
    if resume and overwrite:
        raise ConfigError("⟨resume⟩ and ⟨overwrite⟩: give one of them (go on with a run, or replace it)")
    out = Path(out)
    check_out(out, overwrite=overwrite, resume=resume, holding_lock=True)
    _check_algorithms(sc)
    tracking = sc.learning.run.tracking
    check_tracking(tracking, sc.path)
    config = resolved_config(sc)
    fp = checkpoint.fingerprint(config)
    folder = RunFolder(out)
    resuming = False
    saved: dict = {}
    inputs = input_files(sc)
    if resume:
        if folder.final.is_dir() and is_finished(folder.final):
            checkpoint.check_same_scenario(folder.final / CONFIG, config)
            _check_same_inputs(folder.final, inputs)
            say(f"{folder.final} has already finished; nothing to resume")
            return folder.final
        if is_started_run(folder.work):  # stopped before it wrote its scenario: nothing to go on from
            say(f"{folder.work} was stopped before it wrote its {CONFIG}: starting from scratch in it")
        elif folder.work.is_dir() and any(folder.work.iterdir()):
            checkpoint.check_same_scenario(folder.work / CONFIG, config)
            _check_same_inputs(folder.work, inputs)
            resuming = True
            # read (and so check) every checkpoint before anything is written
            saved = {name: checkpoint.load(folder.work, name, fp) for name in sc.learning.run.algorithms}
            if any(v is not None for v in saved.values()):
                say(f"resuming {folder.work} from its checkpoints")
            else:
                say(f"{folder.work} has no checkpoint (run.checkpoint_every = "
                    f"{sc.learning.run.checkpoint_every}): starting from scratch in it")
        else:
            say(f"nothing to resume at {out} (no {folder.work.name}/): starting from scratch")
    build_backend, model_bits, extra = make_backends(sc, *clients)
    check_budgets(sc, build_backend)
    check_updates_can_finish(sc, build_backend)
    check_deadline_can_be_met(sc, build_backend)
    for line in plan_warnings(sc):  # once the scenario is known to run, before any training: as `edgesim plan`
        say(f"warning: {line}")
    if not sc.physics_only and not resuming and DATASETS[sc.learning.data.dataset].kind == "image":
        say(views_line(sc))
    folder.start(resume=resuming)
    if resuming:
        folder.mark(f"resumed {_now()} from the checkpoints in {CHECKPOINT_DIR}/")
    run_json = provenance(sc.path, with_torch=not sc.physics_only, started=_now(), argv=argv,
                          plugins=sc.learning.run.plugins)
    if inputs:
        run_json["inputs"] = inputs
    if not sc.physics_only:  # how training rounded and laid out its numbers, on what hardware
        from edgesim.learning.context import training_numerics
        from edgesim.learning.device import compute_device
        from edgesim.learning.numerics import describe

        run_json["numerics"] = describe(training_numerics(sc.learning.train),
                                        compute_device(sc.learning.train.device))
    if resuming and folder.path(RUN_JSON).is_file():  # the first start's provenance, and when it was resumed
        try:
            old = json.loads(folder.path(RUN_JSON).read_text())
            run_json = {**old, "finished": None, "resumed": [*old.get("resumed", []), _now()]}
        except (OSError, ValueError):
            pass
    tracker = live = None
    try:
        if not resuming:
            folder.write_text(CONFIG, tomli_w.dumps(config))
        folder.write_json(RUN_JSON, run_json)
        tracker = make_tracker(tracking, config, folder.work, out.name, folder.path, say)
        if tracker is not None:  # fed each round as it ends, before the caller's on_round
            on_round = tracker.feeding(on_round)
        live = LiveTables(folder, device_fields(sc))  # rounds.csv and devices.csv grow as the rounds end
        on_round = live.feeding(on_round)
        names = list(sc.learning.run.algorithms)
        warm = warm_start.obtain(sc, build_backend, folder.work, fp, resuming)
        if warm is not None:
            extra = {**extra, "warm_start": warm.summary()}
        if workers is not None:
            def run_here(name: str, report: Optional[Callable]) -> AlgorithmRun:
                return run_algorithm(sc, build_backend, name, report, checkpoint_dir=folder.work, fingerprint=fp,
                                     saved=saved.get(name), warm=warm)

            sims = workers.run(sc, names, run_here, work=folder.work, fingerprint=fp, resume=resuming,
                               on_round=on_round, build_backend=build_backend, warm=warm)
        else:
            sims = {name: run_algorithm(sc, build_backend, name, on_round, checkpoint_dir=folder.work,
                                        fingerprint=fp, saved=saved.get(name), warm=warm) for name in names}
        live.close()  # the finished files replace the live ones
        write_results(folder, sc, sims, model_bits, extra, formats)
        folder.write_json(RUN_JSON, {**run_json, "finished": _now()})
        folder.remove(CHECKPOINT_DIR)  # only an unfinished run needs them
        if tracker is not None:
            tracker.close()
    except BaseException as caught:  # the unfinished folder survives every failure, marked with its cause
        e = plugin_exit(caught, sc.path)
        if live is not None:
            live.close()
        if tracker is not None:
            tracker.fail()
        try:
            folder.mark(failure_note(e))
        except OSError:  # a full disk may refuse the note too; the error itself is what the user needs
            pass
        if isinstance(e, ConfigError) and folder.work.is_dir():
            how = ("; ⟨+resume⟩ to go on from its checkpoints once the cause is fixed"
                   if sc.learning.run.checkpoint_every else "")
            raise e.reworded(f"{e} (the unfinished run is kept in {folder.work}{how})") from None
        if e is not caught:
            raise e from None
        raise
    finally:
        close = getattr(build_backend, "close", None)  # the client workers ([run] client_workers, Ray actors)
        if close is not None:
            close()
    final = folder.finish()
    if tracker is not None:
        tracker.finish(final)
    return final


def views_line(sc: Scenario) -> str:
    """The run's augmentation choices in one line, said once at its start: the views FixMatch-style methods train
    on and whether they mirror images (``[data] hflip``, given or the data set's own rule)."""
    data = sc.learning.data
    given = isinstance(sc.raw.get("data"), dict) and "hflip" in sc.raw["data"]
    flip = "flip (p = 1/2) + " if data.hflip else ""
    why = "as the scenario sets" if given else f"the rule of dataset = {data.dataset!r}"
    return (f"note: views: weak = {flip}reflect shift, strong = weak + RandAugment(2, 10) + Cutout; "
            f"[data] hflip = {str(data.hflip).lower()} ({why}; set [data] hflip to change it)")


def plugin_exit(e: BaseException, where: str) -> BaseException:
    """A ``SystemExit`` raised while a run runs is no request to end edgesim (edgesim's own code never calls
    ``sys.exit`` there): some plugin's code (an algorithm, a policy, a codec) called it. It becomes a
    :class:`edgesim.learning.plugins.PluginError` (one line, non-zero exit, the unfinished folder kept for
    ``--resume``); any other error is returned as it is."""
    if not isinstance(e, SystemExit):
        return e
    from edgesim.learning.plugins import PluginError

    return PluginError(f"{where}: the run's code called sys.exit({e.code!r}) (a plugin's algorithm, policy or "
                       f"codec?); expected it to return or raise an error")


def _check_same_inputs(folder: Path, inputs: dict) -> None:
    """Refuse to resume ``folder`` when a file it read at its start (``run.json``'s ``inputs``: the data set, the
    availability trace) now reads differently: a run of two data sets would be reported as one."""
    try:
        recorded = json.loads((folder / RUN_JSON).read_text()).get("inputs", {})
    except (OSError, ValueError, AttributeError):
        return  # a run folder from before run.json (or its inputs): nothing to compare
    if not isinstance(recorded, dict):
        return
    change = changed_inputs(recorded, inputs)
    if change is not None:
        raise ConfigError(f"⟨resume⟩: {folder} cannot go on: {change}; a run on two data sets would be reported as "
                          "one. Restore the file, or run again from scratch (⟨+overwrite⟩, or another ⟨out⟩)")


def plan_warnings(sc: Scenario) -> list[str]:
    """What ``edgesim plan`` warns of for ``sc`` that a run says before training (:mod:`edgesim.scenarios.plan`):
    too few local steps a round on the median device of the run's own partition."""
    if sc.physics_only:
        return []
    from edgesim.scenarios.plan import device_steps, few_steps_warning, held_samples

    # held_samples asks for the data set again (make_backends loaded it: the run's loaded_once gives it back). The
    # two counts are not the same:
    # the plan's D_n is each device's supervised samples (train + labeled = len(x_sup)), while make_backends counts
    # what a device holds (x_sup + x_unl), larger wherever a partition leaves devices unlabelled data (dirichlet's
    # labeled_ratio_alpha, subset/normal, feddure_*, labels_at_server*; only "iid" at labeled_fraction = 1 agrees;
    # tests/test_plan_report.py).
    w = sc.workload
    steps = {"local_iterations": w.local_iterations, "batch_size": sc.learning.train.batch_size}
    warning = few_steps_warning(sc, steps, device_steps(sc, w, held_samples(sc)))
    return [warning] if warning else []


def failure_note(e: BaseException) -> str:
    """The ``INCOMPLETE`` marker's line for a run that ended with ``e`` (an interrupt says ``interrupted``)."""
    if isinstance(e, KeyboardInterrupt):
        return f"interrupted: {type(e).__name__}: {e} ({_now()})"
    if isinstance(e, ConfigError):
        return as_written(f"failed: {e} ({_now()})")
    return as_written(f"failed: {type(e).__name__}: {e} ({_now()})")


_now = now
