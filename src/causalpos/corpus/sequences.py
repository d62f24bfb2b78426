"""The pretrained models' sequences (Section 5.2): their own tokenizer, the first tokens of documents, counted.

Kept apart from models.tokenizer (the trained models' BPE and snippets) so that choosing the LLMs'
sequences is code of the extraction alone: an edit here reruns extraction, not tokenizer training.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from causalpos.corpus.tokens import SPLITS, encode_texts, token_dtype

log = logging.getLogger("causalpos")


def load_tokenizer_for_extraction(location: str, setting: str):
    """The model's own tokenizer alone: the sequences are chosen (and too few refused) before the weights load.
    A folder's tokenizer files are checked first: a damaged one raises DamagedFileError naming it."""
    from transformers import AutoTokenizer

    from causalpos.models.model_files import verify_local_tokenizer

    verify_local_tokenizer(location)
    try:
        return AutoTokenizer.from_pretrained(location)
    except (OSError, ValueError) as err:
        verify_local_tokenizer(location)  # moved aside meanwhile by another job reading it?
        raise ValueError(f"{setting}: cannot load the tokenizer of {location!r}: {err}") from None


class TooFewSequences(ValueError):
    """The documents give fewer distinct sequences than asked for; the message names the settings."""


def llm_sequences(
    documents: pd.DataFrame,
    tokenizer,
    seq_len: int,
    n_sequences: int,
    seed: int = 0,
    splits=("heldout",),
    setting: str = "extraction.pretrained",
    prefix: list[int] = (),
    strict: bool = False,
) -> tuple[np.ndarray, pd.DataFrame]:
    """The pretrained models' sequences (Section 5.2): the first `seq_len` tokens of documents (`prefix`, e.g.
    BOS, included), taken from `splits` in order (all of a split before any of the next; a seeded choice within
    the last split needed), distinct, then shuffled with the same seed.

    The shuffle matters: the extraction's bootstrap groups are contiguous runs of sequences and the convergence
    table measures on the first groups, so those must be a random subset, not the first sources in document
    order. Returns the tokens [n, seq_len] and a table (row, doc_id, source, split, n_doc_tokens).
    Fewer distinct sequences than `n_sequences`: all of them (logged), or with `strict` TooFewSequences naming
    `setting`.n_sequences, seq_len and splits, with the counts per source and split.
    """
    for key, value in (("seq_len", seq_len), ("n_sequences", n_sequences)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{setting}.{key}: must be a positive integer, got {value!r}")
    unknown = sorted(set(splits) - set(SPLITS))
    if unknown or not splits:
        raise ValueError(f"{setting}.splits: {list(splits)} must name some of {list(SPLITS)}")
    rng = np.random.default_rng(seed)
    chosen, seen, available = [], set(), {}
    for split in splits:
        docs = documents[documents["split"] == split]
        ids = [list(prefix) + doc for doc in encode_texts(tokenizer, docs["text"].tolist())]
        rows = []
        for index, doc in enumerate(ids):
            window = tuple(doc[:seq_len])
            if len(window) == seq_len and window not in seen:  # a window equal to an earlier one adds nothing
                seen.add(window)
                rows.append((docs["doc_id"].iat[index], docs["source"].iat[index], split, len(doc), window))
        for source in sorted({r[1] for r in rows}):
            available[f"{source} {split}"] = sum(r[1] == source for r in rows)
        wanted = n_sequences - len(chosen)
        if len(rows) > wanted:
            rows = [rows[i] for i in np.sort(rng.choice(len(rows), size=wanted, replace=False))]
        chosen += rows
        if len(chosen) == n_sequences:
            break
    counts = ", ".join(f"{n} {key}" for key, n in available.items()) or "none"
    if len(chosen) < n_sequences:
        message = (
            f"{setting}.n_sequences = {n_sequences}: the documents of {setting}.splits = {list(splits)} give "
            f"only {len(chosen)} distinct sequences of {setting}.seq_len = {seq_len} tokens in this "
            f"tokenizer ({counts}); lower n_sequences or seq_len, allow another split, or add a source under "
            f"data.sources"
        )
        if strict or not chosen:
            raise TooFewSequences(message)
        log.info("sequences: %s; using all", message)
    order = rng.permutation(len(chosen))
    chosen = [chosen[i] for i in order]
    tokens = np.array([r[4] for r in chosen], dtype=token_dtype(len(tokenizer))).reshape(len(chosen), seq_len)
    table = pd.DataFrame(
        {
            "row": np.arange(len(chosen)),
            "doc_id": [r[0] for r in chosen],
            "source": [r[1] for r in chosen],
            "split": [r[2] for r in chosen],
            "n_doc_tokens": np.array([r[3] for r in chosen], dtype=np.int64),
        }
    )
    return tokens, table


def sequence_counts(table: pd.DataFrame) -> list[dict]:
    """How many sequences of each source and split a sequence table holds (for the tables' metadata and logs)."""
    counts = table.groupby(["source", "split"], sort=True).size()
    return [{"source": source, "split": split, "n": int(n)} for (source, split), n in counts.items()]
