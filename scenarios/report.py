"""``edgesim report RUN_OR_SWEEP... [--threshold T ...] [--out DIR]``: check ``--out``, build and write the report.

What the report holds: :mod:`edgesim.plots.report`. ``--out`` is checked before any
work: a file, a run or sweep folder, or a folder holding a file of a report's
name that its ``manifest.json`` does not list, is refused (one line); every
file is listed in the manifest before it is written, and written through a
temporary name, so a failure never leaves a half-written one.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from edgesim.results.reading import RunFolderError, UnfinishedRunWarning
from edgesim.results.writing import add_to_manifest, atomic_write_bytes, csv_text

OUTPUTS = ("leaderboard.csv", "paired.csv", "leaderboard.md", "tta_vs_bandwidth.png", "accuracy_vs_time_extremes.png",
           "tta_vs_bandwidth.csv", "accuracy_vs_time_extremes.csv")  # each figure's data beside it
REFERENCE_OUTPUTS = ("against_reference.csv", "energy_vs_time.png", "energy_vs_time.csv")  # with --reference
MARK = "# Leaderboard"


def check_report_out(out: Path, overwrite: bool = False) -> None:
    """Refuse an ``--out`` that is a file, a run or sweep folder (edgesim's, with its own manifest: a report is not
    one of its files), or a folder holding a file of a report's name that edgesim did not write there (its
    ``manifest.json`` does not list it: ownership is known, never guessed from a file's first line)."""
    from edgesim.results.files import CONFIG, MANIFEST, MARKER, SWEEP_SPEC
    from edgesim.results.writing import read_manifest

    out = Path(out)
    if str(out).strip() == "":
        raise RunFolderError("⟨out=⟩'': expected the path of a folder for the report, such as reports/arena")
    if out.exists() and not out.is_dir():
        raise RunFolderError(f"⟨out=⟩{out}: exists and is not a folder; expected a folder for the report")
    if not out.is_dir():
        return
    kind = ("a sweep folder" if (out / SWEEP_SPEC).exists() else
            "a run folder" if (out / CONFIG).exists() or (out / MARKER).exists()
            or out.name.endswith(".incomplete") else None)
    if kind is not None:
        raise RunFolderError(f"⟨out=⟩{out}: is {kind}; a report goes into a folder of its own (such as "
                           f"reports/{out.name.removesuffix('.incomplete')}); edgesim never adds files to a run's "
                           f"or a sweep's folder")
    listed = read_manifest(out)
    if listed is None and (out / MANIFEST).exists():
        raise RunFolderError(f"⟨out=⟩{out}: {out / MANIFEST} was not written by edgesim; choose another ⟨out⟩")
    clash = [n for n in OUTPUTS if (out / n).exists() and n not in (listed or set())]
    if clash:
        raise RunFolderError(f"⟨out=⟩{out}: holds {clash[0]}, which edgesim report did not write there (its "
                           f"{MANIFEST} does not list it); it is left as it is: choose another ⟨out⟩")
    earlier = [n for n in (*OUTPUTS, *REFERENCE_OUTPUTS) if (out / n).exists()]
    if earlier and not overwrite:
        shown = ", ".join(earlier[:3]) + (", ..." if len(earlier) > 3 else "")
        raise RunFolderError(f"⟨out=⟩{out}: holds a report ({shown}); ⟨+overwrite⟩ to replace its report files "
                             f"(nothing else in it is touched), or choose another ⟨out⟩")


def write_report(paths: Iterable[Path], out: Path, thresholds: Optional[Sequence[float]] = None,
                 baselines: Sequence[str] = (), sustain: Optional[int] = None, rank_by: str = "time",
                 say: Optional[Callable[[str], None]] = None, reference: Sequence[str] = (),
                 overwrite: bool = False) -> list[Path]:
    """Build the report of ``paths`` (run and sweep folders) and write it into ``out``; returns the files written.
    ``baselines``: algorithms every other is also paired against (``--baseline``); ``sustain``, ``rank_by``: the
    crossing rule's k (``--sustain``) and the order (``--rank-by``) of :func:`edgesim.plots.report.build`;
    ``say`` gets one line per algorithm that diverged in some run (which runs, from which round) and per unfinished
    run left out of a folder of runs. ``reference``
    (``--reference KEY=VALUE``, e.g. the default policies): every grid point is also paired, seed by seed, with the
    point that has these values and the same others (``against_reference.csv``, a section of ``leaderboard.md``)
    and drawn as device energy against time to accuracy (``energy_vs_time.png``). A folder holding an earlier report
    is refused unless ``overwrite`` (then only the report's files are replaced), as ``run`` refuses a finished run."""
    from edgesim.plots.report import (
        build,
        comparison,
        comparison_markdown,
        comparison_rows,
        leaderboard_rows,
        markdown,
        paired_rows,
        parse_reference,
        report_divergence_notes,
    )
    from edgesim.plots.report_figures import plot_accuracy_extremes, plot_energy_vs_time, plot_tta_vs_bandwidth

    out = Path(out)
    check_report_out(out, overwrite)
    with warnings.catch_warnings(record=True) as caught:  # an unfinished run left out: one line through say
        warnings.simplefilter("always")
        report = build(paths, thresholds, baselines, sustain, rank_by)
    for w in caught:
        if issubclass(w.category, UnfinishedRunWarning) and say is not None:
            say(str(w.message))
        else:
            warnings.warn(w.message, w.category, stacklevel=2)
    comp = comparison(report, parse_reference(reference)) if reference else None
    for line in report_divergence_notes(report) if say is not None else []:
        say(line)
    out.mkdir(parents=True, exist_ok=True)
    add_to_manifest(out, *OUTPUTS, *(REFERENCE_OUTPUTS if comp else ()))  # listed before they are written
    written = []
    tables = [("leaderboard.csv", leaderboard_rows(report)), ("paired.csv", paired_rows(report))]
    tables += [("against_reference.csv", comparison_rows(comp))] if comp else []
    for name, (header, rows) in tables:
        atomic_write_bytes(out / name, csv_text(header, rows).encode())
        written.append(out / name)
    text = markdown(report) + (comparison_markdown(comp, report["display"]) if comp else "")
    assert text.startswith(MARK)
    atomic_write_bytes(out / "leaderboard.md", text.encode())
    written.append(out / "leaderboard.md")
    for draw, name in ((plot_tta_vs_bandwidth, "tta_vs_bandwidth.png"),
                       (plot_accuracy_extremes, "accuracy_vs_time_extremes.png")):
        figure = draw(report, out / name)  # all or nothing (edgesim.plots.save)
        if figure is not None:
            written += [figure, figure.with_suffix(".csv")]
    figure = plot_energy_vs_time(report, comp, out / "energy_vs_time.png") if comp else None
    if figure is not None:
        written += [figure, figure.with_suffix(".csv")]
    return written
