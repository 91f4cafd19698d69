"""Writing a run folder: checked before any work, written atomically, never touching what the user made.

A run is built in ``<out>.incomplete/`` with an ``INCOMPLETE`` marker that says
what happened; only a finished run is renamed to ``<out>/``. A crashed or
killed run therefore leaves ``<out>.incomplete/`` — clearly marked, with
whatever it had completed — and never a half-written ``<out>/``. Every file is
written to a temporary name and renamed into place.

Every file a run writes is first listed in the folder's ``manifest.json``
(:func:`add_to_manifest`); a folder is an edgesim run folder when every file
in it is listed there (a ``.NAME.tmp`` of a listed ``NAME`` too: what a full
disk leaves). Anything else — a user's ``my_diagram.png`` or
``checkpoints/my_model.pt`` that looks like a run's file — makes it a user's
folder, and the error names that file.

What ``--out`` may be (:func:`check_out`, before any work):

- a path that does not exist yet, under a folder we can write to;
- an empty folder;
- an edgesim run folder: replaced only with ``overwrite`` — and then only
  that folder, moved aside under a unique temporary name
  (``.<out>.replaced-XXXX``) and removed once the new run is in place — or
  gone on with by ``--resume``.

Anything else — a file, ``''``, ``.``, ``..``, the current folder or one of
its parents, a folder holding anything its manifest does not list, a place we
cannot write to — is refused with one line, and nothing is touched.

One process at a time: a run holds ``.<out>.lock`` beside ``<out>`` (created
with ``O_EXCL``, holding its pid and host; :class:`RunLock`) from before its
last check of ``--out`` until it has finished; another run, resume or
overwrite of the same ``--out`` is refused naming that process. A lock whose
process is gone (same host) is stale and taken over.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shutil
import socket
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Optional, Sequence

from edgesim.config import ConfigError
from edgesim.results.files import CONFIG, MANIFEST, MARKER, SUMMARY


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace`` (all or nothing)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:  # a full disk: no partial temporary file left behind, the error names the file
        tmp.unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror or str(e), str(path)) from None


def json_safe(obj):
    """``obj`` with every float that is not finite (NaN, ±inf) replaced by ``None``, in dicts, lists and tuples."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def csv_text(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for row in rows:
        w.writerow(["" if v is None else (repr(v) if isinstance(v, float) else v) for v in row])
    return buf.getvalue()


class LiveCsv:
    """A CSV that grows row by row while a run goes (``rounds.csv``, ``devices.csv``; docs/use/run_folders.md).

    The header is fixed by the first :meth:`append` (``header``); later rows are
    written under it (a column it lacks is left out, a missing value is empty).
    Each call appends its rows as whole lines in one ``os.write`` to a file opened
    with ``O_APPEND``, so they are in the file (the kernel's page cache) at once,
    and a reader that reads up to the last newline never sees a torn row
    (:func:`edgesim.results.reading.read_live_csv`). Opening truncates: a resumed
    run writes the file again from its restored rounds. The finished run replaces
    the file (atomically) with the complete one.
    """

    def __init__(self, path: Path):
        self.path, self.fd, self.header = Path(path), None, None

    def append(self, header: Sequence[str], rows: Iterable[dict]) -> None:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
            self.header = list(header)
            writer.writerow(self.header)
        writer.writerows([row.get(k) for k in self.header] for row in rows)
        data = buf.getvalue().encode()
        while data:
            data = data[os.write(self.fd, data):]

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def read_manifest(folder: Path) -> Optional[set[str]]:
    """The relative paths ``folder/manifest.json`` lists; ``None`` when it is missing or not edgesim's."""
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) and data.get("written_by") == "edgesim" else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return set(files)


def add_to_manifest(folder: Path, *names: str) -> None:
    """List ``names`` (paths relative to ``folder``) in its manifest, before they are written."""
    folder = Path(folder)
    listed = read_manifest(folder) or set()
    if set(names) <= listed and (folder / MANIFEST).is_file():
        return
    _write_manifest(folder, listed | set(names))


def drop_from_manifest(folder: Path, prefix: str) -> None:
    """Forget the listed paths under ``prefix`` (after removing them)."""
    listed = read_manifest(folder) or set()
    _write_manifest(Path(folder), {f for f in listed if not (f == prefix or f.startswith(prefix + "/"))})


