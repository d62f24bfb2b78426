"""The extraction's five tables, written to Parquet from arrays a layer, stage or group at a time.

At S = 1,024 a model of 30 layers has 15.7M rows of scores; built as one pandas frame
they took several times the accumulators' memory. Here they go out in Arrow record
batches of at most CHUNK rows (a layer or stage in a few, a group row each), one
Parquet row group each, so writing costs the memory of one chunk's columns. Columns and types are those of
causalpos.catalogue.tables (the `table` column names the table), and the files carry the stage's metadata as JSON
under b"causalpos", as causalpos.io.write_parquet writes it; every page has a CRC.

Writing is priced per value (head_scores of SmolLM2-135M at S = 1,024: 141.7M rows of ten columns; bench/README.md):
no column has nulls, so none is declared nullable (no definition levels to write); the text and integer columns
are plain and LZ4-compressed (a repeated value and the repeated rows of pairs compress to almost nothing, without
the hash lookup per value of a dictionary), the float columns plain and uncompressed (means do not compress); only
the columns that can be a row group's key have statistics (io.PartTable finds the keys in them; not the floats,
the pairs or the `table` column). Each head's mean is stored as float32, the precision of the scores it averages.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from causalpos.io import atomic_path
from causalpos.catalogue.tables import ACTIVATION_TABLES, TABLE_COLUMN, TABLES
from causalpos.tril import packed_pairs, seq_len_of_packed

TEXT, I32, I64, F32, F64 = pa.large_string(), pa.int32(), pa.int64(), pa.float32(), pa.float64()
TYPES = {  # the types pandas gave these columns when the tables were built as frames (head_scores' means: float32)
    "scores": dict(
        model=TEXT,
        kind=TEXT,
        layer=I32,
        query_pos=I32,
        key_pos=I32,
        score_mean=F64,
        score_sem=F64,
        score_diagnorm=F64,
        n_sequences=I32,
        seq_len=I32,
    ),
    "intermediates": dict(
        model=TEXT, layer=I64, stage=TEXT, query_pos=I64, key_pos=I64, value=F64, n_sequences=I64, seq_len=I64
    ),
    "probe": dict(model=TEXT, kind=TEXT, layer=I64, mae=F64, mae_baseline=F64, n_train=I64, n_test=I64, seq_len=I64),
    "groups": dict(
        model=TEXT,
        kind=TEXT,
        quantity=TEXT,
        stage=TEXT,
        layer=I64,
        group=I64,
        n_sequences=I64,
        seq_len=I64,
        sums=pa.list_(pa.float32()),
    ),
    "head_scores": dict(
        model=TEXT,
        kind=TEXT,
        layer=I32,
        head=I32,
        query_pos=I32,
        key_pos=I32,
        score_mean=F32,
        n_sequences=I32,
        seq_len=I32,
    ),
}
CHUNK = 1 << 17  # rows per record batch (and row group) of the long tables: ~10 MB of columns at a time
COLUMNS = {table: list(TABLES[table].columns) for table in ACTIVATION_TABLES}


def schema(table: str) -> pa.Schema:
    columns = [(column, TYPES[table][column]) for column in COLUMNS[table]] + [(TABLE_COLUMN, TEXT)]
    return pa.schema([pa.field(name, kind, nullable=False) for name, kind in columns])


UNSORTED = (TABLE_COLUMN, "query_pos", "key_pos")  # never a key of a row group: no statistics


def _is_float(kind: pa.DataType) -> bool:
    return pa.types.is_floating(kind) or pa.types.is_list(kind)


@contextmanager
def table_writer(path, table: str, metadata: dict | None):
    """A Parquet writer of `table`'s schema whose file appears at `path` only when the block succeeds."""
    fields = schema(table)
    if metadata is not None:
        fields = fields.with_metadata({b"causalpos": json.dumps(metadata, default=str).encode()})
    keys = [f.name for f in fields if not (_is_float(f.type) or f.name in UNSORTED)]
    codecs = {f.name: "none" if _is_float(f.type) else "lz4" for f in fields}
    with (
        atomic_path(path) as tmp,
        pq.ParquetWriter(
            tmp, fields, use_dictionary=False, compression=codecs, write_statistics=keys, write_page_checksum=True
        ) as writer,
    ):
        yield writer


def batch(table: str, n: int, **columns) -> pa.RecordBatch:
    """One record batch of `n` rows; a scalar column is repeated, the `table` column added."""
    fields, columns = schema(table), {**columns, TABLE_COLUMN: table}
    arrays = [_column(columns[field.name], n, field.type) for field in fields]
    return pa.RecordBatch.from_arrays(arrays, schema=fields)


def _column(value, n: int, kind: pa.DataType) -> pa.Array:
    if isinstance(value, str):  # a constant string: n offsets into one repeated text, no Python objects
        data = value.encode()
        offsets = np.arange(n + 1, dtype=np.int64) * len(data)
        return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data * n))
    if np.isscalar(value):
        return pa.array(np.full(n, value, dtype=kind.to_pandas_dtype()))
    if pa.types.is_list(kind):  # one list of equal length per row, from a [rows, length] array
        values = np.ascontiguousarray(value, dtype=np.float32)
        offsets = np.arange(len(values) + 1, dtype=np.int32) * values.shape[1]
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.reshape(-1)))
    return pa.array(np.asarray(value, dtype=kind.to_pandas_dtype()))


