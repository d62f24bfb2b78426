"""Model weights, tokenizers and converted pretrained models read from another stage: checked before loading.

A truncated or corrupt file of a save_pretrained folder (a trained model of rule train or train_seed, a
snapshot, the tokenizer of rule tokenizer, a GGUF model converted by rule pretrained) raises
DamagedFileError naming it, as io's readers do for tables, instead of safetensors' or transformers' own
error; the workflow's runners (`rebuilds_damaged_inputs`) then move it aside and name the rule that
rebuilds it. The checks read the JSON files and a safetensors file's header, never its tensors, and need
no torch: a few milliseconds before a load that takes seconds.

A file that the rule writing it does not declare as an output (generation_config.json, a tokenizer's
special_tokens_map.json) would not make Snakemake rerun that rule when it is missing; its error therefore
names a `companion`, the folder's file that is declared (model.safetensors, tokenizer.json), to be moved
aside with it. A file inside a directory() output (a snapshot, the converted model's folder) is moved
aside with its whole folder (workflow.job.moved_aside).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
from contextlib import contextmanager
from pathlib import Path

from causalpos.io import DAMAGED_SUFFIX, DamagedFileError

WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"  # sharded weights: {"weight_map": {tensor: shard file}}
MODEL_JSON = ("config.json", "generation_config.json")
TOKENIZER = "tokenizer.json"
TOKENIZER_JSON = ("tokenizer_config.json", "special_tokens_map.json")
MAX_HEADER = 100_000_000  # safetensors' own limit on a header's length
# bytes per element of the safetensors dtypes of a byte or more (the sub-byte ones are not size-checked)
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "C64": 8,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}


class DamagedModelFileError(DamagedFileError):
    """A damaged file of a model or tokenizer folder. `companion`: the file of the same folder that its rule
    declares as an output, to be moved aside with it (None where the damaged file is that one)."""

    def __init__(self, path, reason: str, companion=None):
        super().__init__(path, reason)
        self.companion = str(companion) if companion is not None and Path(companion) != Path(path) else None


def _moved_by_another_job(path: Path, companion) -> None:
    """A missing `path` whose <path>.damaged exists, or whose folder's does: a job reading it at the same time
    moved it aside (a file inside a directory() output goes with its folder)."""
    for moved, what in ((path, companion), (path.parent, None)):
        if Path(f"{moved}{DAMAGED_SUFFIX}").exists() and not moved.exists():
            raise DamagedModelFileError(
                moved, "another job reading it found it damaged and moved it aside", what
            ) from None


def _read_bytes(path: Path, companion) -> bytes | None:
    """The file's bytes, or None if it is missing (left to the loader to report)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        _moved_by_another_job(path, companion)
        return None


def verify_json(path, companion=None) -> dict | None:
    """The JSON object in `path` (None if it is missing); DamagedModelFileError if it is empty, not JSON or
    not an object."""
    path = Path(path)
    raw = _read_bytes(path, companion)
    if raw is None:
        return None
    if not raw.strip():
        raise DamagedModelFileError(path, f"empty: {len(raw)} bytes, no JSON", companion)
    try:
        value = json.loads(raw)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise DamagedModelFileError(path, f"{type(err).__name__}: {err}", companion) from None
    if not isinstance(value, dict):
        raise DamagedModelFileError(path, f"a JSON {type(value).__name__}, not an object", companion)
    return value


