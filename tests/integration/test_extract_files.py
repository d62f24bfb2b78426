"""The extraction written to files: the tables' columns and types, restarting a killed run, progress lines.

A tiny RoPE SmolLM3 decoder with random weights, as in test_extract.py.
"""

import logging

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoModelForCausalLM

from causalpos.models import extract as extraction
from causalpos.models.extract import ATTENTION_NAME, extract_to_files
from causalpos.models.model import build_model
from causalpos.catalogue.tables import (
    ACTIVATION_TABLES,
    GROUP_COLUMNS,
    HEAD_SCORE_COLUMNS,
    INTERMEDIATE_COLUMNS,
    PROBE_COLUMNS,
    SCORE_COLUMNS,
)

TINY = {
    "n_layers": 3,
    "hidden_size": 64,
    "n_heads": 4,
    "n_kv_heads": 2,
    "head_dim": 16,
    "intermediate_size": 96,
    "context": 64,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
}
VOCAB = 97
SETTINGS = dict(batch_size=3, intermediates_layer=0, probe_sequences=20, probe_positions=8, n_groups=4)


class Killed(RuntimeError):
    pass


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    torch.manual_seed(1)
    folder = tmp_path_factory.mktemp("rope")
    build_model(TINY, VOCAB, rope=True).save_pretrained(folder)
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation=ATTENTION_NAME).eval()


def tokens(n=20, seq=12, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, size=(n, seq))


def paths(folder):
    return {table: folder / f"{table}.parquet" for table in ACTIVATION_TABLES}


def frames(folder):
    return {table: pd.read_parquet(path) for table, path in paths(folder).items()}


def assert_same_tables(left, right):
    for table in ACTIVATION_TABLES:
        pd.testing.assert_frame_equal(left[table], right[table], check_exact=True)


def test_tables_carry_their_columns_types_and_metadata(model, tmp_path):
    seconds = extract_to_files(
        model, tokens(), "tiny", "trained", paths(tmp_path), metadata={"stage": "extract"}, **SETTINGS
    )
    tables = frames(tmp_path)
    for table, columns in zip(
        ACTIVATION_TABLES,
        (SCORE_COLUMNS, INTERMEDIATE_COLUMNS, PROBE_COLUMNS, GROUP_COLUMNS, HEAD_SCORE_COLUMNS),
        strict=True,
    ):
        assert list(tables[table].columns) == columns + ["table"]
        assert set(tables[table]["table"]) == ({table} if table != "head_scores" else set())  # per_head off: no rows
        meta = pq.read_schema(paths(tmp_path)[table]).metadata[b"causalpos"]
        assert b'"stage": "extract"' in meta and f'"seconds": {seconds}'.encode() in meta
    scores = tables["scores"]
    assert len(scores) == 3 * 12 * 13 // 2 and scores.dtypes["layer"] == np.int32 and scores.model.iloc[0] == "tiny"
    assert list(tables["probe"]["layer"]) == [0, 1, 2, 3]
    assert sorted(tables["groups"]["group"].unique()) == [0, 1, 2, 3]
    assert all(len(sums) == 78 and sums.dtype == np.float32 for sums in tables["groups"]["sums"])
    assert not any(p.name.startswith(".extract-") for p in tmp_path.iterdir())  # the group parts' folder is gone