def diagonal_normalised(values: np.ndarray, query: np.ndarray, key: np.ndarray, seq_len: int) -> np.ndarray:
    """Packed scores minus the mean of their diagonal (query - key), over the pairs that have a score (not NaN)."""
    offset = query - key
    scored = ~np.isnan(values)
    sums = np.bincount(offset[scored], weights=values[scored], minlength=seq_len)
    counts = np.bincount(offset[scored], minlength=seq_len)
    return values - (sums / np.maximum(counts, 1))[offset]


def write_scores(
    path, mean: np.ndarray, sem: np.ndarray, name: str, kind: str, n_sequences: int, metadata: dict | None
) -> None:
    """scores.parquet from the packed means and standard errors [layers, pairs], layer by layer."""
    seq_len = seq_len_of_packed(mean.shape[1])
    query, key = packed_pairs(seq_len)
    with table_writer(path, "scores", metadata) as writer:
        for layer in range(len(mean)):
            diagnorm = diagonal_normalised(mean[layer], query, key, seq_len)
            for rows in _chunks(len(query)):
                writer.write_batch(
                    batch(
                        "scores",
                        rows.stop - rows.start,
                        model=name,
                        kind=kind,
                        layer=layer,
                        query_pos=query[rows],
                        key_pos=key[rows],
                        score_mean=mean[layer, rows],
                        score_sem=sem[layer, rows],
                        score_diagnorm=diagnorm[rows],
                        n_sequences=n_sequences,
                        seq_len=seq_len,
                    )
                )


def write_head_scores(
    path, mean: np.ndarray | None, name: str, kind: str, n_sequences: int, seq_len: int, metadata: dict | None
) -> None:
    """head_scores.parquet from each head's packed means [layers, heads, pairs], layer by layer and head by
    head; None (extraction.per_head off): the table with no rows, so the stage's outputs are always the same."""
    query, key = packed_pairs(seq_len)
    with table_writer(path, "head_scores", metadata) as writer:
        if mean is None:
            writer.write_batch(
                batch(
                    "head_scores",
                    0,
                    model=name,
                    kind=kind,
                    layer=0,
                    head=0,
                    query_pos=0,
                    key_pos=0,
                    score_mean=0.0,
                    n_sequences=n_sequences,
                    seq_len=seq_len,
                )
            )
            return
        for layer in range(mean.shape[0]):
            for head in range(mean.shape[1]):  # a row group has one layer and head (io.PartTable reads by them)
                for rows in _chunks(len(query)):
                    writer.write_batch(
                        batch(
                            "head_scores",
                            rows.stop - rows.start,
                            model=name,
                            kind=kind,
                            layer=layer,
                            head=head,
                            query_pos=query[rows],
                            key_pos=key[rows],
                            score_mean=mean[layer, head, rows],
                            n_sequences=n_sequences,
                            seq_len=seq_len,
                        )
                    )


def _chunks(n: int):
    """Row slices of at most CHUNK rows: a row group's columns are built, encoded and compressed at once."""
    return (slice(start, min(n, start + CHUNK)) for start in range(0, n, CHUNK))


def write_intermediates(
    path, matrices: dict, layer: int | None, name: str, n_sequences: int, metadata: dict | None
) -> None:
    """intermediates.parquet from packed stage means {stage: [pairs]} (none: an empty table)."""
    with table_writer(path, "intermediates", metadata) as writer:
        for stage in sorted(matrices):
            seq_len = seq_len_of_packed(len(matrices[stage]))
            query, key = packed_pairs(seq_len)
            for rows in _chunks(len(query)):
                writer.write_batch(
                    batch(
                        "intermediates",
                        rows.stop - rows.start,
                        model=name,
                        layer=layer + (stage in "hi"),
                        stage=stage,
                        query_pos=query[rows],
                        key_pos=key[rows],
                        value=matrices[stage][rows],
                        n_sequences=n_sequences,
                        seq_len=seq_len,
                    )
                )


def write_probe(path, results: list, name: str, kind: str, seq_len: int, metadata: dict | None) -> None:
    """probe.parquet: one row per hidden state (0 = the embeddings), none without a probe."""
    columns = {key: [row[key] for row in results] for key in ("mae", "mae_baseline", "n_train", "n_test")}
    with table_writer(path, "probe", metadata) as writer:
        writer.write_batch(
            batch(
                "probe", len(results), model=name, kind=kind, layer=np.arange(len(results)), seq_len=seq_len, **columns
            )
        )


def write_group_part(path, rows, name: str, kind: str, group: int, n: int, seq_len: int) -> None:
    """One group's rows (quantity, stage, layer, packed float32 sums), one row group each."""
    with table_writer(path, "groups", None) as writer:
        for quantity, stage, layer, sums in rows:
            writer.write_batch(
                batch(
                    "groups",
                    1,
                    model=name,
                    kind=kind,
                    quantity=quantity,
                    stage=stage,
                    layer=layer,
                    group=group,
                    n_sequences=n,
                    seq_len=seq_len,
                    sums=sums[None],
                )
            )


def join_group_parts(path, parts: list, metadata: dict | None) -> None:
    """groups.parquet: the group parts in order, copied a row group at a time."""
    with table_writer(path, "groups", metadata) as writer:
        for part in parts:
            source = pq.ParquetFile(part)
            for index in range(source.num_row_groups):
                writer.write_table(source.read_row_group(index))


def part_name(group: int) -> str:
    return f"group-{group:05d}.parquet"
