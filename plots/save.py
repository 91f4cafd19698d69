"""Writing a figure all or nothing: a temporary file renamed into place.

A full disk (or ``ulimit -f``) while a PNG is written leaves no truncated
figure and no temporary file: the error (an ``OSError`` naming the figure) is
the caller's to report.
"""

from __future__ import annotations

import os
from pathlib import Path


def save_figure(fig, path, **kwargs) -> Path:
    """Save ``fig`` to ``path`` via ``.NAME.tmp`` and ``os.replace``; returns ``path``.

    The format is the suffix of ``path`` (``png`` when it has none); ``kwargs`` go to ``savefig``.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fig.savefig(tmp, format=path.suffix[1:] or "png", **kwargs)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror or str(e), str(path)) from None
    return path


def save_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` all or nothing, as :func:`save_figure`; returns ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror or str(e), str(path)) from None
    return path
