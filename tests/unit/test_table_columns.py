"""Every table the pipeline writes has a record, and the record's columns are what its writer makes: each pure
function that builds a table runs here on tiny data and its columns are compared with catalogue.tables.TABLES.

The writers that need a trained model or the extraction (metrics, length_eval, the extraction's and emergence's
tables) build their frames from the record's columns (models.train, models.outputs); the extraction's Arrow
schema is compared here, the rest runs in the tests of the training and the extraction.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from causalpos.catalogue.tables import (
    ACTIVATION_TABLES,
    EMERGENCE_TABLES,
    SNAPSHOT_TABLES,
    STEP_COLUMNS,
    SUMMARY_TABLES,
    TABLE_COLUMN,
    TABLES,
    VARIANT_FIELDS,
)
from causalpos.io import read_table
from unit_tables import model_tables, two_models

ROOT = Path(__file__).resolve().parents[2]
# the tables whose builders the tests below run (each test compares its own); the others need a trained model
COVERED = {
    "simulation",
    "simulation_groups",
    "theory",
    "recursion",
    "documents",
    "snippets",
    "blocks",
    *ACTIVATION_TABLES,
    "pattern_ablation",
    "pattern_ablation_pretrained",
    "pattern_ablation_summary",
    "emergence",
    *SUMMARY_TABLES,
    "heads",
    "claims",
    "environment",  # tests/unit/test_environment.py
    "convergence",
    "window_test",
    "mask_controls",
    "runtimes",
    "length_seeds",
}
TRAINED_ONLY = {"metrics", "length_eval", *(f"emergence_{name}" for name in EMERGENCE_TABLES)}


def columns_of(frame: pd.DataFrame) -> list[str]:
    return list(frame.columns)


# ---------------------------------------------------------------- simulation, theory, recursion


def tiny_result(window=None):
    from causalpos.simulation.engine import SimulationResult
    from causalpos.simulation.variant import Variant

    v = Variant(d=4, seq_len=4, n_layers=2, n_samples=8, window=window)
    rng = np.random.default_rng(0)
    shape = (v.n_layers, v.seq_len, v.seq_len)
    return SimulationResult(
        v,
        rng.normal(size=shape),
        np.full(shape, 0.1),
        rng.random(shape),
        np.full(shape, 0.01),
        "official",
        "cpu",
        0.1,
        rng.normal(size=(2, *shape)),
        np.array([4, 4]),
    )


@pytest.mark.parametrize("window", [None, 2])
def test_simulation_tables_are_their_records(window):
    from causalpos.simulation.engine import groups_frame, result_frame

    result = tiny_result(window)
    assert columns_of(result_frame(result, "v")) == list(TABLES["simulation"].columns)
    assert columns_of(groups_frame(result, "v")) == list(TABLES["simulation_groups"].columns)


def test_the_variant_fields_are_the_tables_last_columns_and_the_schemas():
    from causalpos.simulation.variant import Variant

    assert VARIANT_FIELDS == [f.name for f in fields(Variant)]
    schema = yaml.safe_load((ROOT / "src/causalpos/schemas/config.schema.yaml").read_text())
    assert list(schema["$defs"]["variant_fields"]["properties"]) == VARIANT_FIELDS


def test_theory_and_recursion_tables_are_their_records():
    from causalpos.simulation.recursion import recursion_table
    from causalpos.simulation.theory import theory_frame
    from causalpos.simulation.variant import Variant

    assert columns_of(theory_frame(5, [0.0, 0.3])) == list(TABLES["theory"].columns)
    table = recursion_table(
        {"l2": Variant(d=4, seq_len=4, n_layers=2), "rope": Variant(d=4, seq_len=4, n_layers=2, pe="rope", window=2)}
    )
    assert columns_of(table) == list(TABLES["recursion"].columns)


# ---------------------------------------------------------------- corpus and tokens


class CharTokenizer:
    """A tokenizer of one id per character, with the interface corpus.tokens uses."""

    eos_token_id = 0

    def __len__(self):
        return 300

    @property
    def backend_tokenizer(self):
        return self

    def encode_batch_fast(self, texts, add_special_tokens=False):
        return [type("Encoding", (), {"ids": [1 + ord(c) % 299 for c in text]}) for text in texts]


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    from causalpos.corpus.documents import sample_documents

    folder = tmp_path_factory.mktemp("corpus")
    texts = [f"document number {i}: " + "words and more words " * (3 + i % 5) for i in range(40)]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts) + "\n")
    return sample_documents(
        [{"type": "files", "paths": [str(folder / "corpus.jsonl")], "name": "tiny"}], heldout_fraction=0.3, seed=0
    )


def test_documents_snippets_and_blocks_are_their_records(documents, tmp_path):
    from causalpos.corpus.tokens import write_snippets, write_token_blocks

    assert columns_of(documents) == list(TABLES["documents"].columns)
    tokenizer = CharTokenizer()
    snippets = write_snippets(documents, tokenizer, tmp_path / "snippets.npy", snippet_len=8, n_snippets=5)
    assert columns_of(snippets) == list(TABLES["snippets"].columns)
    assert list(read_table(tmp_path / TABLES["snippets"].filename).columns) == list(TABLES["snippets"].columns)
    write_token_blocks(documents, tokenizer, 16, tmp_path)
    blocks = read_table(tmp_path / TABLES["blocks"].filename)  # the JSON object, as the figures read it
    assert columns_of(blocks) == list(TABLES["blocks"].columns)


# ---------------------------------------------------------------- the models' tables


def test_the_extraction_writes_the_records_columns_then_its_name():
    from causalpos.models.outputs import schema

    for name in ACTIVATION_TABLES:
        assert TABLES[name].tagged and schema(name).names == list(TABLES[name].file_columns)


def test_each_snapshot_table_is_the_extractions_with_its_step():
    for name in SNAPSHOT_TABLES:
        assert TABLES[f"emergence_{name}"].columns == TABLES[name].columns + tuple(STEP_COLUMNS)
    assert {f"emergence_{name}" for name in EMERGENCE_TABLES} <= set(TABLES)


def test_pattern_ablation_tables_are_their_records():
    from causalpos.models.pattern_ablation import CONDITIONS, ablation_rows

    rng = np.random.default_rng(0)
    losses = {(factor, c): rng.random(8 // factor) for factor in (1, 2) for c in CONDITIONS}
    frame = ablation_rows(losses, {key: 0.1 for key in losses}, {1: 4, 2: 8}, "nope", "trained", 0, 3)
    for name in ("pattern_ablation", "pattern_ablation_pretrained", "pattern_ablation_summary"):
        assert columns_of(frame) == list(TABLES[name].columns)


def test_the_emergence_summary_is_its_record():
    from causalpos.analysis.emergence import emergence_frame

    tables = model_tables("nope", "trained", layers=2)
    scores = pd.concat([tables["scores"].assign(step=s, tokens_seen=10 * s) for s in (0, 3)], ignore_index=True)
    losses = pd.DataFrame(
        {"model": "nope", "step": [0, 3], "tokens_seen": [0, 30], "heldout_loss": [5.0, 4.0], "source": "metrics"}
    )
    frame = emergence_frame(scores, None, None, losses, None, n_bootstrap=4)
    assert len(frame) and columns_of(frame) == list(TABLES["emergence"].columns)


# ---------------------------------------------------------------- the summary, heads, claims


@pytest.fixture(scope="module")
def extraction():
    return two_models()


def test_rule_summarys_tables_are_their_records(extraction, tmp_path):
    from causalpos.analysis.summary import write_summaries

    written = write_summaries(extraction["scores"], extraction["probe"], tmp_path)
    assert list(written) == list(SUMMARY_TABLES)
    for name, path in written.items():
        assert path.name == TABLES[name].filename
        assert columns_of(read_table(path)) == list(TABLES[name].columns)


def test_the_heads_table_is_its_record(extraction):
    from causalpos.analysis.heads import heads_frame

    frame = heads_frame(extraction["head_scores"])
    assert len(frame) and columns_of(frame) == list(TABLES["heads"].columns)
    assert list(heads_frame(extraction["head_scores"].iloc[:0]).columns) == list(TABLES["heads"].columns)


def test_the_ledger_is_its_record_and_holds_claim_7s_sweep():
    from causalpos.analysis.claims.ledger import build_ledger
    from causalpos.analysis.claims.model_claims import SWEEP_COLUMNS

    ledger = build_ledger(None, None, None, None, None, n_bootstrap=4)
    assert columns_of(ledger) == list(TABLES["claims"].columns)
    # build_ledger keeps only the record's columns: a sweep column the record lacked would vanish silently
    assert set(SWEEP_COLUMNS) <= set(TABLES["claims"].columns)


def test_the_convergence_and_window_tables_are_their_records():
    from causalpos.analysis.claims.convergence import convergence_frame
    from causalpos.analysis.windows import window_frame

    tables = model_tables("llm", "pretrained")
    frame = convergence_frame(tables["scores"], tables["groups"], n_bootstrap=4, min_groups=3)
    assert len(frame) and columns_of(frame) == list(TABLES["convergence"].columns)
    assert columns_of(window_frame([])) == list(TABLES["window_test"].columns)


def test_the_mask_controls_table_is_its_record_with_claim_8s_rows_per_layer_and_head():
    from causalpos.analysis.controls_table import HEAD_AVERAGE, LAYERS_2_ON, condition_frame, mask_controls_frame

    tables = model_tables("llm", "pretrained", layers=3, heads=2)
    parts = [
        condition_frame(c, tables["scores"], tables["groups"], tables["head_scores"], n_bootstrap=20, seed=0)
        for c in ("documents", "random_tokens")
    ]
    frame = mask_controls_frame(parts)
    assert columns_of(frame) == list(TABLES["mask_controls"].columns)
    for _, rows in frame.groupby("condition"):
        average = rows[rows["head"] == HEAD_AVERAGE]
        per_layer = average[average["layer"] >= 0]
        assert per_layer.groupby("metric")["layer"].apply(sorted).to_dict() == {
            m: [0, 1, 2] for m in ("first_keys_emphasis", "nonrelative_amplitude", "range_ratio", "sink_emphasis")
        }
        assert per_layer["uncertainty"].notna().all()
        assert sorted(average[average["layer"] == LAYERS_2_ON]["metric"]) == ["nonrelative_amplitude", "range_ratio"]
        heads = rows[rows["head"] != HEAD_AVERAGE]
        assert len(heads) == 3 * 2 * 2 and heads["uncertainty"].isna().all()
        # the synthetic maps' key term grows with the layer (unit_tables): so does the non-relative amplitude
        amplitude = per_layer[per_layer["metric"] == "nonrelative_amplitude"].sort_values("layer")["value"]
        assert amplitude.is_monotonic_increasing


def test_the_runtimes_and_length_seed_tables_are_their_records(tmp_path):
    from causalpos.analysis.lengths import length_seed_frame
    from causalpos.analysis.runtimes import runtime_frame

    bench = tmp_path / "train.tsv"
    bench.write_text(
        "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
        "12.5\t0:00:12\t100\t200\t90\t95\t0\t0\t50\t6.0\n"
    )
    assert columns_of(runtime_frame({"train": [(bench, None)]}, {})) == list(TABLES["runtimes"].columns)
    per_seed = pd.DataFrame(
        [
            {
                "model": m,
                "seed": s,
                "factor": f,
                "seq_len": 16 * f,
                "n_sequences": 4,
                "heldout_loss": 3.0 + 0.1 * f + 0.01 * s + (0.05 if m == "rope" else 0),
                "heldout_loss_sem": 0.01,
            }
            for m in ("nope", "rope")
            for s in (0, 1, 2)
            for f in (1, 2)
        ]
    )
    frame = length_seed_frame(per_seed)
    assert columns_of(frame) == list(TABLES["length_seeds"].columns)


def test_every_record_is_built_here_or_needs_a_trained_model():
    """A table added to the catalogue gets a builder test here, or is one only a trained model writes."""
    assert set(TABLES) == COVERED | TRAINED_ONLY and not COVERED & TRAINED_ONLY
    assert all(
        TABLES[name].file_columns[-1] == TABLE_COLUMN
        for name in [*ACTIVATION_TABLES, *TRAINED_ONLY]
        if TABLES[name].tagged
    )