def _write_manifest(folder: Path, files: set[str]) -> None:
    text = json.dumps({"written_by": "edgesim", "files": sorted(files)}, indent=1) + "\n"
    atomic_write_bytes(folder / MANIFEST, text.encode())


def claim_files(folder: Path, names: Iterable[str], option: str = "out") -> None:
    """Let edgesim write ``names`` into ``folder``: each must be new or listed in its manifest; then list them.

    A file there that edgesim did not write (not in ``folder/manifest.json``)
    is refused with one line naming it, and nothing is touched.
    """
    folder = Path(folder)
    names = list(names)
    listed = read_manifest(folder)
    if listed is None and (folder / MANIFEST).exists():
        raise ConfigError(f"⟨{option}=⟩{folder}: {folder / MANIFEST} was not written by edgesim; edgesim keeps "
                          f"its list of what it wrote there; choose another ⟨{option}⟩")
    for name in names:
        if (folder / name).exists() and name not in (listed or set()):
            raise ConfigError(f"⟨{option}=⟩{folder}: {folder / name} exists and edgesim did not write it; it is left "
                              f"as it is: choose another ⟨{option}⟩, or move it away")
    if folder.is_dir():
        add_to_manifest(folder, *names)


def _listed(rel: str, listed: set[str]) -> bool:
    """``rel`` is listed, or is the temporary ``.NAME.tmp`` of a listed ``NAME`` (a write cut short)."""
    if rel in listed or rel == MANIFEST:
        return True
    head, _, name = rel.rpartition("/")
    if name.startswith(".") and name.endswith(".tmp"):
        real = f"{head}/{name[1:-4]}" if head else name[1:-4]
        return real in listed or real == MANIFEST
    return False


def foreign_entry(folder: Path) -> Optional[Path]:
    """The first path under ``folder`` that its manifest does not list (``None``: every one is edgesim's).

    A folder without an edgesim ``manifest.json`` answers ``folder/manifest.json``.
    """
    folder = Path(folder)
    listed = read_manifest(folder)
    if listed is None:
        return folder / MANIFEST if (folder / MANIFEST).exists() else min(folder.iterdir(), default=folder / MANIFEST)
    parents = {p for f in listed for p in _prefixes(f)}
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(root, d))]):
            path = Path(root) / name
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink() or not path.is_file() or not _listed(rel, listed):
                return path
        for d in dirs:
            path = Path(root) / d
            if not path.is_symlink() and path.relative_to(folder).as_posix() not in parents and not any(path.iterdir()):
                return path  # an empty folder edgesim did not make
    return None