def verify_safetensors(path, companion=None) -> dict | None:
    """The header {tensor: {dtype, shape, data_offsets}} of a safetensors file (None if it is missing), checked
    against the file's size without reading a tensor: 8 bytes holding the header's length N (little-endian),
    N bytes of JSON, then the tensors, each where its data_offsets say, back to back, the last ending at the
    end of the file. DamagedModelFileError naming the file otherwise (truncated, a flipped byte in the header,
    bytes appended)."""
    path = Path(path)

    def damaged(reason: str):
        return DamagedModelFileError(path, reason, companion)

    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 8:
                raise damaged(f"{size} bytes, shorter than the 8 bytes giving its header's length: truncated")
            (length,) = struct.unpack("<Q", fh.read(8))
            if length > min(size - 8, MAX_HEADER):
                raise damaged(
                    f"its header of {length} bytes does not fit in the {size - 8} bytes after its "
                    f"length: truncated, or its first bytes are corrupt"
                )
            raw = fh.read(length)
    except FileNotFoundError:
        _moved_by_another_job(path, companion)
        return None
    try:
        header = json.loads(raw)
    except ValueError as err:
        raise damaged(f"its header is not JSON: {type(err).__name__}: {err}") from None
    if not isinstance(header, dict):
        raise damaged(f"its header is a JSON {type(header).__name__}, not an object")
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in [*shape, begin, end]):
                raise ValueError
        except (TypeError, KeyError, ValueError):
            raise damaged(
                f"its header's entry of tensor {name!r} lacks a dtype, a shape or two data_offsets: {str(entry)[:200]}"
            ) from None
        if end < begin:
            raise damaged(f"tensor {name!r} ends (byte {end}) before it begins (byte {begin})")
        if dtype in DTYPE_BYTES and end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
            raise damaged(
                f"tensor {name!r} of {dtype} {list(shape)} needs {math.prod(shape) * DTYPE_BYTES[dtype]} "
                f"bytes, its data_offsets give {end - begin}"
            )
        spans.append((begin, end, name))
    data = size - 8 - length
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise damaged(
                f"tensor {name!r} begins at byte {begin} of the data, not at {position} where the one before it ends"
            )
        position = end
    if position > data:
        raise damaged(
            f"its tensors end at byte {position} of the data, but the file holds {data} bytes after its "
            f"header: truncated"
        )
    if position < data:
        raise damaged(
            f"{data - position} bytes after its last tensor (the data ends at byte {position} of "
            f"{data}): bytes appended or a corrupt header"
        )
    return header


def verify_model_folder(folder) -> None:
    """Check a save_pretrained model folder before transformers loads it: config.json, generation_config.json
    and the safetensors weights (model.safetensors, or the shards its index names). A missing file is left to
    the loader; a folder that is not there too."""
    folder = Path(folder)
    weights = folder / WEIGHTS
    for name in MODEL_JSON:
        verify_json(folder / name, companion=weights)
    index = verify_json(folder / WEIGHTS_INDEX, companion=weights)
    if index is None:
        verify_safetensors(weights)
        return
    shards = index.get("weight_map")
    if not isinstance(shards, dict):
        raise DamagedModelFileError(folder / WEIGHTS_INDEX, "no weight_map object naming the weights' shards", weights)
    for shard in sorted(set(map(str, shards.values()))):
        verify_safetensors(folder / shard, companion=weights)


def verify_tokenizer_folder(folder) -> None:
    """Check a save_pretrained tokenizer folder before transformers loads it: tokenizer.json (JSON that the
    tokenizers library loads), tokenizer_config.json and special_tokens_map.json (JSON objects). A missing
    file is left to the loader."""
    folder = Path(folder)
    tokenizer = folder / TOKENIZER
    if verify_json(tokenizer) is not None:
        from tokenizers import Tokenizer

        try:
            Tokenizer.from_str(tokenizer.read_text(encoding="utf-8"))
        except FileNotFoundError:
            _moved_by_another_job(tokenizer, None)
        except Exception as err:  # tokenizers raises plain Exception
            raise DamagedModelFileError(tokenizer, f"the tokenizers library cannot load it: {err}") from None
    for name in TOKENIZER_JSON:
        verify_json(folder / name, companion=tokenizer)


def verify_local_model(location: str, tokenizer: bool) -> None:
    """verify_model_folder (and verify_tokenizer_folder with `tokenizer`) where `location` is a folder; a hub
    id is left to transformers. Called again when the load fails: a job reading the same folder may have
    moved it (or a file of it) aside between the check and the load."""
    _moved_by_another_job(Path(location), None)
    if os.path.isdir(location):
        verify_model_folder(location)
        if tokenizer:
            verify_tokenizer_folder(location)


@contextmanager
def checked_again_on_failure(location):
    """Around the load of a checked model folder: if the load fails, check the folder again, so that a file a
    job reading the same folder moved aside meanwhile gives DamagedFileError naming it, not the loader's error."""
    try:
        yield
    except Exception:
        verify_local_model(str(location), tokenizer=False)
        raise


def verify_local_tokenizer(location: str) -> None:
    """verify_tokenizer_folder where `location` is a folder (as verify_local_model)."""
    _moved_by_another_job(Path(location), None)
    if os.path.isdir(location):
        verify_tokenizer_folder(location)


def move_folder_aside(folder) -> Path:
    """Rename a folder (a Snakemake directory() output) holding a damaged file to <folder>.damaged, replacing
    an older one, and return that name (as io.move_aside does for a file)."""
    target = Path(f"{folder}{DAMAGED_SUFFIX}")
    if os.path.lexists(folder):  # else another job moved it first: its copy stays
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
    try:
        os.replace(folder, target)  # a link (from the between-workflow cache) is renamed, not its target
    except FileNotFoundError:
        pass
    return target
