"""Reading a data file: its bytes, gzip, checksums, the data folder, the range of its labels.

What every loader shares; each failure is a :class:`edgesim.learning.data.dataset.DatasetError`
naming the file and what was expected (docs/use/data.md). Standard library and numpy only.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from pathlib import Path

import numpy as np

from edgesim.learning.data.dataset import DatasetError


def read_bytes(path: Path, expected: str) -> bytes:
    """The bytes of ``path``; a missing or unreadable file is a :class:`DatasetError` naming ``expected``."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"missing file {path}: expected {expected}") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read it ({exc}); expected {expected}") from None


def is_gzip(data: bytes) -> bool:
    """Whether ``data`` starts with gzip's magic bytes (1f 8b)."""
    return data[:2] == b"\x1f\x8b"


def gunzip(data: bytes, path: Path, expected: str) -> bytes:
    """``data`` decompressed; a corrupt stream is a :class:`DatasetError` naming ``path`` and ``expected``."""
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(
            f"{path}: corrupt gzip stream ({exc}); expected {expected} — the file is damaged or incomplete") from None


def check_label_range(y: np.ndarray, n_classes: int, path: Path, what: str) -> None:
    """A :class:`DatasetError` naming the first label of ``y`` outside ``0..n_classes-1`` (``what`` of ``path``)."""
    if len(y) and (y.min() < 0 or y.max() >= n_classes):
        bad = y[(y < 0) | (y >= n_classes)]
        raise DatasetError(
            f"{path}: {what} holds label {int(bad[0])} ({len(bad)} out of range); expected labels 0..{n_classes - 1}")


def md5(data: bytes) -> str:
    """The hex md5 of ``data`` (what the data sets' authors publish; not a security check)."""
    return hashlib.md5(data).hexdigest()


def existing_dir(data_dir, what: str) -> Path:
    """``data_dir`` as an existing folder; ``None`` or a non-folder is a :class:`DatasetError` saying what to pass."""
    if data_dir is None:
        raise DatasetError(f"{what} needs files on disk: give their folder as ⟨data-dir⟩, the "
                           "EDGESIM_DATA environment variable, or the scenario key `data.data_dir`")
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise DatasetError(f"data_dir {path} is not a directory; expected a folder holding the {what} files")
    return path
