"""edgesim's Python API: ``import edgesim`` and call ``load_scenario``, ``plan``, ``run``, ``sweep``, ``load_runs``.

The same machinery as the command line (docs/use/python_api.md), with Python
values instead of command-line strings and exceptions instead of command-line
advice. It lives in the application layer; ``edgesim/__init__.py`` hands its
names on lazily. The torch backend (``edgesim.learning``), ``edgesim.plots``
and pandas are imported inside the functions that need them, so
``import edgesim`` and ``edgesim.load_scenario`` stay light and never import torch.
"""

from __future__ import annotations

import copy
import functools
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from edgesim.config import ConfigError, worded
from edgesim.results.fingerprint import scenario_fingerprint as _fingerprint
from edgesim.results.reading import Run, RunFolderError
from edgesim.results.reading import load_runs as _load_runs

ScenarioSource = Any  # a path (str or Path), a scenario as a dict, a loaded Scenario, or None (the bundled default)


class SweepError(RuntimeError):
    """Some runs of a sweep failed; ``failed`` maps each to its status, ``frame`` holds the finished runs."""

    def __init__(self, message: str, failed: dict, frame):
        super().__init__(message)
        self.failed, self.frame = failed, frame


# --------------------------------------------------------------------------- errors in Python's words

# How a Python caller gives an option an error advises, where it is not the option's own name (``jobs``, ``seeds``):
# (the option, the option given a value). edgesim.config.MARK; the command line words them as --name.
_PYTHON_OPTIONS = {
    "out": ("out", "out="),
    "overwrite": ("overwrite=True", "overwrite="),
    "resume": ("resume=True", "resume="),
    "set": ("override", "override "),
    "data-dir": ("data={'data_dir': ...}", "data={'data_dir': ...} "),
    "format": ("formats", "formats="),
    "seed": ("seed=", "seed="),
}


def python_word(name: str, form: str) -> str:
    """An option an error advises, in a Python caller's words: ``⟨out=⟩runs/a`` → ``out=runs/a``, ``⟨+overwrite⟩``
    → ``pass overwrite=True``, ``⟨jobs⟩`` → ``jobs``."""
    arg = name.replace("-", "_")
    bare, given = _PYTHON_OPTIONS.get(name, (arg, f"{arg}="))
    return {"": bare, "+": f"pass {bare}", "=": given}[form]


def _reraise(e: ConfigError, cls: Optional[type] = None):
    """``e`` for a Python caller: the same parts, the options it advises in Python's words (``cls``: as which
    class, by default ``e``'s own)."""
    out = (cls or type(e))(e.worded(python_word), key=e.key, value=e.value, expected=e.expected, options=e.options)
    out.where = e.where
    raise out from None


def _check_arg(function: str, name: str, value: Any, ok: bool, expected: str) -> None:
    """An argument of the API checked up front: :class:`ConfigError` in one line naming the function, the argument,
    its value and what was expected (never an error from deep inside, never a half-started run)."""
    if not ok:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ConfigError(f"{function}({name}={shown}): expected {expected}")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _is_path(value: Any) -> bool:
    import os

    return isinstance(value, (str, os.PathLike))


def _check_formats(function: str, formats: Any) -> list[str]:
    """``formats``: ``"png,pdf"`` (as ``--format``) or a sequence of names; the list ``parse_formats`` takes."""
    if isinstance(formats, str):
        return [f.strip() for f in formats.split(",")]
    ok = isinstance(formats, (list, tuple)) and all(isinstance(f, str) for f in formats)
    _check_arg(function, "formats", formats, ok,
               "a sequence of figure formats such as ('png', 'pdf'), or the text 'png,pdf'")
    return list(formats)


# --------------------------------------------------------------------------- scenarios and run folders


@functools.wraps(_load_runs)  # the one reader (its docstring), its errors in Python's words
def load_runs(paths, table: str = "rounds"):
    try:
        return _load_runs(paths, table)
    except ConfigError as e:
        _reraise(e)


