"""The ``edgesim`` command line: ``plan``, ``run``, ``sweep``, ``plot``, ``list``, ``--version``."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from edgesim.config import ConfigError, cli_word, worded
from edgesim.results.files import MARKER, ROUNDS, SUMMARY, SWEEP_SPEC, SWEEP_TABLE
from edgesim.results.reading import expand, folder_kind, read_summary
from edgesim.scenarios.round_watch import ENV as ROUND_TIMEOUT_ENV
from edgesim.scenarios.signals import handle_signals, interrupt_handled

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="edgesim: wireless edge-network co-simulator for federated semi-supervised learning.",
)

def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"edgesim {version('edgesim')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print edgesim's version and exit."),
) -> None:
    """edgesim: wireless edge-network co-simulator for federated semi-supervised learning."""


SCENARIO_ARG = typer.Argument(None, help="Scenario TOML file (default: the bundled scenarios/default.toml).")
SET_OPT = typer.Option(None, "--set", help="Override any scenario key: --set system.bandwidth_hz=2e6 (repeatable; "
                       "lists unquoted: --set run.algorithms=fedavg,fedprox).")
FORMAT_OPT = typer.Option("png", "--format", help="Figure formats, comma-separated: png, pdf, svg (e.g. png,pdf).")
PLOTS_OPT = typer.Option(
    None, "--plots/--no-plots", help="Draw the figures, or not (`edgesim plot FOLDER` draws them later from the "
    "tables); default: draw them, unless the environment has EDGESIM_PLOTS=0.")
STYLE_OPT = typer.Option("paper", "--style", help="Figure style: paper (a 3.4 in column, 6-8 pt fonts) or slides "
                         "(5.5 in, fonts 1.8 times as large).")
WIDTH_OPT = typer.Option(None, "--width", help="Figure width in inches (the column width figures are sized from; "
                         "default: the style's, 3.4 for paper). Fonts keep the style's sizes.")
DATA_DIR_HELP = "Directory of the data set files (data.data_dir; default: $EDGESIM_DATA)."
THREADS_OPT = typer.Option(
    None, "--threads", help='Torch threads per run: an integer or "auto" (the cores); same as --set run.threads=N. '
    "Default: the scenario's run.threads (1). Results depend on it, never on --jobs or --executor.")


def _threads_override(threads: Optional[str]) -> list[str]:
    """``--threads N`` as the override ``run.threads=N`` (validated like the scenario key)."""
    if threads is None:
        return []
    if threads == "auto":
        return ['run.threads="auto"']
    if not threads.isdigit() or int(threads) < 1:
        _fail(f'--threads {threads}: expected an integer >= 1 or "auto"')
    return [f"run.threads={int(threads)}"]


def _formats(text: str) -> tuple[str, ...]:
    from edgesim.plots.curves import parse_formats

    try:
        return parse_formats(text)
    except ConfigError as e:
        _fail(str(e))


def _style(style: str, width: Optional[float]) -> None:
    """``--style``/``--width`` for every figure this command draws (one line for a bad value)."""
    from edgesim.plots.style import set_style

    try:
        set_style(style, width)
    except ConfigError as e:
        _fail(str(e))


def _accuracy_threshold(text: str) -> float:
    """``--threshold T`` as an accuracy in (0, 1]; one error line otherwise."""
    try:
        t = float(text)
    except ValueError:
        t = float("nan")
    if not 0 < t <= 1:
        _fail(f"--threshold {text!r}: expected an accuracy in (0, 1], such as 0.8")
    return t


def _count_option(option: str, text: str) -> int:
    """``--jobs N`` / ``--seeds N`` as an integer >= 1; one line naming the value otherwise."""
    text = str(text).strip()
    if not text.isdigit() or int(text) < 1:
        _fail(f"{option} {text}: expected an integer >= 1, such as {option} 2")
    return int(text)


def _fail(message: str, code: int = 2) -> None:
    """One line on stderr, the options it advises in the command line's words; exit ``code``."""
    typer.echo(f"error: {worded(message, cli_word)}", err=True)
    raise typer.Exit(code)


