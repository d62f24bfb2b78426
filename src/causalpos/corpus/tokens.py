"""Tokenizer, token blocks and evaluation snippets (paper Section 4.2).

Outputs of `write_token_blocks(documents, tokenizer, block_len, out_dir)`:

    train.npy, heldout.npy   [n_blocks, block_len] token ids (uint16, or uint32 for vocabularies
                             above 65,536), np.load(..., mmap_mode="r") friendly. Each split is one
                             stream  doc_1 EOS doc_2 EOS ... doc_n EOS  (documents in the table's
                             order) cut into consecutive full blocks; the incomplete tail is dropped.
                             Block b+1 continues block b, so k consecutive blocks form one sequence
                             of k * block_len tokens.
    blocks.json              block_len, dtype, vocab_size, eos_token_id, per split n_documents,
                             n_stream_tokens, n_blocks, n_tokens (= n_blocks * block_len), and the
                             unigram baselines of the train blocks (nats/token).

Output of `write_snippets(documents, tokenizer, out_path)` (default 1,000 x 50 tokens):

    snippets.npy             [n, snippet_len]: the first snippet_len tokens of held-out documents
                             with at least that many tokens (no EOS before or after).
    snippets.parquet         beside it: row (index into snippets.npy), doc_id, n_doc_tokens.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from causalpos.catalogue.tables import TABLES
from causalpos.io import atomic_path, write_parquet

log = logging.getLogger("causalpos")

EOS_TOKEN = "<|endoftext|>"
SPLITS = ("train", "heldout")
BYTE_ALPHABET = 256
ENCODE_BATCH = 1000


# ----------------------------------------------------------------------------- tokenizer


def train_bpe(texts: Iterable[str], vocab_size: int = 8192, min_frequency: int = 2):
    """Byte-level BPE (GPT-2 style) trained on `texts`, as a transformers PreTrainedTokenizerFast.

    All 256 bytes are in the vocabulary, so decode(encode(text)) == text for any
    text. The only special token is EOS "<|endoftext|>", which also serves as
    bos/pad/unk so every tokenizer role has an id. Training is deterministic
    for a given text order (no seed needed).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    smallest = BYTE_ALPHABET + 1
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < smallest:
        raise ValueError(
            f"tokenizer.vocab_size: must be an integer >= {smallest} (256 bytes + EOS), got {vocab_size!r}"
        )
    if vocab_size > 2**32:
        raise ValueError(f"tokenizer.vocab_size: {vocab_size} does not fit uint32 token ids")

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=EOS_TOKEN, bos_token=EOS_TOKEN, pad_token=EOS_TOKEN, unk_token=EOS_TOKEN
    )


def load_tokenizer(name_or_path: str):
    """An existing tokenizer (a saved folder, or a hub name when the hub is reachable)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    except (OSError, ValueError) as error:
        raise ValueError(f"tokenizer.name: cannot load {name_or_path!r}: {error}") from error
    if tokenizer.eos_token_id is None:
        raise ValueError(f"tokenizer.name: {name_or_path!r} has no eos token to separate documents")
    return tokenizer


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)


def encode_texts(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, without special tokens; the Rust batch encoder, in chunks."""
    backend = tokenizer.backend_tokenizer
    ids: list[list[int]] = []
    for start in range(0, len(texts), ENCODE_BATCH):
        batch = backend.encode_batch_fast(texts[start : start + ENCODE_BATCH], add_special_tokens=False)
        ids += [encoding.ids for encoding in batch]
    return ids


# ----------------------------------------------------------------------------- blocks


def token_stream(documents: pd.DataFrame, tokenizer, dtype) -> np.ndarray:
    """doc_1 EOS doc_2 EOS ... in the table's order, as one flat array."""
    eos = np.array([tokenizer.eos_token_id], dtype=dtype)
    texts = documents["text"].tolist()
    pieces = []
    for start in range(0, len(texts), ENCODE_BATCH):
        for ids in encode_texts(tokenizer, texts[start : start + ENCODE_BATCH]):
            pieces += [np.asarray(ids, dtype=dtype), eos]
    return np.concatenate(pieces) if pieces else np.empty(0, dtype=dtype)


def unigram_entropy(tokens: np.ndarray, vocab_size: int) -> float:
    """Entropy (nats/token) of the empirical token distribution: the loss of the best
    position-blind, context-blind predictor on these tokens."""
    counts = np.bincount(tokens, minlength=vocab_size).astype(np.float64)
    probs = counts[counts > 0] / counts.sum()
    return float(-(probs * np.log(probs)).sum())