def _merge(base: dict, key: str, value: Any) -> None:
    """Set ``key`` (a top-level key, a table given as a dict — merged key by key — or a dotted ``a.b.c``)."""
    path = key.split(".")
    node = base
    for part in path[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"load_scenario({key}=...): {part!r} is a value, not a table")
    last = path[-1]
    if isinstance(value, Mapping) and isinstance(node.get(last), dict):
        for k, v in value.items():
            _merge(node[last], str(k), v)
    else:
        node[last] = copy.deepcopy(dict(value) if isinstance(value, Mapping) else value)


def load_scenario(source: ScenarioSource = None, /, **overrides):
    """A validated scenario (``edgesim.scenarios.schema.Scenario``) from a TOML file, a dict, or the bundled default.

    ``overrides`` are keys of the scenario: top-level ones (``seed=3``,
    ``name="mine"``), whole or partial tables as dicts, merged key by key
    (``run={"rounds": 2, "algorithms": ["fedavg", "fedadam"]}``), or dotted
    keys (``**{"system.bandwidth_hz": 2e6}``). A relative ``data.data_dir`` in
    a file is relative to the file; a data set that needs files and names no
    folder takes ``$EDGESIM_DATA``. Bad input raises :class:`ConfigError`
    naming the key, the value and what was expected.
    """
    from edgesim.scenarios.schema import (
        DEFAULT_SCENARIO,
        Scenario,
        data_dir_from_env,
        read_toml,
        resolve_paths,
        validate,
    )

    if isinstance(source, Scenario):
        if not overrides:
            return source
        raw, where = copy.deepcopy(dict(source.raw)), source.path
    elif isinstance(source, Mapping):
        raw, where = copy.deepcopy(dict(source)), "<scenario dict>"
    elif source is None or isinstance(source, (str, Path)):
        path = Path(source) if source is not None else DEFAULT_SCENARIO
        raw, where = resolve_paths(read_toml(path), path), str(path)
    else:
        raise TypeError(f"load_scenario: source must be a path, a dict or a Scenario, not {type(source).__name__}")
    for key, value in overrides.items():
        _merge(raw, key, value)
    try:
        return validate(data_dir_from_env(raw), where)
    except ConfigError as e:
        _reraise(e)


def plan(scenario: ScenarioSource = None, /, **overrides):
    """What ``edgesim plan`` prints, as an object: an :class:`edgesim.scenarios.plan.PlanReport` of ``scenario``
    (anything :func:`load_scenario` takes; ``overrides`` go with it).

    ``report.text()`` is the table ``edgesim plan`` prints, ``report.to_dict()`` its ``--json`` object;
    ``report.plan`` holds the numbers (the round budget, each device's train and upload times, DoFed-SPP's C1/C2/C3
    and (B, K) pairs), ``report.workload`` the workload with every ``"auto"`` resolved, ``report.local_steps`` and
    ``report.device_steps`` the local steps per device-round, ``report.warnings`` what ``edgesim run`` would warn of
    before training, and ``report.infeasible`` the message of a budget no (B, K) pair fits (``None`` when none is
    needed or one fits). Bad input raises :class:`ConfigError`.
    """
    from edgesim.scenarios.plan import plan_report

    sc = load_scenario(scenario, **overrides)
    try:
        return plan_report(sc)
    except ConfigError as e:
        _reraise(e)


# --------------------------------------------------------------------------- runs


def scenario_fingerprint(config: Mapping) -> str:
    """SHA-256 (hex) of a resolved scenario (a run's ``config.toml``) without its seed: the runs of one scenario
    that differ only in their seed share it (group them to average over seeds). The same fingerprint as
    ``edgesim plot`` and ``edgesim report`` group by (:func:`edgesim.results.fingerprint.scenario_fingerprint`)."""
    _check_arg("scenario_fingerprint", "config", config, isinstance(config, Mapping),
               "a resolved scenario as a dict (such as Run.config)")
    return _fingerprint(config)