@app.command()
def plan(
    scenario: Optional[Path] = SCENARIO_ARG,
    set_: Optional[List[str]] = SET_OPT,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Print the round budget, per-device compute and upload times and local steps (with DoFed-SPP: C1/C2/C3 and
    the (B, K) pairs)."""
    from edgesim.scenarios.plan import plan_report
    from edgesim.scenarios.schema import load_scenario

    try:
        report = plan_report(load_scenario(scenario, set_ or []))  # every section: plan refuses what run refuses
    except ConfigError as e:
        _fail(str(e))
    typer.echo(report.json() if as_json else report.text())
    if report.infeasible:  # only a scheduler needs a feasible (B, K): that error first, then what else to know
        typer.echo(f"error: {worded(report.infeasible, cli_word)}", err=True)
    for line in report.warnings:
        typer.echo(f"warning: {line}", err=True)
    if report.infeasible:
        raise typer.Exit(1)


@app.command()
def run(
    scenario: Optional[Path] = SCENARIO_ARG,
    set_: Optional[List[str]] = SET_OPT,
    out: Optional[str] = typer.Option(
        None, "--out", help="Run folder (default: runs/<scenario name>). Must be new, empty or an earlier run "
        "(replaced only with --overwrite); edgesim never deletes what it did not write."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Override the scenario's seed."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
    formats: str = FORMAT_OPT,
    plots: Optional[bool] = PLOTS_OPT,
    style: str = STYLE_OPT,
    width: Optional[float] = WIDTH_OPT,
    resume: bool = typer.Option(
        False, "--resume", help="Go on from the last checkpoint of a killed run in <out>.incomplete/ (run.checkpoint_every)."
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an earlier run folder at --out (only an edgesim run folder, never anything else)."
    ),
    threads: Optional[str] = THREADS_OPT,
    jobs: str = typer.Option(
        "1", "--jobs", "-j", help="Train the scenario's algorithms in this many processes at once (each with "
        "--threads threads); the run folder is the same bytes as with 1."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
    client_workers: Optional[str] = typer.Option(
        None, "--client-workers", help="Train each round's devices on this many worker processes (or Ray actors "
        "with --executor ray), each keeping the data loaded; the run folder is the same bytes as with 1 "
        "(run.client_workers)."),
    executor: str = typer.Option("local", "--executor", help="Where --client-workers run: local (processes) or ray."),
    ray_address: Optional[str] = typer.Option(
        None, "--ray-address", help="With --executor ray: join this Ray cluster (e.g. 127.0.0.1:6379 from `ray start "
        "--head`); default: start a Ray on this machine."),
    round_timeout_s: Optional[str] = typer.Option(
        None, "--round-timeout-s", help="Stop the run when a round has taken this many seconds of host time, with "
        "one line naming the algorithm, the round and its phase (training, evaluation, labelling, aggregation)."),
) -> None:
    """Co-simulate every algorithm of a scenario and write a run folder (CSV, JSON, figures)."""
    _style(style, width)
    from edgesim.results.writing import RunFolder, check_out
    from edgesim.scenarios.progress import RunProgress
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    figure_formats = _formats(formats)
    if out is not None:
        from edgesim.results.writing import RUN_SUFFIX_CHARS, check_out_path

        try:
            check_out_path(out, suffix_chars=RUN_SUFFIX_CHARS)  # before Path(out): '' is not '.'
        except ConfigError as e:
            _fail(str(e))
    overrides, options = list(set_ or []), ["set"] * len(set_ or [])
    if seed is not None:
        overrides.append(f"seed={seed}")
        options.append("seed")
    if data_dir is not None:
        overrides.append(f"data.data_dir={json.dumps(str(data_dir))}")
        options.append("data-dir")
    for override in _threads_override(threads):
        overrides.append(override)
        options.append("threads")
    jobs = _count_option("--jobs", jobs)
    if client_workers is not None:
        overrides.append(f"run.client_workers={_count_option('--client-workers', client_workers)}")
        options.append("client-workers")
    if executor not in ("local", "ray"):
        _fail(f"--executor {executor}: expected local or ray")
    limit = _round_timeout(round_timeout_s)
    try:
        sc = load_scenario(scenario, overrides, options=options)
    except ConfigError as e:
        _fail(str(e))
    out = Path(out) if out is not None else Path("runs") / sc.name
    try:
        check_out(out, overwrite=overwrite, resume=resume)
    except ConfigError as e:
        _fail(str(e))
    from edgesim.backend import Diverged  # torch-free: a --jobs worker starts before this process imports torch

    run_cfg = sc.learning.run
    work = RunFolder(out).work
    handle_signals()
    try:
        with RunProgress(run_cfg.algorithms, run_cfg.rounds or sc.budget.rounds, enabled=not quiet) as progress, \
                _environment(ROUND_TIMEOUT_ENV, limit):
            on_round = host_time_note(progress.update, run_cfg.rounds or sc.budget.rounds, len(run_cfg.algorithms))
            folder = run_scenario(sc, out, on_round=on_round, resume=resume, overwrite=overwrite,
                                  say=lambda line: typer.echo(line, err=True), jobs=jobs, formats=figure_formats,
                                  client_executor=executor, ray_address=ray_address, plots=plots)
    except ConfigError as e:
        _fail(str(e))
    except Diverged as e:
        _fail(f"{e} (run folder left incomplete: {work})", code=1)
    except OSError as e:  # a full disk or a quota: the file it could not write, and where the run is
        _fail(f"cannot write {e.filename or work}: {e.strerror or e}; the unfinished run is in {work} "
              f"(free some space, then run the same command with --resume or --overwrite)", code=1)
    except KeyboardInterrupt as e:
        _interrupted(work, run_cfg.checkpoint_every, code=interrupt_handled(e))
    except Exception as e:  # noqa: BLE001 - an algorithm's or a plugin's own error: one line, the folder kept
        _unexpected(e, work if work.exists() else None)
    typer.echo(f"run folder: {folder}")
    summary = read_summary(folder)
    for name, a in summary["algorithms"].items():
        if not a["rounds"]:
            typer.echo(f"  {name:<10} diverged in its first round: no result")
            continue
        final = (
            f"final {a['final_accuracy']:.3f} (plateau at round {a['final_round']}, {a['final_time_s']:.1f} s)"
            if a["plateau_reached"] and a["final_accuracy"] is not None
            else "no plateau yet"
        )
        last = "no evaluated round" if a["last_accuracy"] is None else f"accuracy {a['last_accuracy']:.3f}"
        typer.echo(
            f"  {name:<10} {last} after {a['simulated_time_s']:.1f} s simulated; {final}; "
            f"uplink {a['total_bits_up'] / 1e6:.1f} Mbit; energy {a['total_energy_j']:.3g} J"
        )
    held = summary.get("samples_per_device")
    if held and not held["min"] <= held["plan"] <= held["max"]:
        typer.echo(f"note: workload.samples_per_device = {held['plan']} (the plan's D) is outside what the devices "
                   f"hold ({held['min']} to {held['max']} samples); each was charged for its own data", err=True)
    for line in summary.get("warnings", []):
        typer.echo(f"warning: {line}", err=True)
    diverged = {name: a["diverged"] for name, a in summary["algorithms"].items() if a.get("diverged")}
    if diverged:  # the others' results are kept in the folder; the run still failed
        _fail(f"{'; '.join(diverged.values())} (its rounds until then, and the other algorithms' results, are in "
              f"{folder}; {SUMMARY} marks it diverged)", code=1)


def _round_timeout(text: Optional[str]) -> Optional[str]:
    """``--round-timeout-s S`` as the environment's value (``--jobs`` workers inherit it), ``None`` when not given;
    one line naming the value otherwise."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        _fail(f"--round-timeout-s {text}: expected a positive number of seconds, such as --round-timeout-s 300")
    return repr(value)


@contextlib.contextmanager
def _environment(name: str, value: Optional[str]):
    """``os.environ[name] = value`` inside (nothing when ``value`` is None), as it was after."""
    import os

    if value is None:
        yield
        return
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def host_time_note(on_round, rounds: int, n_algorithms: int, *, over_s: float = 600.0):
    """``on_round`` that also says, once, how long the run may take on this host when that is over ``over_s``:
    the host time between the first two rounds × ``rounds`` × ``n_algorithms`` (an upper bound when the run
    stops earlier: max_time_s, a plateau)."""
    import time

    seen: list[float] = []

    def wrapped(name, rec):
        on_round(name, rec)
        if len(seen) < 2:
            seen.append(time.monotonic())
            if len(seen) == 2:
                estimate_s = (seen[1] - seen[0]) * rounds * n_algorithms
                if estimate_s > over_s:
                    typer.echo(f"note: at {seen[1] - seen[0]:.3g} s of host time per round, {rounds} rounds of "
                               f"{n_algorithms} algorithm(s) take up to about {_duration(estimate_s)}; Ctrl-C "
                               f"stops it (lower run.rounds, or set run.max_time_s)", err=True)

    return wrapped


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def _unexpected(e: Exception, work: Optional[Path]) -> None:
    """An error that is not a configuration error (an algorithm's or a plugin's code): one line naming it and where
    the unfinished run is, exit 1. ``EDGESIM_DEBUG=1`` shows the traceback instead."""
    import os

    if os.environ.get("EDGESIM_DEBUG") == "1":
        raise e
    where = f"; the unfinished run is kept in {work}" if work is not None else ""
    _fail(f"{type(e).__name__}: {e}{where} (EDGESIM_DEBUG=1 shows where it was raised)", code=1)


def _interrupted(work: Path, checkpoint_every: int, code: int = 130) -> None:
    """Ctrl-C or SIGTERM: one line saying where the unfinished run is and how to go on; exit 130 (143)."""
    if not work.exists():
        _fail("interrupted before the run folder was created; nothing was written", code=code)
    how = ("run the same command with --resume to go on from its last checkpoint" if checkpoint_every
           else "run.checkpoint_every = 0, so it has no checkpoint: run the same command with --overwrite to start "
                "again (add --set run.checkpoint_every=N to be able to --resume)")
    _fail(f"interrupted: the unfinished run is in {work}; {how}", code=code)


@app.command()
def sweep(
    scenario: Optional[Path] = SCENARIO_ARG,
    grid: Optional[List[str]] = typer.Option(
        None, "--grid", help="KEY=V1,V2,... : a scenario key and its values (TOML), e.g. system.bandwidth_hz=5e5,1e6,2e6 "
        "(repeatable; runs the cartesian product)."
    ),
    seeds: Optional[str] = typer.Option(None, "--seeds", help="Seeds per grid point: the scenario's seed, +1, ... (default 1)."),
    set_: Optional[List[str]] = SET_OPT,
    jobs: Optional[str] = typer.Option(None, "--jobs", "-j", help="Runs at once (default: CPU cores / --threads)."),
    executor: str = typer.Option("local", "--executor", help="local (process pool) or ray."),
    ray_address: Optional[str] = typer.Option(
        None, "--ray-address", help="Join this Ray cluster (e.g. 127.0.0.1:6379 from `ray start --head`); "
        "default with --executor ray: start a Ray on this machine."
    ),
    threads: Optional[str] = THREADS_OPT,
    out: Optional[str] = typer.Option(None, "--out", help="Sweep folder (default: sweeps/<scenario name>)."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
    formats: str = FORMAT_OPT,
    style: str = STYLE_OPT,
    width: Optional[float] = WIDTH_OPT,
    plots: Optional[bool] = PLOTS_OPT,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
) -> None:
    """Run a scenario over a parameter grid and seeds: one run folder each, plus sweep.csv and figures.

    Started again with the same arguments, a killed sweep skips its finished runs
    and resumes the others from their checkpoints.
    """
    _style(style, width)
    from edgesim.results.writing import check_out_path
    from edgesim.scenarios.sweep import default_out, make_spec, run_sweep

    figure_formats = _formats(formats)
    jobs = _count_option("--jobs", jobs) if jobs is not None else None
    seeds = _count_option("--seeds", seeds) if seeds is not None else None
    overrides = list(set_ or [])
    if data_dir is not None:  # absolute: the runs may work elsewhere (Ray)
        overrides.append(f"data.data_dir={json.dumps(str(data_dir.expanduser().resolve()))}")
    handle_signals()
    try:
        spec = make_spec(scenario, grid or [], seeds, [*overrides, *_threads_override(threads)])
        out = check_out_path(out) if out is not None else default_out(spec)
        result = run_sweep(spec, out, jobs=jobs, executor=executor, ray_address=ray_address,
                           progress=not quiet, plots=plots, formats=figure_formats)
    except ConfigError as e:
        _fail(str(e))
    except KeyboardInterrupt as e:
        _fail(f"interrupted: finished runs are kept in {out}, unfinished ones are marked interrupted; run the same "
              f"command again to go on (unfinished runs resume from their checkpoints)", code=interrupt_handled(e))
    except OSError as e:  # a full disk (one run found it, or sweep.csv): the sweep stopped, its folders resumable
        _fail(f"cannot write {e.filename or out}: {e.strerror or e}; the sweep stopped: finished runs are kept in "
              f"{out}, unfinished ones resume from their checkpoints (free some space, then run the same command "
              f"again)", code=1)
    n_ok = len(result.runs) - len(result.failed)
    typer.echo(f"sweep folder: {result.out} ({n_ok} of {len(result.runs)} runs finished; {result.jobs} at a time "
               f"on {executor}, {result.threads} torch thread(s) each)")
    typer.echo(f"  {result.out / SWEEP_TABLE}")
    for name, status in result.failed.items():
        typer.echo(f"  {name}: {worded(status, cli_word)}", err=True)
    if result.failed:
        raise typer.Exit(1)


@app.command()
def plot(
    folders: List[Path] = typer.Argument(..., help="Run folders (their seeds are drawn as mean and band) or sweep folders."),
    out: Optional[str] = typer.Option(None, "--out", help="Where to write the PNGs (default: the folder itself)."),
    threshold: Optional[str] = typer.Option(None, "--threshold", help="Accuracy threshold of the sweep's time-to-accuracy "
                                            f"figure (e.g. 0.8): any accuracy, computed from {ROUNDS} if the runs did not."),
    separate: bool = typer.Option(False, "--separate", help="Run folders of different scenarios: draw each scenario's "
                                  "runs (its seeds) into its own sub-folder of --out instead of refusing."),
    overlay: bool = typer.Option(False, "--overlay", help="Run folders of different scenarios: draw them on one "
                                 "figure, each scenario's algorithms as their own curves (its seeds averaged), "
                                 "labelled by the scenario keys that differ (or by --label)."),
    label: Optional[List[str]] = typer.Option(None, "--label", help="With --overlay: the scenario key(s) that label "
                                              "each scenario's curves, e.g. system.bandwidth_hz (repeatable)."),
    formats: str = FORMAT_OPT,
    style: str = STYLE_OPT,
    width: Optional[float] = WIDTH_OPT,
) -> None:
    """Draw the figures of run folders or sweep folders (PNG, PDF or SVG, sized for a paper column).

    Several run folders are drawn together only when they are seeds of one scenario (their config.toml equal but
    for the seed); otherwise plot refuses, naming the keys that differ (or, with --separate, draws each apart; with
    --overlay, draws them on one figure labelled by the keys that differ, never averaged together)."""
    _style(style, width)
    from edgesim.plots.curves import RUN_FIGURES, overlay_labels, plot_overlay, plot_runs
    from edgesim.plots.sweep import SWEEP_FIGURES, plot_sweep
    from edgesim.results.reading import RunFolderError

    if label and not overlay:
        _fail(f"--label {label[0]!r}: labels the curves of --overlay; expected --overlay with it")
    if overlay and separate:
        _fail("--overlay and --separate: give one of them (one figure for every scenario, or one folder each)")
    figure_formats = _formats(formats)
    if threshold is not None:
        _accuracy_threshold(threshold)
    if out is not None:
        from edgesim.results.writing import check_out_path

        try:
            out = check_out_path(out)
        except ConfigError as e:
            _fail(str(e))
    if out is not None and out.exists() and not out.is_dir():
        _fail(f"--out {out}: exists and is not a folder; expected a folder for the PNGs")
    sweeps, runs, written = [], [], []
    for f in folders:
        kind = folder_kind(f)
        if (f / MARKER).is_file():  # an unfinished run (rounds.csv or not): its reader's line says how to finish it
            try:
                expand([f], holders=False)
            except ConfigError as e:
                _fail(str(e))
        if kind is None:
            _fail(f"{f}: no such folder; expected a run folder ({ROUNDS}) or a sweep folder ({SWEEP_SPEC}, "
                  f"{SWEEP_TABLE})" if not f.exists() else
                  f"{f}: neither a run folder ({ROUNDS}) nor a sweep folder ({SWEEP_SPEC}, {SWEEP_TABLE})")
        if overlay and kind == "sweep":
            _fail(f"--overlay {f}: a sweep folder; expected run folders (a sweep's figures already compare its points)")
        (sweeps if kind == "sweep" else runs).append(f)
    try:
        for f in sweeps:
            # several sources into one --out: each sweep in its own sub-folder
            where = out if out is None or len(sweeps) + bool(runs) == 1 else out / f.resolve().name
            try:
                _claim_figures(where or f, SWEEP_FIGURES, figure_formats)
                written += plot_sweep(f, where, threshold, formats=figure_formats)
            except RunFolderError:
                raise
            except ValueError as e:
                _fail(f"{f}: {e}")
        if runs:
            if out is None and len(runs) > 1:
                _fail("several run folders: give --out DIR for their common figures")
            from edgesim.results.reading import load_run
            from edgesim.results.stats import check_one_scenario, group_runs

            loaded = [load_run(r) for r in runs] if len(runs) > 1 else []
            if overlay:
                groups = group_runs(loaded or [load_run(runs[0])])
                labels = overlay_labels(groups, label or ())
                _claim_figures(out or runs[0], RUN_FIGURES, figure_formats)
                written += plot_overlay([(lb, [r.path for r in g.runs]) for lb, g in zip(labels, groups)],
                                        out or runs[0], formats=figure_formats)
            elif separate and loaded:
                for g in group_runs(loaded):
                    where = out / f"scenario_{g.fingerprint[:12]}"
                    _claim_figures(where, RUN_FIGURES, figure_formats)
                    written += plot_runs([r.path for r in g.runs], where, title=g.label, formats=figure_formats)
            else:
                check_one_scenario(loaded, f"the run folders {', '.join(map(str, runs))}") if loaded else None
                _claim_figures(out or runs[0], RUN_FIGURES, figure_formats)
                written += plot_runs(runs, out or runs[0], title=None, formats=figure_formats)
    except (RunFolderError, ConfigError) as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"cannot write the figures: {e.filename or out}: {e.strerror or e}")
    from edgesim.results.reading import divergence_notes, read_divergence

    diverged = (d for f in expand(folders) for d in read_divergence(f.folder).values())
    for line in divergence_notes(diverged, "drawn up to that round, marked (diverged) in the legend"):
        typer.echo(f"warning: {line}", err=True)
    for p in written:
        typer.echo(str(p))


@app.command()
def report(
    folders: List[Path] = typer.Argument(..., help="Run folders and sweep folders (a sweep stands for its runs)."),
    threshold: Optional[List[str]] = typer.Option(
        None, "--threshold", help="Accuracy threshold in (0, 1] (repeatable; default: the runs' accuracy_thresholds). "
        f"Computed now from {ROUNDS}, by the rules of {SUMMARY}."),
    out: Optional[str] = typer.Option(None, "--out", help="Report folder (default: reports/<first folder's name>)."),
    baseline: Optional[List[str]] = typer.Option(
        None, "--baseline", help="An algorithm (registry name) every other is also paired against, beside the "
        "leader (repeatable), e.g. a method's floor."),
    sustain: Optional[int] = typer.Option(
        None, "--sustain", help="Rounds the accuracy must stay at or above a threshold for it to count as reached "
        f"(default: each run's run.sustain_rounds, 3 unless set: the rule of {SUMMARY})."),
    rank_by: str = typer.Option("time", "--rank-by", help="Leaderboard order: time, energy or bits to the primary "
                                "threshold, or final or best accuracy."),
    reference: Optional[List[str]] = typer.Option(
        None, "--reference", help="KEY=VALUE (repeatable): pair every grid point, seed by seed, with the point that "
        "has these values and the same others, e.g. --reference resources.bandwidth=equal (against_reference.csv, "
        "energy_vs_time.png)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the report files of an earlier report in "
                                   "--out (nothing else in it is touched)."),
    style: str = STYLE_OPT,
    width: Optional[float] = WIDTH_OPT,
) -> None:
    """Leaderboards per scenario and grid point: algorithms ranked by simulated time to accuracy, with 95 % intervals
    over seeds and paired differences (leaderboard.csv, paired.csv, leaderboard.md, figures)."""
    _style(style, width)
    from edgesim.results.writing import check_out_path
    from edgesim.scenarios.report import write_report

    thresholds = [_accuracy_threshold(text) for text in threshold or []]
    out = out if out is not None else Path("reports") / folders[0].resolve().name
    try:
        out = check_out_path(out)
        written = write_report(folders, out, thresholds or None, tuple(baseline or ()), sustain, rank_by,
                               say=lambda line: typer.echo(f"warning: {line}", err=True), reference=reference or (),
                               overwrite=overwrite)
    except ConfigError as e:  # RunFolderError is one
        _fail(str(e))
    except OSError as e:  # a full disk, a quota: the file it could not write
        _fail(f"cannot write the report: {e.filename or out}: {e.strerror or e}", code=1)
    typer.echo(f"report folder: {out}")
    for path in written:
        typer.echo(f"  {path.name}")


@app.command("list")
def list_(
    kinds: Optional[List[str]] = typer.Argument(None, help="algorithms, models, datasets, partitions, scenarios, "
                                                "policies, access or association, one or more (default: all); then "
                                                "names to show only those (list algorithms fedavg fedprox)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="Also list what this scenario's [run] plugins "
                                            "register (imported as a run would import them)."),
) -> None:
    """List the registered algorithms, models, data sets, partitions, resource policies, access schemes and
    association rules (plugins included), with each option's type, default and meaning; `list scenarios`: the
    shipped scenarios, their scale and host time."""
    from edgesim.scenarios.catalog import KINDS, catalog, format_catalog

    names = [k for k in kinds or [] if k not in KINDS]  # `list algorithms fedavg`: names after the kinds
    kinds = [k for k in kinds or [] if k in KINDS]
    if names and not kinds:
        _fail(f"list {names[0]!r}: expected one of {', '.join(KINDS)}")
    if scenario is not None:
        from edgesim.scenarios.schema import load_plugins, read_toml

        try:
            run = read_toml(scenario).get("run", {})
            plugins = run.get("plugins", []) if isinstance(run, dict) else []
            if not isinstance(plugins, list) or not all(isinstance(m, str) for m in plugins):
                _fail(f"{scenario}: [run] plugins = {plugins!r}: expected a list of module names")
            load_plugins(plugins, str(scenario), ["(any)"])
        except ConfigError as e:
            _fail(str(e))
    try:
        entries = {k: catalog(k) for k in (list(dict.fromkeys(kinds)) if kinds else KINDS)}
    except ConfigError as e:
        _fail(str(e))
    if names:
        known = {e.name for v in entries.values() for e in v}
        missing = [n for n in names if n not in known]
        if missing:
            _fail(f"list {' '.join(kinds)} {missing[0]!r}: no such name; expected one of {', '.join(sorted(known))}")
        entries = {k: [e for e in v if e.name in names] for k, v in entries.items()}
        entries = {k: v for k, v in entries.items() if v}
    if as_json:
        typer.echo(json.dumps({k: [e.to_dict() for e in v] for k, v in entries.items()}, indent=2))
    else:
        typer.echo(format_catalog(entries))


def _claim_figures(folder: Path, stems, formats) -> None:
    """Refuse to draw over a figure edgesim did not draw (one line naming it); list the rest in the manifest."""
    from edgesim.results.writing import claim_files

    folder.mkdir(parents=True, exist_ok=True)
    claim_files(folder, [f"{stem}.{fmt}" for stem in stems for fmt in (*formats, "csv")])  # each figure's data too


def main() -> None:  # pragma: no cover - console entry point (the tests that start `python -m edgesim.scenarios.cli` run it)
    """The ``edgesim`` command: glibc keeps freed memory (``edgesim.learning.malloc``; opt out with
    ``EDGESIM_KEEP_FREED_MEMORY=0``), then the typer app, then :func:`exit_now`."""
    from edgesim.learning.malloc import keep_freed_memory

    keep_freed_memory()
    try:
        code = app(standalone_mode=False, prog_name="edgesim")
    except SystemExit as e:
        code = e.code
    except Exception as e:  # noqa: BLE001 - typer's (click's) usage errors: one line, not a usage box
        names = {c.__name__ for c in type(e).__mro__}
        if "Abort" in names:  # Ctrl-C where no command handles it
            typer.echo("error: interrupted", err=True)
            code = 130
        elif "UsageError" in names and hasattr(e, "format_message"):
            command = getattr(getattr(e, "ctx", None), "command_path", None) or "edgesim"
            typer.echo(f"error: {command}: {e.format_message()} (see {command} --help)", err=True)
            code = 2
        else:
            raise
    exit_now(code)


def exit_now(code) -> None:
    """End the process with ``code`` (``sys.exit``'s meaning: None = 0, anything but an int is printed and gives 1) after the
    ``atexit`` handlers and flushing stdout/stderr, but without the interpreter's teardown: with torch, SciPy and
    matplotlib loaded that takes 0.3–0.8 s and only frees memory the system takes back anyway
    (benchmarks/RESULTS.md, "Threads and jobs"). Every file edgesim writes is closed before this. Under a profiler
    or tracer (cProfile, coverage) the process exits as usual, so that they can write their results."""
    import atexit
    import logging
    import os

    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):  # as sys.exit: any other object is printed, and the status is 1
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said on it
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
