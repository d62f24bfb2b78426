"""The pretrained models' sequences under the content controls of issue 43 (claim 12, catalogue.preregistered).

Section 5.2's sequences are the first tokens of documents (corpus.sequences.llm_sequences), so whatever openings
have in common at a position (headlines, titles, a play's cast list) could make a non-relative mean map without
the mask. Each control keeps the model's BOS prefix where it has one and changes the content after it:

- `documents`: the sequences of Section 5.2 (llm_sequences), the reference;
- `mid_document`: windows cut at a seeded random offset inside documents at least twice the window long, never
  overlapping the document's own first window: text that is not an opening;
- `random_tokens`: tokens drawn uniformly from the vocabulary without its special tokens: no content at all;
- `shuffled_documents`: each `documents` sequence with its tokens after the prefix permuted: the same tokens,
  no order.

Every condition has the same number of sequences of the same length, so their amplitudes, which sampling noise
biases upwards by an amount that depends on N, compare at equal N.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from causalpos.catalogue.models import CONDITIONS
from causalpos.corpus.sequences import TooFewSequences, llm_sequences
from causalpos.corpus.tokens import encode_texts, token_dtype

SEED_OFFSET = {condition: i for i, condition in enumerate(CONDITIONS)}  # each condition's own random stream


def condition_sequences(
    condition: str,
    documents: pd.DataFrame,
    tokenizer,
    seq_len: int,
    n_sequences: int,
    seed: int = 0,
    splits=("heldout",),
    setting: str = "extraction.pretrained",
    prefix: list[int] = (),
) -> tuple[np.ndarray, pd.DataFrame]:
    """Tokens [n_sequences, seq_len] of `condition` and a table (row, doc_id, source, split, n_doc_tokens, offset:
    where the window starts in the document after the prefix; -1 for random tokens). Too few documents for
    n_sequences windows: TooFewSequences naming `setting`."""
    if condition not in CONDITIONS:
        raise ValueError(f"{setting}: unknown condition {condition!r}; known: {list(CONDITIONS)}")
    prefix = list(prefix)
    if seq_len <= len(prefix):
        raise ValueError(f"{setting}.seq_len = {seq_len} leaves no token after the prefix of {len(prefix)}")
    if condition == "mid_document":
        return mid_document(documents, tokenizer, seq_len, n_sequences, seed, splits, setting, prefix)
    if condition == "random_tokens":
        return random_tokens(tokenizer, seq_len, n_sequences, seed, prefix)
    tokens, table = llm_sequences(
        documents,
        tokenizer,
        seq_len,
        n_sequences,
        seed=seed,
        splits=splits,
        setting=setting,
        prefix=prefix,
        strict=True,
    )
    table = table.assign(offset=np.zeros(len(table), np.int64))
    if condition == "shuffled_documents":
        tokens = shuffled(tokens, len(prefix), np.random.default_rng([seed, SEED_OFFSET[condition]]))
    return tokens, table


def shuffled(tokens: np.ndarray, keep: int, rng: np.random.Generator) -> np.ndarray:
    """Each row's tokens after the first `keep` permuted, a permutation of its own per row."""
    out = tokens.copy()
    for row in out:
        row[keep:] = rng.permutation(row[keep:])
    return out


def random_tokens(tokenizer, seq_len: int, n_sequences: int, seed: int, prefix: list[int]):
    """Tokens drawn uniformly, with replacement, from the vocabulary without the tokenizer's special tokens."""
    special = set(tokenizer.all_special_ids)
    vocabulary = np.array([i for i in range(len(tokenizer)) if i not in special], dtype=np.int64)
    rng = np.random.default_rng([seed, SEED_OFFSET["random_tokens"]])
    body = vocabulary[rng.integers(0, len(vocabulary), size=(n_sequences, seq_len - len(prefix)))]
    tokens = np.concatenate([np.tile(np.array(prefix, dtype=np.int64), (n_sequences, 1)), body], axis=1)
    table = sequence_table([("", "random_tokens", "", 0, -1)] * n_sequences)
    return tokens.astype(token_dtype(len(tokenizer))), table


def mid_document(documents, tokenizer, seq_len, n_sequences, seed, splits, setting, prefix):
    """One window of seq_len - len(prefix) tokens per chosen document, at an offset drawn uniformly from
    [body, n_doc - body] (body: the window's length), so it never overlaps the opening; documents of at least
    2 * body tokens of `splits`, in order, a seeded choice of them, then shuffled (as llm_sequences)."""
    body = seq_len - len(prefix)
    rng = np.random.default_rng([seed, SEED_OFFSET["mid_document"]])
    chosen = []
    for split in splits:
        docs = documents[documents["split"] == split]
        ids = encode_texts(tokenizer, docs["text"].tolist())
        long = [i for i, doc in enumerate(ids) if len(doc) >= 2 * body]
        wanted = n_sequences - len(chosen)
        if len(long) > wanted:
            long = [long[i] for i in np.sort(rng.choice(len(long), size=wanted, replace=False))]
        for i in long:
            offset = int(rng.integers(body, len(ids[i]) - body + 1))
            window = prefix + list(ids[i][offset : offset + body])
            chosen.append((docs["doc_id"].iat[i], docs["source"].iat[i], split, len(ids[i]), offset, window))
        if len(chosen) == n_sequences:
            break
    if len(chosen) < n_sequences:
        raise TooFewSequences(
            f"{setting}.n_sequences = {n_sequences}: the documents of {setting}.splits = {list(splits)} give only "
            f"{len(chosen)} documents of at least {2 * body} tokens (twice the window of {setting}.seq_len = "
            f"{seq_len} after the prefix) for the mid_document control; lower n_sequences or seq_len, or allow "
            f"another split"
        )
    chosen = [chosen[i] for i in rng.permutation(len(chosen))]
    tokens = np.array([c[5] for c in chosen], dtype=token_dtype(len(tokenizer))).reshape(len(chosen), seq_len)
    return tokens, sequence_table([c[:5] for c in chosen])


def sequence_table(rows: list[tuple]) -> pd.DataFrame:
    """The sequences' table from (doc_id, source, split, n_doc_tokens, offset) per sequence, in order."""
    doc_ids, sources, splits, n_doc_tokens, offsets = (list(column) for column in zip(*rows)) if rows else ([],) * 5
    return pd.DataFrame(
        {
            "row": np.arange(len(rows)),
            "doc_id": doc_ids,
            "source": sources,
            "split": splits,
            "n_doc_tokens": np.array(n_doc_tokens, dtype=np.int64),
            "offset": np.array(offsets, dtype=np.int64),
        }
    )