def run(
    scenario: ScenarioSource = None,
    out: Optional[str | Path] = None,
    *,
    overwrite: bool = False,
    resume: bool = False,
    formats: Sequence[str] = ("png",),
    plots: Optional[bool] = None,
    on_round: Optional[Callable] = None,
    jobs: int = 1,
    quiet: bool = False,
    **overrides,
) -> Run:
    """Run every algorithm of ``scenario`` into the run folder ``out`` (default ``runs/<name>``); a :class:`Run`.

    ``scenario`` is anything :func:`load_scenario` takes (``overrides`` go
    with it). ``out`` follows the command line's rules: a finished run is
    replaced only with ``overwrite=True``, an unfinished one resumed with
    ``resume=True``, and a folder edgesim did not write is never touched
    (:class:`RunFolderError`). ``formats``: the figures' file types (``png``,
    ``pdf``, ``svg``); ``plots``: draw them (``None``: unless the environment has
    ``EDGESIM_PLOTS=0``; ``edgesim plot`` draws them later). ``on_round(algorithm, record)`` is called after each
    round with the algorithm's name and its :class:`edgesim.engine.RoundRecord`
    (``record.round_index``, ``record.end_time_s`` — simulated seconds —,
    ``record.metrics["accuracy"]``, ``record.cum_bits_up``, ``record.cum_energy_j``, ...);
    docs/use/python_api.md has an example that draws a live curve. A progress bar
    (one line per algorithm, rewritten in place: a notebook cell shows it as it
    goes) is printed unless ``quiet=True``. ``jobs`` > 1 trains the algorithms in that many processes (the run
    folder is the same); like :func:`sweep`, call it then from a notebook or
    from a script under ``if __name__ == "__main__":``. An algorithm whose
    training diverges stops alone: the others' results are written, and
    ``summary.json`` marks it.
    """
    from edgesim.plots.curves import parse_formats
    from edgesim.results.writing import check_out
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import Scenario

    _check_arg("run", "out", out, out is None or _is_path(out), "a path (a str or a pathlib.Path) or None")
    _check_arg("run", "on_round", on_round, on_round is None or callable(on_round),
               "a function on_round(algorithm, record), or None")
    _check_arg("run", "jobs", jobs, _is_count(jobs), "an integer >= 1")
    for name, flag in (("overwrite", overwrite), ("resume", resume)):
        _check_arg("run", name, flag, isinstance(flag, bool), "True or False")
    _check_arg("run", "plots", plots, plots is None or isinstance(plots, bool), "True, False or None")
    formats = _check_formats("run", formats)
    sc = scenario if isinstance(scenario, Scenario) and not overrides else load_scenario(scenario, **overrides)
    out = Path(out) if out is not None else Path("runs") / sc.name
    try:
        formats = parse_formats(formats)
        check_out(out, overwrite=overwrite, resume=resume)
    except ConfigError as e:
        _reraise(e, RunFolderError)
    bar = None
    if not quiet:
        from edgesim.scenarios.progress import NotebookProgress

        run_cfg = sc.learning.run
        bar = NotebookProgress(run_cfg.algorithms, run_cfg.rounds or sc.budget.rounds)
        on_round = _both(bar.update, on_round)
    try:
        return Run(run_scenario(sc, out, on_round, resume=resume, overwrite=overwrite, formats=formats, jobs=jobs,
                                plots=plots,
                                say=lambda line: warnings.warn(line, stacklevel=3) if "warning" in line else None))
    except ConfigError as e:
        _reraise(e)
    finally:
        if bar is not None:
            bar.close()


def _both(first: Callable, then: Optional[Callable]) -> Callable:
    """A round callback calling ``first`` and then ``then`` (when given)."""
    def both(algorithm: str, record) -> None:
        first(algorithm, record)
        if then is not None:
            then(algorithm, record)
    return both


def _toml_text(value: Any) -> str:
    """A Python value as the TOML text of ``--set KEY=<text>``: a dict as an inline table (``{bandwidth = "equal"}``,
    a grid of whole tables, as the command line takes it), a list item by item."""
    import json
    import re

    import tomli_w

    if isinstance(value, Mapping):
        def key(k) -> str:
            return str(k) if re.fullmatch(r"[A-Za-z0-9_-]+", str(k)) else json.dumps(str(k))

        return "{" + ", ".join(f"{key(k)} = {_toml_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_text(v) for v in value) + "]"
    return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()