def _prefixes(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def is_run_folder(folder: Path) -> bool:
    """A folder that a run wrote: a ``config.toml`` and nothing that a run does not write."""
    folder = Path(folder)
    return folder.is_dir() and (folder / CONFIG).is_file() and foreign_entry(folder) is None


def is_started_run(folder: Path) -> bool:
    """An unfinished run that edgesim began and stopped before it wrote anything but its marker (killed, or a sweep
    stopped, in its first instants): ``INCOMPLETE`` and a manifest that lists only it. Nothing in it to resume: a run
    of that ``--out`` starts it again, as it would a run without checkpoints. (A folder that lost its ``config.toml``
    later is no such folder: it is refused, its checkpoints kept.)"""
    folder = Path(folder)
    return (folder.is_dir() and (folder / MARKER).is_file() and read_manifest(folder) == {MARKER}
            and {p.name for p in folder.iterdir()} == {MARKER, MANIFEST})


def is_finished(folder: Path) -> bool:
    """A finished run folder: ``summary.json`` present, no ``INCOMPLETE`` marker."""
    folder = Path(folder)
    return (folder / SUMMARY).is_file() and not (folder / MARKER).exists()


RUN_SUFFIX_CHARS = len(".incomplete.replaced-") + 9  # the longest name a run gives (set_aside of .incomplete)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_out_path(out, option: str = "out", *, suffix_chars: int = 0) -> Path:
    """The one check of a path that ``run``, ``sweep``, ``report`` and ``plot`` will write to, before anything else
    touches it: not ``''``, no control character (a newline, a BEL), no name longer than the file system allows
    (``suffix_chars``: what the command adds to the last name, :data:`RUN_SUFFIX_CHARS` for a run), and a place we
    may write to (a folder we can create files in: read-only places and full disks are refused here). Returns
    ``Path(out)``; :class:`ConfigError` naming ``option``, the value and what was expected otherwise."""
    if not isinstance(out, (str, os.PathLike)):
        raise ConfigError(f"⟨{option}=⟩{out!r}: expected a path (a str or a pathlib.Path), not {type(out).__name__}")
    text = os.fspath(out)
    if not isinstance(text, str) or text.strip() == "":
        raise ConfigError(f"⟨{option}=⟩{text!r}: expected the path of a folder, such as runs/mine")
    bad = _CONTROL.search(text)
    if bad:
        raise ConfigError(f"⟨{option}=⟩{text!r}: holds the control character {bad.group()!r} at position "
                          f"{bad.start()}; expected a path of printable characters")
    path = Path(text)
    place = _existing_ancestor(path)
    try:
        name_max = os.pathconf(place, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    for i, part in enumerate(path.parts):
        room = name_max - (suffix_chars if i == len(path.parts) - 1 else 0)
        if len(os.fsencode(part)) > room:
            extra = f" (edgesim adds up to {suffix_chars} for its working names)" if suffix_chars else ""
            raise ConfigError(f"⟨{option}=⟩{text[:40]}...: the name {part[:20]}... is {len(os.fsencode(part))} bytes; "
                              f"expected at most {room}{extra}: this file system allows {name_max}")
    if len(os.fsencode(os.path.abspath(text))) + suffix_chars >= 4096:
        raise ConfigError(f"⟨{option}=⟩{text[:40]}...: the path is {len(os.fsencode(os.path.abspath(text)))} bytes; "
                          f"expected under {4096 - suffix_chars} (the system's PATH_MAX)")
    _writable_parent(path / "x" if path.is_dir() else path, text, option)
    return path


def _existing_ancestor(path: Path) -> Path:
    """The nearest ancestor of ``path`` (or ``path``) that exists (the current folder for a relative path)."""
    probe = Path(os.path.abspath(path))
    while True:
        try:
            if probe.exists():
                return probe
        except OSError:
            pass
        if probe == probe.parent:
            return probe
        probe = probe.parent


def _writable_parent(path: Path, out: str, option: str = "out") -> Path:
    """The nearest existing ancestor of ``path``; a clear error unless it is a folder we may write to."""
    parent = _existing_ancestor(path.parent)
    if not parent.is_dir():
        raise ConfigError(f"⟨{option}=⟩{out}: {parent} is a file, not a folder; expected a path under a folder")
    try:  # os.access says yes to root everywhere (/proc too): try it, with a folder of our own, removed at once
        os.rmdir(tempfile.mkdtemp(prefix=".edgesim-probe-", dir=parent))
    except OSError as e:
        raise ConfigError(f"⟨{option}=⟩{out}: cannot write in {parent} ({e.strerror or e}); "
                          f"expected a folder you may write to") from None
    return parent


def _refuse_folder(path: Path, what: str, hint: str, out: Optional[Path] = None) -> None:
    """One error for an existing ``path`` we will not touch, naming the first entry that is not a run's."""
    entry = foreign_entry(path)
    if entry is not None and read_manifest(path) is None and entry != path / MANIFEST:
        holding = f" (it holds {entry} and no {MANIFEST} listing what edgesim wrote, so nothing in it is edgesim's)"
    elif entry is not None and entry == path / MANIFEST and not entry.exists():
        holding = f" (it has no {MANIFEST} listing what edgesim wrote, so it is not edgesim's to replace)"
    elif entry is not None and entry == path / MANIFEST:
        holding = f" (its {MANIFEST} was not written by edgesim)"
    elif entry is not None:
        holding = f" (it holds {entry}, which edgesim did not write)"
    elif not (path / CONFIG).is_file():
        holding = f" (it has no {CONFIG}, so the run's scenario is unknown; it is left as it is)"
    else:
        holding = ""
    where = f"⟨out=⟩{path}:" if out is None else f"⟨out=⟩{out}: {path}"
    raise ConfigError(f"{where} {what}{holding}; {hint}")


def check_out(out: Path, *, overwrite: bool = False, resume: bool = False, holding_lock: bool = False) -> None:
    """Refuse an ``--out`` that a run must not use; touches nothing (module docstring lists the cases).

    ``holding_lock``: the caller holds ``out``'s :class:`RunLock` (else a lock on it is refused).
    """
    text = str(out)
    out = check_out_path(out, suffix_chars=RUN_SUFFIX_CHARS)
    if out.is_symlink():
        raise ConfigError(f"⟨out=⟩{text!r} is a symbolic link (to {os.readlink(out)}); expected the real path of "
                          f"a run folder (edgesim does not write through links)")
    if text.strip() == "" or out.name in ("", ".", ".."):
        raise ConfigError(f"⟨out=⟩{text!r}: expected the path of a new run folder, such as runs/mine")
    resolved = out.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ConfigError(f"⟨out=⟩{text!r} is the current folder or one of its parents; expected a new run folder")
    if not holding_lock:
        check_unlocked(out, text)
    folder = RunFolder(out)
    for path, hint in ((folder.final, "the finished run"), (folder.work, "the unfinished run")):
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise ConfigError(f"⟨out=⟩{text!r}: {path} exists and is not a folder; expected a folder for {hint}")
    if folder.final.is_dir() and any(folder.final.iterdir()):
        if not is_run_folder(folder.final):
            _refuse_folder(folder.final, "exists and is not an edgesim run folder",
                           "choose another ⟨out⟩; edgesim never deletes what it did not write")
        if not (overwrite or resume):
            raise ConfigError(f"⟨out=⟩{text!r}: {folder.final} holds a finished run; ⟨+overwrite⟩ to replace it, "
                              f"or choose another ⟨out⟩", where="out", key="out", value=text,
                              expected="a new run folder")
    if folder.work.is_dir() and any(folder.work.iterdir()):
        if not (is_run_folder(folder.work) and (folder.work / MARKER).is_file()) and not is_started_run(folder.work):
            _refuse_folder(folder.work, "is not an unfinished edgesim run",
                           "choose another ⟨out⟩; edgesim never deletes what it did not write", out=out)
        if not (overwrite or resume):
            raise ConfigError(f"⟨out=⟩{text!r}: {folder.work} holds an unfinished run; ⟨+resume⟩ to go on with it, "
                              f"or ⟨overwrite⟩ to start it again", where="out", key="out", value=text,
                              expected="a new run folder")
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
                if not is_run_folder(self.work) and not is_started_run(self.work) and any(self.work.iterdir()):
                    _refuse_folder(self.work, "is not an unfinished edgesim run", "choose another ⟨out⟩")
                shutil.rmtree(set_aside(self.work))
            self.work.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"⟨out=⟩{self.final}: cannot create {self.work}: {e.strerror or e}") from None
        self.mark(f"started {datetime.now(timezone.utc).isoformat(timespec='seconds')}; the run has not finished.")

    def mark(self, line: str) -> None:
        marker = self.work / MARKER
        previous = marker.read_text() if marker.exists() else f"This run folder is {MARKER}: do not use its results.\n"
        add_to_manifest(self.work, MARKER)
        atomic_write_bytes(marker, (previous + line.rstrip() + "\n").encode())

    def path(self, name: str) -> Path:
        """The path of ``name`` in the working folder, listed in its manifest (the caller writes it)."""
        add_to_manifest(self.work, name)
        return self.work / name

    def write_text(self, name: str, text: str) -> None:
        p = self.path(name)
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(p, text.encode())

    def remove(self, name: str) -> None:
        """Remove the working folder's ``name`` (a file or folder this run wrote) and forget it in the manifest."""
        path = self.work / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        drop_from_manifest(self.work, name)

    def write_json(self, name: str, obj) -> None:
        """``obj`` as JSON: a NaN or infinite number is written ``null`` (JSON has no NaN; readers take ``null`` as
        "no value", as :meth:`edgesim.results.reading.Run.final` does)."""
        self.write_text(name, json.dumps(json_safe(obj), indent=2, sort_keys=False, allow_nan=False) + "\n")

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
        drop_from_manifest(self.work, MARKER)
        old = set_aside(self.final) if self.final.exists() else None
        os.replace(self.work, self.final)
        if old is not None:
            shutil.rmtree(old)
        return self.final


# --------------------------------------------------------------------------- one process per run folder


def lock_path(out: Path) -> Path:
    """``.<out>.lock`` beside ``out`` (beside it, not in it: the folder is moved into place at the end)."""
    out = Path(out)
    return out.with_name(f".{out.name}.lock")


def _start_ticks(pid: int) -> Optional[str]:
    """When process ``pid`` started (clock ticks since boot, ``/proc/PID/stat`` field 22), or ``None`` (no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def lock_token(pid: Optional[int] = None) -> str:
    """What a lock holds: ``"PID HOST START\n"`` (``START``: :func:`_start_ticks`, ``-`` where unknown), so that a
    pid the system has reused since is not taken for the run that wrote it."""
    pid = os.getpid() if pid is None else pid
    return f"{pid} {socket.gethostname()} {_start_ticks(pid) or '-'}\n"


def _holder(lock: Path) -> Optional[str]:
    """Who holds ``lock`` (``"pid N on HOST"``), or ``None`` when it is free or stale (its process is gone, or its
    pid now belongs to a process started later). :class:`ConfigError` when ``lock`` is not an edgesim lock (a
    folder, or a file in another format: the user's)."""
    if lock.is_symlink() or (lock.exists() and not lock.is_file()):
        raise ConfigError(f"{lock} is in the way: edgesim keeps a run's lock under that name and it is not an "
                          f"edgesim lock (a folder or link of yours?); move it away, or choose another ⟨out⟩")
    try:
        text = lock.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        text = ""
    parts = text.split()
    if not text.endswith("\n") or len(parts) not in (2, 3) or not parts[0].isdigit():
        raise ConfigError(f"{lock} is in the way: edgesim keeps a run's lock under that name and this file is not "
                          f"one it wrote (expected 'PID HOST START'); move it away if it is yours, or choose "
                          f"another ⟨out⟩")
    pid, host = int(parts[0]), parts[1]
    if host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except OSError:
            pass  # it exists but is not ours to signal
        started = parts[2] if len(parts) == 3 else "-"
        now = _start_ticks(pid)
        if started != "-" and now is not None and now != started:
            return None  # the pid was reused by a process started after the lock was written
    return f"pid {pid} on {host}"


def check_unlocked(out: Path, text: Optional[str] = None) -> None:
    """Refuse an ``--out`` that another live edgesim process is running in (touches nothing)."""
    holder = _holder(lock_path(out))
    if holder is not None:
        raise ConfigError(f"⟨out=⟩{text if text is not None else out}: is in use by another edgesim process "
                          f"({holder}, see {lock_path(out).name}); wait for it to finish, or choose another ⟨out⟩")


class RunLock:
    """``with RunLock(out):`` holds ``.<out>.lock`` (created whole and exclusively; pid, host and the process's start
    time inside) and removes it at the end.

    A lock of a process that is gone (on this host), or whose pid now names a
    process started later, is stale and taken over; a live one raises
    :class:`ConfigError` naming that process; a folder or a file of another
    format under the lock's name is the user's, and refused as such.
    """

    def __init__(self, out: Path):
        self.out, self.path = Path(out), lock_path(out)
        self.token = lock_token()

    def _create(self) -> None:
        """Create the lock whole: the token is written to a private file first and hard-linked into place (atomic
        and exclusive), so no other process ever reads a lock that is still empty (and takes it for a stranger's).
        ``FileExistsError`` when it exists; ``O_EXCL`` where the file system has no hard links."""
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(self.token)
            try:
                os.link(tmp, self.path)
                return
            except FileExistsError:
                raise
            except OSError:  # no hard links here (some network and FAT file systems)
                pass
        finally:
            tmp.unlink(missing_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(self.token)

    def __enter__(self) -> "RunLock":
        for _ in range(3):
            try:
                self._create()
            except FileExistsError:
                check_unlocked(self.out)
                self.path.unlink(missing_ok=True)  # stale: its process is gone (or its pid reused)
                continue
            except OSError as e:
                raise ConfigError(f"⟨out=⟩{self.out}: cannot create the lock {self.path}: {e.strerror or e}") from None
            return self
        check_unlocked(self.out)
        raise ConfigError(f"⟨out=⟩{self.out}: cannot take the lock {self.path}; expected no other run there")

    def __exit__(self, *exc) -> None:
        try:
            if self.path.read_text(encoding="utf-8") == self.token:
                self.path.unlink()
        except OSError:
            pass
