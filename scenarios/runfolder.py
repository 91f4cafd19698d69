"""The run folder: checked before any work, written atomically, never touching what the user made.

A run is built in ``<out>.incomplete/`` with an ``INCOMPLETE`` marker that says
what happened; only a finished run is renamed to ``<out>/``. A crashed or
killed run therefore leaves ``<out>.incomplete/`` — clearly marked, with
whatever it had completed — and never a half-written ``<out>/``. Every file is
written to a temporary name and renamed into place.

What ``--out`` may be (:func:`check_out`, before any work):

- a path that does not exist yet, under a folder we can write to;
- an empty folder;
- an edgesim run folder (every entry one that a run writes): replaced only
  with ``overwrite`` — and then only that folder, moved aside under a unique
  temporary name (``.<out>.replaced-XXXX``) and removed once the new run is
  in place — or gone on with by ``--resume``.

Anything else — a file, ``''``, ``.``, ``..``, the current folder or one of
its parents, a folder holding anything a run does not write, a place we
cannot write to — is refused with one line, and nothing is touched.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Optional, Sequence

from edgesim.config import ConfigError

MARKER = "INCOMPLETE"
CHECKPOINT_DIR = "checkpoints"
GRAPH_DIR = "graphs"  # per-round node-link graphs (scenarios.graphs)
# What a run writes into its folder (and nothing else); *.png, *.pdf, *.svg are its figures.
RUN_FILES = frozenset({MARKER, "config.toml", "run.json", "rounds.csv", "devices.csv", "events.csv", "summary.json"})
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace`` (all or nothing)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def csv_text(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for row in rows:
        w.writerow(["" if v is None else (repr(v) if isinstance(v, float) else v) for v in row])
    return buf.getvalue()


def _is_run_entry(entry: Path) -> bool:
    """An entry a run writes: its files, figures, checkpoints and our temporary files."""
    name = entry.name
    if entry.is_dir() and not entry.is_symlink():
        if name == GRAPH_DIR:  # graphs/<algorithm>/round_NNNN.json
            return all(d.is_dir() and not d.is_symlink() and all(_is_plain(p, (".json", ".tmp")) for p in d.iterdir())
                       for d in entry.iterdir())
        return name == CHECKPOINT_DIR and all(_is_plain(p, (".pt", ".tmp")) for p in entry.iterdir())
    if not entry.is_file() or entry.is_symlink():
        return False
    return name in RUN_FILES or name.endswith(FIGURE_SUFFIXES) or (name.startswith(".") and name.endswith(".tmp"))


def _is_plain(path: Path, suffixes: tuple[str, ...]) -> bool:
    return path.is_file() and not path.is_symlink() and path.suffix in suffixes


def foreign_entry(folder: Path) -> Optional[Path]:
    """The first entry of ``folder`` that no run writes (``None``: every entry is a run's own)."""
    for entry in sorted(Path(folder).iterdir()):
        if not _is_run_entry(entry):
            return entry
    return None


def is_run_folder(folder: Path) -> bool:
    """A folder that a run wrote: a ``config.toml`` and nothing that a run does not write."""
    folder = Path(folder)
    return folder.is_dir() and (folder / "config.toml").is_file() and foreign_entry(folder) is None


def is_finished(folder: Path) -> bool:
    """A finished run folder: ``summary.json`` present, no ``INCOMPLETE`` marker."""
    folder = Path(folder)
    return (folder / "summary.json").is_file() and not (folder / MARKER).exists()


def _writable_parent(path: Path, out: str) -> Path:
    """The nearest existing ancestor of ``path``; a clear error unless it is a folder we may write to."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"--out {out}: {parent} is a file, not a folder; expected a path under a folder")
    try:  # os.access says yes to root everywhere (/proc too): try it, with a folder of our own, removed at once
        os.rmdir(tempfile.mkdtemp(prefix=".edgesim-probe-", dir=parent))
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot write in {parent} ({e.strerror or e}); "
                          f"expected a folder you may write to") from None
    return parent


def _refuse_folder(path: Path, what: str, hint: str, out: Optional[Path] = None) -> None:
    """One error for an existing ``path`` we will not touch, naming the first entry that is not a run's."""
    entry = foreign_entry(path)
    if entry is not None:
        holding = f" (it holds {entry.name!r}, which edgesim did not write)"
    elif not (path / "config.toml").is_file():
        holding = " (it has no config.toml, so the run's scenario is unknown; it is left as it is)"
    else:
        holding = ""
    where = f"--out {path}:" if out is None else f"--out {out}: {path}"
    raise ConfigError(f"{where} {what}{holding}; {hint}")


def check_out(out: Path, *, overwrite: bool = False, resume: bool = False) -> None:
    """Refuse an ``--out`` that a run must not use; touches nothing (module docstring lists the cases)."""
    text = str(out)
    out = Path(out)
    if text.strip() == "" or out.name in ("", ".", ".."):
        raise ConfigError(f"--out {text!r}: expected the path of a new run folder, such as runs/mine")
    resolved = out.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ConfigError(f"--out {text!r} is the current folder or one of its parents; expected a new run folder")
    folder = RunFolder(out)
    for path, hint in ((folder.final, "the finished run"), (folder.work, "the unfinished run")):
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise ConfigError(f"--out {text!r}: {path} exists and is not a folder; expected a folder for {hint}")
    if folder.final.is_dir() and any(folder.final.iterdir()):
        if not is_run_folder(folder.final):
            _refuse_folder(folder.final, "exists and is not an edgesim run folder",
                           "choose another --out; edgesim never deletes what it did not write")
        if not (overwrite or resume):
            raise ConfigError(f"--out {text!r}: {folder.final} holds a finished run; add --overwrite to replace it, "
                              f"or choose another --out")
    if folder.work.is_dir() and any(folder.work.iterdir()):
        if not is_run_folder(folder.work) or not (folder.work / MARKER).is_file():
            _refuse_folder(folder.work, "is not an unfinished edgesim run",
                           "choose another --out; edgesim never deletes what it did not write", out=out)
        if not (overwrite or resume):
            raise ConfigError(f"--out {text!r}: {folder.work} holds an unfinished run; add --resume to go on with it, "
                              f"or --overwrite to start it again")
    _writable_parent(folder.work, text)


def set_aside(folder: Path) -> Path:
    """Move ``folder`` out of the way under a unique hidden name next to it; returns the new path."""
    holder = Path(tempfile.mkdtemp(prefix=f".{folder.name}.replaced-", dir=folder.parent))
    os.replace(folder, holder / folder.name)
    return holder


class RunFolder:
    """``final`` is where a finished run lands; work happens in ``final.incomplete``."""

    def __init__(self, final: Path):
        self.final = Path(final)
        self.work = self.final.with_name(self.final.name + ".incomplete")

    def start(self, *, resume: bool = False) -> None:
        """Create the working folder with its marker (``resume`` keeps what is there).

        A working folder that is there and not resumed is one of our own (checked
        by :func:`check_out`): it is set aside and removed, never a user's.
        """
        try:
            if self.work.exists() and not resume:
                if not is_run_folder(self.work) and any(self.work.iterdir()):
                    _refuse_folder(self.work, "is not an unfinished edgesim run", "choose another --out")
                shutil.rmtree(set_aside(self.work))
            self.work.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"--out {self.final}: cannot create {self.work}: {e.strerror or e}") from None
        self.mark(f"started {datetime.now(timezone.utc).isoformat(timespec='seconds')}; the run has not finished.")

    def mark(self, line: str) -> None:
        marker = self.work / MARKER
        previous = marker.read_text() if marker.exists() else "This run folder is INCOMPLETE: do not use its results.\n"
        atomic_write_bytes(marker, (previous + line.rstrip() + "\n").encode())

    def path(self, name: str) -> Path:
        return self.work / name

    def write_text(self, name: str, text: str) -> None:
        p = self.work / name
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(p, text.encode())

    def write_json(self, name: str, obj) -> None:
        self.write_text(name, json.dumps(obj, indent=2, sort_keys=False) + "\n")

    def write_csv(self, name: str, header: Sequence[str], rows: Iterable[Sequence]) -> None:
        self.write_text(name, csv_text(header, rows))

    def finish(self) -> Path:
        """Remove the marker and move the folder to its final name.

        An older run in ``final`` (checked by :func:`check_out` to be a run
        folder, and checked again here) is moved aside under a unique name and
        removed only once the new run is in place; an empty folder is replaced.
        """
        if self.final.exists() and any(self.final.iterdir()) and not is_run_folder(self.final):
            _refuse_folder(self.final, "appeared during the run and is not an edgesim run folder",
                           f"the new run is kept in {self.work}")
        (self.work / MARKER).unlink(missing_ok=True)
        old = set_aside(self.final) if self.final.exists() else None
        os.replace(self.work, self.final)
        if old is not None:
            shutil.rmtree(old)
        return self.final