def _dotted(prefix: str, value: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _dotted(f"{prefix}.{k}" if prefix else str(k), v)
    else:
        yield prefix, value


def sweep(
    scenario: Optional[str | Path] = None,
    grid: Optional[Mapping[str, Sequence]] = None,
    *,
    seeds: int = 1,
    out: Optional[str | Path] = None,
    jobs: Optional[int] = None,
    threads: Optional[int] = None,
    executor: str = "local",
    plots: Optional[bool] = None,
    formats: Sequence[str] = ("png",),
    **overrides,
):
    """Run the scenario file ``scenario`` (default: the bundled one) over ``grid`` × ``seeds``; the sweep's runs
    as one long DataFrame (:func:`load_runs`; ``df.attrs["path"]`` is the sweep folder).

    ``grid``: ``{"system.bandwidth_hz": [5e5, 1e6], ...}`` (the cartesian
    product); ``seeds``: the scenario's seed, +1, …; ``overrides`` as for
    :func:`load_scenario`, for every run. ``out`` defaults to
    ``sweeps/<name>``; started again with the same arguments, a sweep skips
    its finished runs. ``threads``: torch threads per run (``run.threads`` for
    every run; default the scenario's, 1). ``plots``: the sweep and its runs draw figures (``None``: unless the
    environment has ``EDGESIM_PLOTS=0``). The workers read the scenario from its file, so
    ``scenario`` is a path. Failed runs raise :class:`SweepError` (with the
    finished runs' frame). The workers are new processes: call ``sweep``
    from a notebook, or from a script under ``if __name__ == "__main__":``.
    """
    from edgesim.plots.curves import parse_formats
    from edgesim.scenarios.sweep import default_out, make_spec, run_sweep

    _check_arg("sweep", "grid", grid, grid is None or (
        isinstance(grid, Mapping) and all(isinstance(k, str) for k in grid)
        and all(isinstance(v, (list, tuple)) and len(v) > 0 for v in grid.values())),
        "a dict of scenario key -> list of values, such as {'system.bandwidth_hz': [5e5, 1e6]}")
    _check_arg("sweep", "seeds", seeds, _is_count(seeds), "an integer >= 1 (how many seeds per grid point)")
    for name, value in (("jobs", jobs), ("threads", threads)):
        _check_arg("sweep", name, value, value is None or _is_count(value), "an integer >= 1, or None")
    _check_arg("sweep", "out", out, out is None or _is_path(out), "a path (a str or a pathlib.Path) or None")
    _check_arg("sweep", "plots", plots, plots is None or isinstance(plots, bool), "True, False or None")
    formats = _check_formats("sweep", formats)
    if scenario is not None and not isinstance(scenario, (str, Path)):
        raise TypeError("sweep: scenario must be the path of a scenario file (the runs load it in their own "
                        f"processes), not {type(scenario).__name__}")
    sets = [f"{k}={_toml_text(v)}" for key, value in overrides.items() for k, v in _dotted(key, value)]
    if threads is not None:
        sets.append(f"run.threads={_toml_text(threads)}")
    axes = [f"{k}={','.join(_toml_text(v) for v in values)}" for k, values in (grid or {}).items()]
    try:
        spec = make_spec(Path(scenario) if scenario is not None else None, axes, seeds, sets)
        out = Path(out) if out is not None else default_out(spec)
        result = run_sweep(spec, out, jobs=jobs, executor=executor, progress=False, plots=plots,
                           formats=parse_formats(formats))
    except ConfigError as e:
        _reraise(e)
    frame = load_runs([result.out] if len(result.failed) < len(result.runs) else [])  # [] : none finished
    frame.attrs["path"] = str(result.out)
    if result.failed:
        lines = "; ".join(f"{name}: {worded(status, python_word)}" for name, status in list(result.failed.items())[:3])
        raise SweepError(f"{len(result.failed)} of {len(result.runs)} runs of the sweep in {result.out} failed "
                         f"({lines}); the finished ones are in this error's .frame", dict(result.failed), frame)
    return frame
