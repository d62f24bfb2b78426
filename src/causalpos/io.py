"""Parquet in and out. Outputs appear under their final name only when complete.

Reading another stage's file goes through read_table, read_tables, read_metadata, read_array or
read_json: a truncated or corrupt file raises DamagedFileError naming it (not pyarrow's or numpy's
own error), so the workflow layer can move it aside and say which rule rebuilds it.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from causalpos.errors import UserError

DAMAGED_SUFFIX = ".damaged"


class DamagedFileError(UserError, ValueError):
    """A file exists but cannot be read (truncated, corrupt, not what its name says); `advice` says what to do."""

    def __init__(self, path, reason: str, advice: str = ""):
        self.path, self.reason = str(path), reason
        super().__init__(f"{path} is damaged ({reason})" + (f"; {advice}" if advice else ""))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def usual_mode(path) -> None:
    """Give `path` (a file, or a folder and all under it) the mode open() and mkdir() give: 0o666 / 0o777
    less the umask. Writers that go through mkstemp or mkdtemp (safetensors, tempfile) leave 0600 / 0700,
    which other users of a shared results folder or cache cannot read."""
    path = Path(path)
    mask = _umask()
    if path.is_dir():
        for root, dirs, files in os.walk(path):
            os.chmod(root, 0o777 & ~mask)
            for name in files:
                os.chmod(os.path.join(root, name), 0o666 & ~mask)
    else:
        os.chmod(path, 0o666 & ~mask)


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside `path`; rename it to `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        usual_mode(tmp)  # mkstemp makes 0600
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_parquet(frame: pd.DataFrame, path, metadata: dict | None = None) -> None:
    """Write `frame` to `path` atomically; `metadata` is stored as JSON under b'causalpos'.

    Every page carries a CRC, so read_table also notices a flipped byte, not only a truncation."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if metadata:
        merged = dict(table.schema.metadata or {})
        merged[b"causalpos"] = json.dumps(metadata, default=str).encode()
        table = table.replace_schema_metadata(merged)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, write_page_checksum=True)


# What a damaged file makes the readers raise: pyarrow's errors (ArrowInvalid for a missing footer, an
# OSError for a failed page CRC), numpy's ValueError / EOFError for a short .npy, JSONDecodeError.
_READ_ERRORS = (pa.ArrowException, OSError, ValueError, EOFError, pickle.UnpicklingError)


@contextmanager
def _reading(path):
    """Turn a reader's error on a damaged `path` into DamagedFileError; a missing file stays an error of its own."""
    try:
        yield
    except FileNotFoundError:
        moved = Path(f"{path}{DAMAGED_SUFFIX}")
        if moved.exists() and not Path(path).exists():  # a job reading the same file moved it first
            raise DamagedFileError(path, "another job reading it found it damaged and moved it aside") from None
        raise
    except (PermissionError, IsADirectoryError, DamagedFileError):
        raise
    except _READ_ERRORS as err:
        raise DamagedFileError(path, f"{type(err).__name__}: {err}") from err


def move_aside(path) -> Path:
    """Rename a damaged `path` to <path>.damaged (kept for a look, replacing an older one) and return that
    name. A missing input is what makes Snakemake run the rule that writes it again."""
    target = Path(f"{path}{DAMAGED_SUFFIX}")
    try:
        os.replace(path, target)  # a link (from the between-workflow cache) is renamed, not its target
    except FileNotFoundError:
        pass  # another job reading it moved it first
    return target


def read_metadata(path) -> dict:
    with _reading(path):
        raw = (pq.read_schema(path).metadata or {}).get(b"causalpos")
        return json.loads(raw) if raw else {}


def read_json(path):
    with _reading(path):
        with open(path) as fh:
            return json.load(fh)


def read_table(path) -> pd.DataFrame:
    """A Parquet file, or a JSON object file as a one-row table (nested keys joined by dots)."""
    if str(path).endswith(".json"):
        return pd.json_normalize(read_json(path))
    with _reading(path):
        return pd.read_parquet(path, page_checksum_verification=True)


def read_tables(paths) -> pd.DataFrame:
    return pd.concat([read_table(p) for p in paths], ignore_index=True)


def read_array(path, mmap_mode: str | None = None) -> np.ndarray:
    """A .npy array (memory-mapped with mmap_mode="r")."""
    with _reading(path):
        return np.load(path, mmap_mode=mmap_mode)
