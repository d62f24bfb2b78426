"""io.PartTable: long tables read a part (a model's layer, a group quantity) at a time (issue 26).

The analysis stages read the extraction's scores and groups tables through it, so their memory is one layer's.
What must hold: the same keys and rows as the whole table read by pandas, whichever way the file was written
(the extraction's one-key row groups, whose statistics locate a part, or pandas' single row group, filtered);
a part's read touches only its own row groups; and the ledger, convergence and summary tables built from part
tables equal those built from the whole frames.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from causalpos.analysis.claims.convergence import convergence_frame
from causalpos.analysis.claims.ledger import build_ledger
from causalpos.analysis.summary import write_summaries
from causalpos.io import DamagedFileError, PartTable, read_table, read_tables, write_parquet
from causalpos.models import outputs
from causalpos.tril import packed_pairs

S, LAYERS, GROUPS = 20, 3, 6


def extraction_tables(folder, model: str, seed: int) -> dict:
    """The scores, groups and probe tables of a synthetic pretrained model, written as the extraction writes
    them: a relative pattern plus a non-relative one that grows with the layer, per group of sequences."""
    rng = np.random.default_rng(seed)
    query, key = packed_pairs(S)
    sizes = rng.integers(3, 7, GROUPS)
    parts, means, sems = [], [], []
    sums = np.empty((GROUPS, LAYERS, query.size), dtype=np.float32)
    for layer in range(LAYERS):
        pattern = np.cos(0.3 * (query - key)) + 0.3 * layer * np.exp(-key / 4.0)
        sums[:, layer] = sizes[:, None] * pattern + np.sqrt(sizes)[:, None] * rng.standard_normal((GROUPS, key.size))
        means.append(sums[:, layer].sum(0) / sizes.sum())
        sems.append((sums[:, layer] / sizes[:, None]).std(0, ddof=1) / np.sqrt(GROUPS))
    for group in range(GROUPS):
        parts.append(folder / f"{model}-{outputs.part_name(group)}")
        rows = [("scores", "", layer, sums[group, layer]) for layer in range(LAYERS)]
        rows += [("intermediate", "b", 0, sums[group, 0])]
        outputs.write_group_part(parts[-1], rows, model, "pretrained", group, int(sizes[group]), S)
    paths = {t: folder / f"{model}-{t}.parquet" for t in ("scores", "groups", "probe")}
    outputs.write_scores(paths["scores"], np.array(means), np.array(sems), model, "pretrained", int(sizes.sum()), {})
    outputs.join_group_parts(paths["groups"], parts, {})
    probe = [{"mae": 3.0 - layer, "mae_baseline": 5.0, "n_train": 10, "n_test": 4} for layer in range(LAYERS + 1)]
    outputs.write_probe(paths["probe"], probe, model, "pretrained", S, {})
    return paths


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    folder = tmp_path_factory.mktemp("parts")
    return [extraction_tables(folder, model, seed) for seed, model in enumerate(["alpha_lm", "beta_lm"])]


def paths_of(tables, name):
    return [t[name] for t in tables]


def repacked(paths, folder, name):
    """The same rows written by pandas in one row group: no statistics locate a part."""
    out = folder / f"pandas-{name}.parquet"
    write_parquet(read_tables(paths), out)
    assert pq.ParquetFile(out).metadata.num_row_groups == 1
    return out


def test_keys_and_parts_equal_the_whole_table_both_ways(tables, tmp_path):
    groups = paths_of(tables, "groups")
    whole = read_tables(groups)
    columns = ["model", "quantity", "stage", "layer"]
    expected = sorted(tuple(k) for k in whole[columns].drop_duplicates().itertuples(index=False))
    for table in (PartTable(groups), PartTable(repacked(groups, tmp_path, "groups"))):
        assert table.keys(columns) == expected
        for key, rows in table.parts(columns).items():
            mask = np.logical_and.reduce([whole[c] == v for c, v in zip(columns, key)])
            pd.testing.assert_frame_equal(rows.reset_index(drop=True), whole[mask].reset_index(drop=True))


def test_select_narrows_keys_and_reads(tables):
    table = PartTable(paths_of(tables, "groups")).select(model="beta_lm", quantity="scores")
    assert table.keys(["layer"]) == [(layer,) for layer in range(LAYERS)]
    rows = table.read({"layer": 1})
    assert set(rows["model"]) == {"beta_lm"} and set(rows["quantity"]) == {"scores"} and len(rows) == GROUPS
    assert PartTable(paths_of(tables, "groups")).select(model="gamma_lm").empty


def test_missing_stage_reads_as_empty_string(tmp_path):
    frame = pd.DataFrame({"model": ["m", "m"], "stage": [None, "a"], "value": [1.0, 2.0]})
    write_parquet(frame, tmp_path / "t.parquet")
    table = PartTable(tmp_path / "t.parquet")
    assert table.keys(["model", "stage"]) == [("m", ""), ("m", "a")]
    assert table.read({"model": "m", "stage": ""})["value"].tolist() == [1.0]


def test_a_part_reads_only_its_own_row_groups(tables, monkeypatch):
    """The extraction's files: each layer's read asks for that layer's row groups alone, not the file."""
    asked = []
    real = pq.ParquetFile.read_row_groups
    monkeypatch.setattr(
        pq.ParquetFile,
        "read_row_groups",
        lambda self, groups, **kw: asked.append(list(groups)) or real(self, groups, **kw),
    )
    path = tables[0]["groups"]
    meta = pq.ParquetFile(path).metadata
    table = PartTable(path)
    for layer in range(LAYERS):
        rows = table.read({"model": "alpha_lm", "quantity": "scores", "stage": "", "layer": layer})
        assert len(rows) == GROUPS and set(rows["layer"]) == {layer}
    assert len(asked) == LAYERS and all(len(groups) == GROUPS for groups in asked)
    assert meta.num_row_groups == GROUPS * (LAYERS + 1)