def test_a_killed_extraction_resumes_from_its_last_completed_group(model, tmp_path, monkeypatch):
    """7 batches of 3 in 4 groups (batches 0-1, 2-3, 4-5, 6); killed while running batch 5, it restarts
    at batch 4, the first of group 2, and ends with the tables of an uninterrupted run, probe included
    (its training and validation sequences straddle the kill)."""
    ids, run_batch = tokens(), extraction.ExtractionRun.run_batch
    extract_to_files(model, ids, "tiny", "trained", paths(tmp_path / "whole"), **SETTINGS)

    def dying(self):
        if self.next_batch == 5:
            raise Killed
        return run_batch(self)

    state = tmp_path / "state"
    monkeypatch.setattr(extraction.ExtractionRun, "run_batch", dying)
    with pytest.raises(Killed):
        extract_to_files(
            model, ids, "tiny", "trained", paths(tmp_path / "resumed"), state_dir=state, code="v1", **SETTINGS
        )
    assert sorted(p.name for p in state.iterdir()) == ["group-00000.parquet", "group-00001.parquet", "state.pt"]
    assert not (tmp_path / "resumed").exists()
    ran = []
    monkeypatch.setattr(
        extraction.ExtractionRun, "run_batch", lambda self: ran.append(self.next_batch) or run_batch(self)
    )
    extract_to_files(model, ids, "tiny", "trained", paths(tmp_path / "resumed"), state_dir=state, code="v1", **SETTINGS)
    assert ran == [4, 5, 6] and not state.exists()
    assert_same_tables(frames(tmp_path / "resumed"), frames(tmp_path / "whole"))


@pytest.mark.parametrize("change", ["seed", "tokens", "weights", "code"])
def test_a_state_of_another_run_is_not_resumed(model, tmp_path, monkeypatch, caplog, change):
    ids, run_batch = tokens(), extraction.ExtractionRun.run_batch
    monkeypatch.setattr(
        extraction.ExtractionRun,
        "run_batch",
        lambda self: (_ for _ in ()).throw(Killed) if self.next_batch == 3 else run_batch(self),
    )
    state = tmp_path / "state"
    with pytest.raises(Killed):
        extract_to_files(model, ids, "tiny", "trained", paths(tmp_path / "a"), state_dir=state, code="v1", **SETTINGS)
    settings, other, code = dict(SETTINGS), model, "v1"
    if change == "code":
        code = "v2"
    elif change == "seed":
        settings["seed"] = 1
    elif change == "tokens":
        ids = tokens(seed=1)
    else:
        other = AutoModelForCausalLM.from_config(model.config).eval()  # fresh random weights, same config
    ran = []
    monkeypatch.setattr(
        extraction.ExtractionRun, "run_batch", lambda self: ran.append(self.next_batch) or run_batch(self)
    )
    with caplog.at_level(logging.INFO, logger="causalpos"):
        extract_to_files(other, ids, "tiny", "trained", paths(tmp_path / "a"), state_dir=state, code=code, **settings)
    assert ran == list(range(7)) and "belongs to another run" in caplog.text
    monkeypatch.setattr(extraction.ExtractionRun, "run_batch", run_batch)
    extract_to_files(other, ids, "tiny", "trained", paths(tmp_path / "b"), **settings)
    assert_same_tables(frames(tmp_path / "a"), frames(tmp_path / "b"))


def test_a_damaged_state_starts_afresh(model, tmp_path, caplog):
    state = tmp_path / "state"
    state.mkdir()
    (state / "state.pt").write_bytes(b"not a state")
    with caplog.at_level(logging.WARNING, logger="causalpos"):
        extract_to_files(
            model,
            tokens(6),
            "tiny",
            "trained",
            paths(tmp_path / "out"),
            state_dir=state,
            code="v1",
            **{**SETTINGS, "probe_sequences": 0},
        )
    assert "cannot read" in caplog.text and not state.exists()
    assert len(pd.read_parquet(paths(tmp_path / "out")["scores"])) == 3 * 78


def test_progress_lines_count_sequences_and_estimate_the_time_left(model, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="causalpos"):
        extract_to_files(model, tokens(), "tiny", "trained", paths(tmp_path), progress=False, **SETTINGS)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("extract tiny: ")]
    done = [int(line.split(": ")[1].split("/")[0]) for line in lines]
    assert done == [3, 6, 9, 12, 15, 18, 20]  # every batch: 5% of 20 sequences is one sequence
    assert lines[-1].startswith("extract tiny: 20/20 sequences (100%)") and "left" not in lines[-1]
    assert "left" in lines[0]
