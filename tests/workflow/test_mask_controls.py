"""Target mask_controls (issue 43; `snakemake mask_controls`, not part of `all`): each pretrained LLM extracted
again on the content controls' sequences, claim 8's metrics of every condition in results/summary/mask_controls.parquet
(rule controls_table) and claim 12's ledger (rule claims in results/controls). On the shared finished tiny run: what
the target plans, and that the table's `documents` rows are the ledger's claim 8, computed apart (the same tables,
the same bootstrap), so a control's rows are claim 8 on its sequences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from causalpos.analysis.heads import layers_of
from causalpos.analysis.controls_table import HEAD_AVERAGE, LAYERS_2_ON, condition_frame, mask_controls_frame
from causalpos.catalogue import paths
from causalpos.catalogue.models import CONTROL_CONDITIONS
from causalpos.io import PartTable
from causalpos.workflow.config import load_config
from helpers import planned_jobs

pytestmark = pytest.mark.workflow


def test_the_target_extracts_each_pretrained_model_once_per_control_and_nothing_of_the_default_run(finished_copy):
    config = yaml.safe_load((finished_copy / "config.yaml").read_text())
    models = list(config["extraction"]["pretrained"]["models"])
    planned = planned_jobs(finished_copy, "mask_controls")
    folders = {f"@{paths.controls_dir(c)}" for c in CONTROL_CONDITIONS}
    extractions = {("extract", f"{m}{folder}") for m in models for folder in folders}
    assert planned == extractions | {("controls_table", ""), ("claims", f"@{paths.controls_root()}")}


def test_the_documents_rows_are_the_ledgers_claim_8(finished_run):
    config = load_config(finished_run / "config.yaml", devices=False)  # the schema's defaults filled in
    claims = config["claims"]
    ledger = pd.read_parquet(finished_run / paths.table_file("claims"))
    for model in config["extraction"]["pretrained"]["models"]:
        tables = {t: finished_run / paths.activation_table(model, t) for t in ("scores", "groups", "head_scores")}
        frame = mask_controls_frame(
            [
                condition_frame(
                    "documents",
                    PartTable(tables["scores"], "scores"),
                    PartTable(tables["groups"], "groups").select(quantity="scores"),
                    layers_of(PartTable(tables["head_scores"], "head_scores")),
                    claims["n_bootstrap"],
                    claims["seed"],
                )
            ]
        )
        average = frame[frame["head"] == HEAD_AVERAGE]
        for claim_id, metric, layered in (
            ("8a", "nonrelative_amplitude", True),
            ("8d", "first_keys_emphasis", True),
            ("8b", "nonrelative_amplitude", False),
            ("8c", "range_ratio", False),
        ):
            rows = ledger[(ledger["claim_id"] == claim_id) & (ledger["model"] == model)].sort_values("layer")
            mine = average[(average["metric"] == metric) & ((average["layer"] >= 0) == layered)]
            if not layered:
                assert (mine["layer"] == LAYERS_2_ON).all()
            assert len(rows) == len(mine) > 0, claim_id
            np.testing.assert_array_equal(mine.sort_values("layer")["value"].to_numpy(), rows["value"].to_numpy())
            np.testing.assert_array_equal(
                mine.sort_values("layer")["uncertainty"].to_numpy(), rows["uncertainty"].to_numpy()
            )
        heads = frame[frame["head"] != HEAD_AVERAGE]
        assert heads["uncertainty"].isna().all() and set(heads["metric"]) == {
            "nonrelative_amplitude",
            "first_keys_emphasis",
        }
        assert (frame["n_sequences"] == config["extraction"]["pretrained"]["n_sequences"]).all()