def test_damaged_file_is_named(tables, tmp_path):
    damaged = tmp_path / "scores.parquet"
    damaged.write_bytes(tables[0]["scores"].read_bytes()[:-100])
    with pytest.raises(DamagedFileError, match="scores.parquet"):
        PartTable(damaged)


def test_claims_convergence_and_summary_equal_from_parts_and_frames(tables, tmp_path):
    scores, groups = paths_of(tables, "scores"), paths_of(tables, "groups")
    frames = read_tables(scores), read_tables(groups)
    parts = PartTable(scores), PartTable(groups)
    kwargs = dict(n_bootstrap=40, seed=3, min_groups=2)
    pd.testing.assert_frame_equal(convergence_frame(*frames, **kwargs), convergence_frame(*parts, **kwargs))
    ledgers = [build_ledger(None, None, s, None, g, n_bootstrap=40, seed=3) for s, g in (frames, parts)]
    assert (ledgers[0]["claim"] == 8).sum() >= 2 * LAYERS  # per-layer rows of both models
    pd.testing.assert_frame_equal(ledgers[0], ledgers[1])
    probe = read_tables(paths_of(tables, "probe"))
    for source, name in ((frames[0], "frames"), (parts[0], "parts")):
        write_summaries(source, probe, tmp_path / name)
    for file in ("nonrelativeness", "increasing_fraction", "position_probe"):
        pd.testing.assert_frame_equal(
            read_table(tmp_path / "frames" / f"{file}.parquet"), read_table(tmp_path / "parts" / f"{file}.parquet")
        )


def test_all_layers_pages_read_their_own_layers(tables, monkeypatch, caplog):
    """fig_all_layers from a PartTable: the same pages, each drawn from exactly its layers' rows, titled with the
    model's number of layers, as from the whole frame."""
    from causalpos.figures import render

    drawn = {}
    monkeypatch.setattr(
        render,
        "render_figure",
        lambda figure, t, options, outputs: drawn.setdefault(options["source"], []).append(
            (options["kind"], options["layers"], t["scores"], options.get("n_layers"))
        ),
    )
    whole = read_tables(paths_of(tables, "scores"))
    options = {"model": "beta_lm", "layers_per_page": 2}

    def page_files(kind, first, last):
        return [f"{kind}{first}-{last}.png"]

    with caplog.at_level(logging.INFO, logger="causalpos"):
        render.render_all_layers({"scores": whole}, {**options, "source": "frame"}, page_files)
    # a line as each page is drawn (issue 42: an LLM's 8 pages take ~40 s)
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        f"fig_all_layers beta_lm: step {i}/4, {kind} layers {first}-{last}"
        for i, (kind, first, last) in enumerate(
            [("raw", 1, 2), ("raw", 3, 3), ("diagnorm", 1, 2), ("diagnorm", 3, 3)], start=1
        )
    ]
    render.render_all_layers(
        {"scores": PartTable(paths_of(tables, "scores"))}, {**options, "source": "parts"}, page_files
    )
    assert (
        [p[:2] for p in drawn["frame"]]
        == [p[:2] for p in drawn["parts"]]
        == [(kind, run) for kind in ("raw", "diagnorm") for run in ([0, 1], [2])]
    )
    for kind, run, rows, n_layers in drawn["parts"]:
        expected = whole[(whole["model"] == "beta_lm") & whole["layer"].isin(run)].reset_index(drop=True)
        pd.testing.assert_frame_equal(rows, expected)
        assert n_layers == LAYERS
