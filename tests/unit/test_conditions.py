"""The content controls' sequences (corpus.conditions): what each condition keeps and changes, against the
documents' own tokens, on a word-level tokenizer whose ids say which document and position each token came from."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from causalpos.corpus.conditions import CONDITIONS, condition_sequences
from causalpos.corpus.sequences import TooFewSequences

BOS, PAD = 1, 0
LENGTHS = [12, 30, 45, 8, 60, 25, 40]  # tokens per document; word "d{doc}p{pos}" is one token each


class WordTokenizer:
    """What the conditions read of a transformers tokenizer: its Rust backend, length and special ids."""

    def __init__(self, words):
        vocab = {"<pad>": PAD, "<bos>": BOS, **{w: i + 2 for i, w in enumerate(words)}}
        self.backend_tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
        self.backend_tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        self.all_special_ids, self.size = [PAD, BOS], len(vocab)

    def __len__(self):
        return self.size


@pytest.fixture(scope="module")
def corpus():
    words = [f"d{d}p{p}" for d, n in enumerate(LENGTHS) for p in range(n)]
    documents = pd.DataFrame(
        {
            "doc_id": [f"doc{d}" for d in range(len(LENGTHS))],
            "source": "s",
            "split": "heldout",
            "text": [" ".join(f"d{d}p{p}" for p in range(n)) for d, n in enumerate(LENGTHS)],
        }
    )
    tokenizer = WordTokenizer(words)
    first = {d: 2 + sum(LENGTHS[:d]) for d in range(len(LENGTHS))}  # the id of each document's first token
    return documents, tokenizer, first


def sequences(corpus, condition, seq_len=10, n=3, seed=0):
    documents, tokenizer, _ = corpus
    return condition_sequences(condition, documents, tokenizer, seq_len, n, seed=seed, prefix=[BOS])


def test_every_condition_gives_the_same_shape_and_keeps_the_prefix(corpus):
    for condition in CONDITIONS:
        tokens, table = sequences(corpus, condition)
        assert tokens.shape == (3, 10) and (tokens[:, 0] == BOS).all(), condition
        assert list(table["row"]) == [0, 1, 2]


def test_documents_are_openings_and_shuffled_documents_their_tokens_in_another_order(corpus):
    _, _, first = corpus
    docs, table = sequences(corpus, "documents")
    for row, doc_id in zip(docs, table["doc_id"]):
        start = first[int(doc_id[3:])]
        assert list(row[1:]) == list(range(start, start + 9))  # the first 9 tokens of the document
    mixed, mixed_table = sequences(corpus, "shuffled_documents")
    assert list(mixed_table["doc_id"]) == list(table["doc_id"])
    assert all(sorted(a) == sorted(b) for a, b in zip(mixed, docs)) and not np.array_equal(mixed, docs)


def test_mid_document_windows_are_inside_long_documents_past_their_opening(corpus):
    _, _, first = corpus
    tokens, table = sequences(corpus, "mid_document", n=4)
    body = 9
    for row, doc_id, offset, n_doc in zip(tokens, table["doc_id"], table["offset"], table["n_doc_tokens"]):
        d = int(doc_id[3:])
        assert n_doc == LENGTHS[d] >= 2 * body and body <= offset <= n_doc - body
        assert list(row[1:]) == list(range(first[d] + offset, first[d] + offset + body))
    assert table["doc_id"].is_unique
    with pytest.raises(TooFewSequences, match=r"extraction.pretrained.n_sequences = 6: .* only 5 documents of at "):
        sequences(corpus, "mid_document", n=6)  # 5 documents of >= 18 tokens


def test_random_tokens_avoid_special_ids_and_cover_the_vocabulary(corpus):
    _, tokenizer, _ = corpus
    tokens, table = sequences(corpus, "random_tokens", seq_len=200, n=20)
    body = tokens[:, 1:]
    assert not np.isin(body, [PAD, BOS]).any() and body.max() < len(tokenizer)
    counts = np.bincount(body.ravel(), minlength=len(tokenizer))[2:]
    expected = body.size / len(counts)  # uniform: each id about equally often (chi-square, 219 df)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 219 + 5 * np.sqrt(2 * 219)
    assert (table["offset"] == -1).all()


def test_each_condition_is_seeded(corpus):
    for condition in CONDITIONS:
        assert np.array_equal(sequences(corpus, condition, seed=3)[0], sequences(corpus, condition, seed=3)[0])
    assert not np.array_equal(sequences(corpus, "random_tokens", seed=3)[0], sequences(corpus, "random_tokens")[0])


def test_an_unknown_condition_or_a_window_with_no_room_is_refused(corpus):
    with pytest.raises(ValueError, match=r"unknown condition 'reversed'"):
        sequences(corpus, "reversed")
    with pytest.raises(ValueError, match=r"seq_len = 1 leaves no token after the prefix"):
        sequences(corpus, "documents", seq_len=1)
