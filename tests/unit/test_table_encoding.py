"""How models.outputs encodes the extraction's long tables (issue 42: writing head_scores was a third of the step).

What must hold whatever the encoding: every value reads back (the head means as float32, NaN where a layer hides
a pair), in the catalogue's columns, with the metadata; each row group's keys are in its statistics, so
io.PartTable locates a part without reading the key columns; the columns that are never keys carry none."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq

from causalpos.catalogue.tables import TABLES
from causalpos.io import PartTable
from causalpos.models import outputs
from causalpos.tril import packed_index, packed_size

S, LAYERS, HEADS = 40, 2, 3


def head_means() -> np.ndarray:
    means = np.random.default_rng(0).standard_normal((LAYERS, HEADS, packed_size(S)))
    means[1, :, ::5] = np.nan  # pairs layer 1's mask hides
    return means


def test_head_scores_read_back_as_float32_means_in_the_catalogue_columns(tmp_path, monkeypatch):
    monkeypatch.setattr(outputs, "CHUNK", 300)  # several row groups per head
    means, path = head_means(), tmp_path / "head_scores.parquet"
    outputs.write_head_scores(path, means, "m", "pretrained", 16, S, {"stage": "extract"})
    table = pq.read_table(path)
    assert table.schema.names == list(TABLES["head_scores"].file_columns)
    assert json.loads(table.schema.metadata[b"causalpos"]) == {"stage": "extract"}
    frame = table.to_pandas()
    assert frame["score_mean"].dtype == np.float32 and len(frame) == LAYERS * HEADS * packed_size(S)
    back = np.full(means.shape, np.inf, dtype=np.float32)
    pairs = packed_index(frame["query_pos"].to_numpy(np.int64), frame["key_pos"].to_numpy(np.int64))
    back[frame["layer"], frame["head"], pairs] = frame["score_mean"]
    np.testing.assert_array_equal(back, means.astype(np.float32))  # NaN where NaN, every pair once
    assert set(frame["model"]) == {"m"} and set(frame["table"]) == {"head_scores"}
    assert set(frame["n_sequences"]) == {16} and set(frame["seq_len"]) == {S}


def test_each_row_group_has_its_keys_in_statistics_and_the_rest_none(tmp_path, monkeypatch):
    monkeypatch.setattr(outputs, "CHUNK", 300)
    path = tmp_path / "head_scores.parquet"
    outputs.write_head_scores(path, head_means(), "m", "pretrained", 16, S, None)
    meta = pq.ParquetFile(path).metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    keys = {"model", "kind", "layer", "head", "n_sequences", "seq_len"}
    for group in range(meta.num_row_groups):
        columns = {name: meta.row_group(group).column(i) for i, name in enumerate(names)}
        for name, column in columns.items():
            stats = column.statistics
            if name in keys:
                assert stats is not None and stats.has_min_max and stats.min == stats.max, name
            else:
                assert stats is None or not stats.has_min_max, name
    expected = [(layer, head) for layer in range(LAYERS) for head in range(HEADS)]
    table = PartTable(path)
    assert table.keys(["layer", "head"]) == expected
    part = table.read({"layer": 1, "head": 2})
    assert len(part) == packed_size(S) and set(part["head"]) == {2}
