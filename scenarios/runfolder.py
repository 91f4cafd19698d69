"""The run folder: written atomically, never silently truncated (ARCHITECTURE.md, "Run folder").

A run is built in ``<out>.incomplete/`` with an ``INCOMPLETE`` marker that says
what happened; only a finished run is renamed to ``<out>/`` (replacing an older
one). A crashed or killed run therefore leaves ``<out>.incomplete/`` — clearly
marked, with whatever it had completed — and never a half-written ``<out>/``.
Every file is written to a temporary name and renamed into place.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Sequence

MARKER = "INCOMPLETE"


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


class RunFolder:
    """``final`` is where a finished run lands; work happens in ``final.incomplete``."""

    def __init__(self, final: Path):
        self.final = Path(final)
        self.work = self.final.with_name(self.final.name + ".incomplete")

    def start(self, *, resume: bool = False) -> None:
        """Create the working folder with its marker (``resume`` keeps what is there)."""
        if self.work.exists() and not resume:
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True, exist_ok=True)
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
        """Remove the marker and move the folder to its final name (replacing an older run)."""
        (self.work / MARKER).unlink(missing_ok=True)
        if self.final.exists():
            old = self.final.with_name(self.final.name + ".old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(self.final, old)
            os.replace(self.work, self.final)
            shutil.rmtree(old)
        else:
            os.replace(self.work, self.final)
        return self.final
