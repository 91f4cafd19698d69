"""Text as token ids: the tokenizer, the vocabulary, padded id matrices and EmbeddingBag offsets.

Lower-cased word tokens (runs of Unicode letters and digits); ids 0 = padding
and 1 = unknown are reserved, the vocabulary ranks the rest by frequency
(ties by the token string). Used by the DBPedia loader
(:mod:`edgesim.learning.data.dbpedia`) and the text model. Numpy only.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from itertools import repeat

import numpy as np

_TOKEN = re.compile(r"[^\W_]+")  # runs of Unicode letters/digits; punctuation and "_" separate tokens
PAD, UNK = 0, 1


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens: maximal runs of Unicode letters and digits."""
    return _TOKEN.findall(text.lower())


def check_vocab_size(vocab_size) -> None:
    if not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size(={vocab_size!r}) must be an integer >= 2 (0 = padding, 1 = unknown)")


def check_max_len(max_len) -> None:
    if not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len(={max_len!r}) must be an integer >= 1")


def vocab_from_counts(counts: Counter, vocab_size: int) -> dict[str, int]:
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[: vocab_size - 2]
    return {token: rank + 2 for rank, (token, _) in enumerate(ranked)}


def build_vocab(texts: list[str], vocab_size: int) -> dict[str, int]:
    """Token → id for the ``vocab_size - 2`` most frequent tokens (ids 2..), ties broken by the token string.

    Ids 0 (padding) and 1 (unknown) are reserved, so ``vocab_size`` is the
    number of embedding rows a model needs.
    """
    check_vocab_size(vocab_size)
    counts: Counter = Counter()
    for text in texts:
        counts.update(tokenize(text))
    return vocab_from_counts(counts, vocab_size)


def encode_tokens(token_lists, n: int, vocab: dict[str, int], max_len: int) -> np.ndarray:
    flat, lengths = array("q"), np.zeros(n, dtype=np.int64)
    for row, tokens in enumerate(token_lists):
        tokens = tokens[:max_len]
        flat.extend(map(vocab.get, tokens, repeat(UNK)))
        lengths[row] = len(tokens)
    out = np.zeros((n, max_len), dtype=np.int64)
    out[np.arange(max_len) < lengths[:, None]] = np.frombuffer(flat, dtype=np.int64) if len(flat) else 0
    return out


def encode(texts: list[str], vocab: dict[str, int], max_len: int) -> np.ndarray:
    """Texts → int64 ``(n, max_len)``: the first ``max_len`` tokens' ids (unknown → 1), padded with 0."""
    check_max_len(max_len)
    return encode_tokens((tokenize(t) for t in texts), len(texts), vocab, max_len)


def to_offsets(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Padded ``(n, max_len)`` ids → ``(flat, offsets)`` for ``nn.EmbeddingBag(input, offsets)``.

    ``flat`` holds each row's non-padding ids in order; ``offsets[i]`` is
    where row i starts (an all-padding row is an empty bag).
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens has {tokens.dtype} shape {tokens.shape}; expected a 2-D integer matrix")
    keep = tokens != PAD
    lengths = keep.sum(axis=1)
    offsets = np.zeros(len(tokens), dtype=np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    return tokens[keep].astype(np.int64), offsets
