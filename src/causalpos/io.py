"""Parquet in and out. Outputs appear under their final name only when complete."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside `path`; rename it to `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_parquet(frame: pd.DataFrame, path, metadata: dict | None = None) -> None:
    """Write `frame` to `path` atomically; `metadata` is stored as JSON under b'causalpos'."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if metadata:
        merged = dict(table.schema.metadata or {})
        merged[b"causalpos"] = json.dumps(metadata, default=str).encode()
        table = table.replace_schema_metadata(merged)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_metadata(path) -> dict:
    raw = (pq.read_schema(path).metadata or {}).get(b"causalpos")
    return json.loads(raw) if raw else {}


def read_table(path) -> pd.DataFrame:
    """A Parquet file, or a JSON object file as a one-row table (nested keys joined by dots)."""
    if str(path).endswith(".json"):
        with open(path) as fh:
            return pd.json_normalize(json.load(fh))
    return pd.read_parquet(path)


def read_tables(paths) -> pd.DataFrame:
    return pd.concat([read_table(p) for p in paths], ignore_index=True)
