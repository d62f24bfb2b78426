"""Parquet in and out. Outputs appear under their final name only when complete.

Reading another stage's file goes through read_table, read_tables, read_metadata, read_array, read_json
or PartTable (a long table read a part at a time, by the values of key columns): a truncated or corrupt file raises DamagedFileError naming it (not pyarrow's or numpy's
own error), so the workflow layer can move it aside and say which rule rebuilds it.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
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


class PartTable:
    """Long Parquet tables (one or several files, one schema) read a part at a time: the rows with given values
    of some key columns (a model's layer, a group quantity), so a stage's memory is that of one part, not of
    the whole table (issue 26: an extraction of 40 layers at S = 1,024 holds 21M score rows and 10 GB of group
    sums).

    The extraction writes each row group with one value of every key column (outputs.py), so the keys come
    from the files' row-group statistics and a part's read skips the other row groups; a file written
    otherwise (pandas, tests) has its key columns read instead, and a part's read then filters its rows.
    A missing (null) string key reads as "", as the in-memory tables treat it."""

    def __init__(self, paths, label: str = "table"):
        self.paths = [str(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
        self.label = label
        self.columns = []
        for path in self.paths:
            with _reading(path):
                names = pq.read_schema(path).names
            self.columns += [n for n in names if n not in self.columns]
        self.fixed = {}  # select's key values: every key and read is within them
        self._files = {}  # key columns -> {key tuple: indices of the files holding it}

    def select(self, **where) -> "PartTable":
        """The same files restricted to the rows with these key values (e.g. select(model="smollm2"))."""
        other = PartTable.__new__(PartTable)
        other.paths, other.label, other.columns = self.paths, self.label, self.columns
        other.fixed, other._files = {**self.fixed, **where}, self._files
        return other

    @property
    def empty(self) -> bool:
        return not self.keys([])

    def keys(self, columns) -> list[tuple]:
        """The distinct values of `columns` (a list) among the selected rows, sorted."""
        return list(self._located(columns))

    def _located(self, columns) -> dict:
        """{key tuple of `columns`: [(file index, its row groups holding the key, or None: filter its rows)]},
        within the selected rows."""
        fixed, columns = tuple(self.fixed), tuple(columns)
        every = fixed + tuple(c for c in columns if c not in fixed)
        if every not in self._files:
            found = {}
            for index, path in enumerate(self.paths):
                for key, row_groups in self._file_keys(path, every).items():
                    found.setdefault(key, []).append((index, row_groups))
            self._files[every] = dict(sorted(found.items(), key=lambda item: _sort_key(item[0])))
        wanted = tuple(self.fixed.values())
        located = {}
        for key, places in self._files[every].items():
            if key[: len(fixed)] == wanted:
                named = dict(zip(every, key))
                located.setdefault(tuple(named[c] for c in columns), []).extend(places)
        return located

    def _file_keys(self, path, columns) -> dict:
        """{key tuple: row groups} from the row groups' statistics where each holds one key, else from the
        key columns' values ({key: None})."""
        with _reading(path):
            meta = pq.ParquetFile(path).metadata
            names = [meta.schema.column(i).name for i in range(meta.num_columns)]
            if any(c not in names for c in columns):
                return {}
            where = [names.index(c) for c in columns]
            keys = {}
            for group in range(meta.num_row_groups):
                key = _row_group_key(meta.row_group(group), where)
                if key is None:
                    return self._read_keys(path, columns)
                if key:
                    keys.setdefault(key[0], []).append(group)
            return keys

    def _read_keys(self, path, columns) -> dict:
        table = pq.read_table(path, columns=list(columns)).group_by(list(columns)).aggregate([])
        values = [table.column(c).to_pylist() for c in columns]
        return {tuple("" if v is None else v for v in row): None for row in zip(*values)}

    def read(self, where: dict, columns=None) -> pd.DataFrame:
        """The rows whose key columns have the values of `where` {column: value} (all files), `columns` only."""
        where = {**self.fixed, **where}
        places = self._located(list(where)).get(tuple(where.values()), [])
        frames = []
        for index, row_groups in sorted(places, key=lambda place: place[0]):
            path = self.paths[index]
            with _reading(path):
                if row_groups is None:
                    table = pq.read_table(
                        path, columns=columns, filters=_condition(where), page_checksum_verification=True
                    )
                else:  # exactly the key's row groups: faster than a filter, which evaluates every row group
                    table = pq.ParquetFile(path, page_checksum_verification=True).read_row_groups(
                        row_groups, columns=columns
                    )
                frames.append(table.to_pandas())
        if not frames:
            return pd.DataFrame(columns=columns or self.columns)
        # several files: the rows in file order, as read_tables concatenates them
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    def parts(self, columns) -> "Parts":
        """{key tuple: its rows} over `columns`, each part read when asked for (and not kept)."""
        return Parts(self, list(columns))


class Parts(Mapping):
    """A PartTable's parts by the values of some key columns: a lazily read {key tuple: DataFrame}."""

    def __init__(self, table: PartTable, columns: list):
        self.table, self.columns = table, columns
        self._index = set(table.keys(columns))
        self._last = (None, None)  # the part read last: readers often ask for the same part twice in a row

    def __getitem__(self, key) -> pd.DataFrame:
        key = key if isinstance(key, tuple) else (key,)
        if key not in self._index:
            raise KeyError(key)
        if self._last[0] != key:
            self._last = (None, None)  # release the previous part before reading the next
            self._last = (key, self.table.read(dict(zip(self.columns, key))))
        return self._last[1]

    def __iter__(self):
        return iter(self.table.keys(self.columns))

    def __len__(self) -> int:
        return len(self._index)


def _row_group_key(row_group, columns) -> list | None:
    """[the one key tuple of a row group's `columns`] from their statistics, [] for an empty row group, None
    where the statistics do not show a single value (or are missing)."""
    if row_group.num_rows == 0:
        return []
    key = []
    for index in columns:
        stats = row_group.column(index).statistics
        if stats is None:
            return None
        if not stats.has_min_max:  # no value but nulls: a missing key reads as ""
            if stats.null_count != row_group.num_rows:
                return None
            key.append("")
        elif stats.null_count or stats.min != stats.max:
            return None
        else:
            key.append(stats.min)
    return [tuple(key)]


def _condition(where: dict):
    """A pyarrow filter expression for {column: value}; "" matches a null too."""
    condition = None
    for column, value in where.items():
        term = pc.field(column) == value
        if value == "":
            term = term | pc.field(column).is_null()
        condition = term if condition is None else condition & term
    return condition


def _sort_key(key: tuple) -> tuple:
    return tuple((0, v) if isinstance(v, (int, float)) else (1, str(v)) for v in key)
