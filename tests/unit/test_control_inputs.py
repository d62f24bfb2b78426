"""Claim 12's ledger reads each condition's tables from two flat input lists (rule claims in results/controls:
control_scores and control_groups, a file per pretrained model in each condition, conditions in params.conditions
order): jobs.claims.control_inputs must give each condition its own files, and refuse lists that do not split."""

from __future__ import annotations

import pandas as pd
import pytest

from causalpos.catalogue.models import CONDITIONS
from causalpos.jobs.claims import control_inputs


def test_each_condition_gets_its_own_models_files_in_order(tmp_path):
    models = ("a", "b")
    files = {}
    for table in ("scores", "groups"):
        files[table] = []
        for condition in CONDITIONS:
            for model in models:
                path = tmp_path / f"{condition}-{model}-{table}.parquet"
                pd.DataFrame({"model": [model], "condition": [condition]}).to_parquet(path)
                files[table].append(str(path))
    controls = control_inputs(files["scores"], files["groups"], list(CONDITIONS))
    assert list(controls) == list(CONDITIONS)
    for condition, (scores, groups) in controls.items():
        assert [p.rsplit("/", 1)[-1] for p in scores.paths] == [f"{condition}-{m}-scores.parquet" for m in models]
        assert [p.rsplit("/", 1)[-1] for p in groups.paths] == [f"{condition}-{m}-groups.parquet" for m in models]
    assert control_inputs([], [], []) is None  # every other ledger: no claim 12
    with pytest.raises(ValueError, match="conditions"):
        control_inputs(files["scores"][:-1], files["groups"][:-1], list(CONDITIONS))
