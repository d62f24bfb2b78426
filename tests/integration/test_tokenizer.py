"""Byte-level BPE, token blocks and snippets."""

import json

import numpy as np
import pandas as pd
import pytest

from causalpos.corpus.documents import sample_documents
from causalpos.corpus.tokens import (
    EOS_TOKEN,
    encode_texts,
    load_tokenizer,
    train_bpe,
    write_snippets,
    write_token_blocks,
)

VOCAB = 400


@pytest.fixture(scope="module")
def documents():
    # a slice of the BBC corpus with a generous held-out share, so both splits have blocks
    return sample_documents([{"type": "embedded", "name": "bbc_news"}], heldout_fraction=0.2, max_documents=150)


@pytest.fixture(scope="module")
def tokenizer(documents):
    return train_bpe(documents.loc[documents["split"] == "train", "text"], vocab_size=VOCAB)


def test_bpe_vocabulary_and_special_tokens(tokenizer):
    assert len(tokenizer) == VOCAB
    assert tokenizer.eos_token == EOS_TOKEN
    assert tokenizer.pad_token_id == tokenizer.eos_token_id


@pytest.mark.parametrize(
    "text",
    [
        "Plain words , spaced  oddly .\n\n\tTabs and\r\nnewlines ",
        "Unicode: £15.8m, naïve café, 日本語, emoji 😀",
        " leading space and trailing space ",
    ],
)
def test_byte_level_round_trip(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert encode_texts(tokenizer, [text])[0] == ids


def test_training_is_deterministic(documents, tokenizer):
    again = train_bpe(documents.loc[documents["split"] == "train", "text"], vocab_size=VOCAB)
    assert again.get_vocab() == tokenizer.get_vocab()


def test_saved_tokenizer_loads_back(tokenizer, tmp_path):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tokenizer.save_pretrained(tmp_path)
    text = "The tokenizer survives a save and a load."
    expected = tokenizer(text)["input_ids"]
    from_file = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"))
    assert from_file(text)["input_ids"] == expected
    auto = AutoTokenizer.from_pretrained(tmp_path)
    assert auto(text)["input_ids"] == expected
    assert auto.eos_token_id == tokenizer.eos_token_id
    loaded = load_tokenizer(str(tmp_path))
    assert loaded.decode(expected) == text


def test_bad_tokenizer_settings(tmp_path):
    with pytest.raises(ValueError, match="tokenizer.vocab_size: must be an integer >= 257"):
        train_bpe(["some text"], vocab_size=100)
    with pytest.raises(ValueError, match="tokenizer.name: cannot load"):
        load_tokenizer(str(tmp_path / "missing"))


@pytest.fixture(scope="module")
def blocks(documents, tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("blocks")
    return out, write_token_blocks(documents, tokenizer, block_len=64, out_dir=out)


def expected_stream(documents, tokenizer, split):
    texts = documents.loc[documents["split"] == split, "text"].tolist()
    stream = []
    for text in texts:
        stream += tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return np.array(stream)


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_blocks_are_the_eos_joined_stream(documents, tokenizer, blocks, split):
    out, info = blocks
    array = np.load(out / f"{split}.npy", mmap_mode="r")
    assert array.dtype == np.uint16 and array.shape[1] == 64
    stream = expected_stream(documents, tokenizer, split)
    assert array.shape[0] == len(stream) // 64
    np.testing.assert_array_equal(np.asarray(array).ravel(), stream[: array.size])
    assert info["splits"][split] == {
        "n_documents": int((documents["split"] == split).sum()),
        "n_stream_tokens": len(stream),
        "n_blocks": array.shape[0],
        "n_tokens": array.size,
    }
    # one EOS per document that ends inside the blocks
    assert (array == tokenizer.eos_token_id).sum() == (stream[: array.size] == tokenizer.eos_token_id).sum()


def test_blocks_json(blocks, tokenizer):
    out, info = blocks
    assert json.loads((out / "blocks.json").read_text()) == info
    assert info["block_len"] == 64 and info["dtype"] == "uint16"
    assert info["vocab_size"] == VOCAB and info["eos_token_id"] == tokenizer.eos_token_id
    assert not list(out.glob(".*tmp*"))  # no temporary files left behind


def test_unigram_entropy_matches_independent_computation(blocks):
    out, info = blocks
    tokens = np.load(out / "train.npy").ravel().tolist()
    counts = pd.Series(tokens).value_counts()
    probs = counts / counts.sum()
    assert info["train_unigram_entropy"] == pytest.approx(float(-(probs * np.log(probs)).sum()), rel=1e-9)
    assert info["heldout_unigram_cross_entropy"] > 0


def test_too_little_data_names_block_len(documents, tokenizer, tmp_path):
    with pytest.raises(ValueError, match="tokenizer.block_len: data too small"):
        write_token_blocks(documents, tokenizer, block_len=10**7, out_dir=tmp_path)


def test_snippets_are_document_prefixes(documents, tokenizer, tmp_path):
    table = write_snippets(documents, tokenizer, tmp_path / "snippets.npy", snippet_len=50, n_snippets=10, seed=3)
    snippets = np.load(tmp_path / "snippets.npy")
    assert snippets.shape == (10, 50)
    assert pd.read_parquet(tmp_path / "snippets.parquet").equals(table)
    texts = documents.set_index("doc_id")["text"]
    assert (documents.set_index("doc_id").loc[table["doc_id"], "split"] == "heldout").all()
    for row, doc_id in zip(table["row"], table["doc_id"]):
        ids = tokenizer(texts[doc_id], add_special_tokens=False)["input_ids"]
        assert snippets[row].tolist() == ids[:50]
    again = write_snippets(documents, tokenizer, tmp_path / "again.npy", snippet_len=50, n_snippets=10, seed=3)
    assert again.equals(table)  # deterministic choice


def test_snippets_skip_short_documents(tokenizer, tmp_path):
    docs = pd.DataFrame(
        {
            "doc_id": ["a", "b", "c"],
            "source": "x",
            "split": ["heldout", "heldout", "train"],
            "text": ["short", "a much longer held-out document " * 10, "train " * 100],
        }
    )
    table = write_snippets(docs, tokenizer, tmp_path / "s.npy", snippet_len=20, n_snippets=5)
    assert list(table["doc_id"]) == ["b"]
    with pytest.raises(ValueError, match="evaluation.snippet_len"):
        write_snippets(docs, tokenizer, tmp_path / "s.npy", snippet_len=10**6)