def unigram_cross_entropy(train: np.ndarray, heldout: np.ndarray, vocab_size: int) -> float:
    """Held-out loss (nats/token) of the add-one-smoothed train unigram model: the
    baseline a trained model's held-out loss must beat."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64) + 1.0
    log_probs = np.log(counts / counts.sum())
    return float(-log_probs[heldout].mean())


def _save_npy(array: np.ndarray, path: Path) -> None:
    with atomic_path(path) as tmp:
        np.save(tmp, array)


def write_token_blocks(documents: pd.DataFrame, tokenizer, block_len: int, out_dir) -> dict:
    """Tokenise each split, cut it into blocks, write train.npy, heldout.npy, blocks.json.

    Returns the blocks.json content. blocks.json is written last, so its presence
    means the arrays are complete.
    """
    if isinstance(block_len, bool) or not isinstance(block_len, int) or block_len < 2:
        raise ValueError(f"tokenizer.block_len: must be an integer >= 2, got {block_len!r}")
    out_dir = Path(out_dir)
    vocab_size = len(tokenizer)
    dtype = token_dtype(vocab_size)
    info = {
        "block_len": block_len,
        "dtype": dtype.name,
        "vocab_size": vocab_size,
        "eos_token_id": tokenizer.eos_token_id,
        "splits": {},
    }
    blocks = {}
    for split in SPLITS:
        split_docs = documents[documents["split"] == split]
        stream = token_stream(split_docs, tokenizer, dtype)
        n_blocks = len(stream) // block_len
        if n_blocks == 0:
            raise ValueError(
                f"tokenizer.block_len: data too small: the {split} split has "
                f"{len(split_docs)} documents and {len(stream)} tokens, "
                f"fewer than block_len={block_len}"
            )
        blocks[split] = stream[: n_blocks * block_len].reshape(n_blocks, block_len)
        info["splits"][split] = {
            "n_documents": len(split_docs),
            "n_stream_tokens": len(stream),
            "n_blocks": n_blocks,
            "n_tokens": n_blocks * block_len,
        }
        log.info(
            "blocks: %s %d documents -> %d tokens -> %d blocks of %d",
            split,
            len(split_docs),
            len(stream),
            n_blocks,
            block_len,
        )

    train, heldout = blocks["train"].ravel(), blocks["heldout"].ravel()
    info["train_unigram_entropy"] = unigram_entropy(train, vocab_size)
    info["heldout_unigram_cross_entropy"] = unigram_cross_entropy(train, heldout, vocab_size)
    log.info(
        "blocks: train unigram entropy %.4f nats/token, held-out unigram cross-entropy %.4f",
        info["train_unigram_entropy"],
        info["heldout_unigram_cross_entropy"],
    )

    out_dir.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        _save_npy(blocks[split], out_dir / f"{split}.npy")
    with atomic_path(out_dir / TABLES["blocks"].filename) as tmp:
        tmp.write_text(json.dumps(info, indent=2) + "\n")
    return info


# ----------------------------------------------------------------------------- snippets


def snippet_tokens(
    documents: pd.DataFrame,
    tokenizer,
    snippet_len: int,
    n_snippets: int,
    seed: int = 0,
    settings: tuple[str, str] = ("evaluation.snippet_len", "evaluation.n_snippets"),
    prefix: list[int] = (),
) -> tuple[np.ndarray, pd.DataFrame]:
    """First `snippet_len` tokens of up to `n_snippets` held-out documents (paper Sections 4.2 and 5.2).

    Only documents with at least `snippet_len` tokens qualify. When more qualify
    than are wanted, a seeded random subset is taken; rows stay in document
    order. `prefix` (e.g. a BOS id) starts every snippet and counts in its
    length. Fewer qualifying documents than `n_snippets` gives all of them
    (logged); none raises, naming `settings` (the config keys of the two sizes).
    """
    for setting, value in zip(settings, (snippet_len, n_snippets)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{setting}: must be a positive integer, got {value!r}")
    heldout = documents[documents["split"] == "heldout"]
    ids = [list(prefix) + doc for doc in encode_texts(tokenizer, heldout["text"].tolist())]
    lengths = np.array([len(doc) for doc in ids], dtype=np.int64)
    eligible = np.flatnonzero(lengths >= snippet_len)
    if len(eligible) == 0:
        raise ValueError(f"{settings[0]}: no held-out document has {snippet_len} tokens")
    if len(eligible) > n_snippets:
        rng = np.random.default_rng(seed)
        eligible = np.sort(rng.choice(eligible, size=n_snippets, replace=False))
    else:
        log.info(
            "snippets: only %d held-out documents have >= %d tokens (wanted %d); using all",
            len(eligible),
            snippet_len,
            n_snippets,
        )
    snippets = np.array([ids[i][:snippet_len] for i in eligible], dtype=token_dtype(len(tokenizer)))
    table = pd.DataFrame(
        {
            "row": np.arange(len(eligible)),
            "doc_id": heldout["doc_id"].to_numpy()[eligible],
            "n_doc_tokens": lengths[eligible],
        }
    )
    return snippets, table


def write_snippets(
    documents: pd.DataFrame, tokenizer, out_path, snippet_len: int = 50, n_snippets: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """`snippet_tokens` written to `out_path` (.npy) with its .parquet sidecar beside it; returns the sidecar."""
    snippets, table = snippet_tokens(documents, tokenizer, snippet_len, n_snippets, seed)
    out_path = Path(out_path)
    _save_npy(snippets, out_path)
    write_parquet(
        table, out_path.with_suffix(".parquet"), {"stage": "snippets", "snippet_len": snippet_len, "seed": seed}
    )
    log.info(
        "snippets: %d x %d tokens from %d held-out documents -> %s",
        len(snippets),
        snippet_len,
        int((documents["split"] == "heldout").sum()),
        out_path,
    )
    return table
