"""DBPedia ontology classification (Zhang et al., 2015) from its CSV files ``train.csv``, ``test.csv``.

Rows ``label(1..14),title,content``; a file of canonical size must match its
published sha256 (docs/use/data.md); texts become token ids with
:mod:`edgesim.learning.data.tokens`. Numpy only.
"""

from __future__ import annotations

import csv
import hashlib
from collections import Counter
from pathlib import Path

import numpy as np

from edgesim.learning.data.dataset import Dataset, DatasetError
from edgesim.learning.data.files import existing_dir
from edgesim.learning.data.tokens import (
    check_max_len,
    check_vocab_size,
    encode,
    encode_tokens,
    tokenize,
    vocab_from_counts,
)

_DBPEDIA_CLASSES = ("Company", "EducationalInstitution", "Artist", "Athlete", "OfficeHolder", "MeanOfTransportation",
                    "Building", "NaturalPlace", "Village", "Animal", "Plant", "Album", "Film", "WrittenWork")
# canonical (size in bytes, sha256); data/README.md
_DBPEDIA_SHA256 = {
    "train.csv": (174148970, "3fea0c8c6ae73d0911f9cf37ec68606d169c4edd9214c6443b035649a3fb38ce"),
    "test.csv": (21775285, "3d7b5fc00870e3446e322479af553629f55e313dd3b4249c08b68132d1230804"),
}


def _read_dbpedia_csv(path: Path) -> tuple[np.ndarray, list[str]]:
    """Rows ``label(1..14),title,content`` → (labels 0..13, texts "title content")."""
    expected = "CSV rows label(1..14),title,content"
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise DatasetError(f"missing file {path}: expected the DBPedia file {path.name} ({expected})") from None
    known = _DBPEDIA_SHA256.get(path.name)
    if known and size == known[0]:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != known[1]:
            raise DatasetError(f"{path}: sha256 {digest.hexdigest()} does not match the published {known[1]} "
                               f"for this {known[0]}-byte file — the file is corrupt or not DBPedia")
    labels, texts = [], []
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        try:
            for row in reader:
                if len(row) != 3:
                    raise DatasetError(f"{path}:{reader.line_num}: {len(row)} fields; expected 3 fields: {expected}")
                label = row[0].strip()
                if not (label.isascii() and label.isdigit() and 1 <= int(label) <= 14):
                    raise DatasetError(f"{path}:{reader.line_num}: label {row[0]!r}; expected an integer 1..14 ({expected})")
                labels.append(int(label) - 1)
                texts.append(f"{row[1]} {row[2]}")
        except csv.Error as exc:
            raise DatasetError(f"{path}:{reader.line_num}: malformed CSV ({exc}); expected {expected}") from None
        except UnicodeDecodeError as exc:
            raise DatasetError(
                f"{path}: after line {reader.line_num}: not UTF-8 ({exc.reason}); expected UTF-8 {expected}") from None
    if not labels:
        raise DatasetError(f"{path}: no rows; expected {expected}")
    return np.array(labels, dtype=np.int64), texts


def load_dbpedia(data_dir: str | Path, vocab_size: int = 199_000, max_len: int = 100) -> Dataset:
    """DBPedia ontology (14 classes) from ``dbpedia_csv/train.csv`` and ``test.csv``.

    Text = title + " " + content, lower-cased and split by :func:`tokenize`;
    vocabulary from the TRAIN split only (:func:`build_vocab`); each document
    keeps its first ``max_len`` tokens. ``vocab_size`` counts the two reserved
    ids; the default 199k rows x 64 dims gives DoFed-SPP's ≈51 MB text model.
    """
    root = existing_dir(data_dir, "DBPedia")
    folder = root if (root / "train.csv").is_file() else root / "dbpedia_csv"
    for name in ("train.csv", "test.csv"):
        if not (folder / name).is_file():
            raise DatasetError(f"missing file {folder / name}: expected the DBPedia CSV files train.csv and test.csv "
                               f"under {root / 'dbpedia_csv'} or {root}")
    check_vocab_size(vocab_size)
    check_max_len(max_len)
    y_train, texts = _read_dbpedia_csv(folder / "train.csv")
    y_test, test_texts = _read_dbpedia_csv(folder / "test.csv")
    counts: Counter = Counter()
    for i, text in enumerate(texts):  # one regex pass over train: count all tokens, keep the first max_len
        tokens = tokenize(text)
        counts.update(tokens)
        texts[i] = " ".join(tokens[:max_len])  # tokens hold no whitespace, so split() restores them
    vocab = vocab_from_counts(counts, vocab_size)
    return Dataset(
        name="dbpedia", kind="text",
        x_train=encode_tokens((t.split() for t in texts), len(texts), vocab, max_len), y_train=y_train,
        x_test=encode(test_texts, vocab, max_len), y_test=y_test,
        n_classes=14, class_names=_DBPEDIA_CLASSES, vocab_size=len(vocab) + 2)
