"""scripts/compare-results.py reports every kind of column that differs (the probe's run crashed on the first text
column, exactly where a verdict flipped), and calls equal what is equal, NaN included."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare-results.py"
spec = importlib.util.spec_from_file_location("compare_results", SCRIPT)
compare_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_results)


def ledger(verdict="supported", value=0.5, dtype=object):
    return pd.DataFrame(
        {
            "claim": pd.Series(["1a", "1b"], dtype=dtype),
            "verdict": pd.Series([verdict, "inconclusive"], dtype=dtype),
            "value": [value, np.nan],
            "exact": [True, False],
            "rows": [[1, 2], [3]],
        }
    )


@pytest.mark.parametrize("dtype", [object, "string"], ids=["object", "string"])
def test_a_flipped_verdict_is_reported_not_a_crash(dtype):
    found = compare_results.differing_columns(ledger(dtype=dtype), ledger("not supported", dtype=dtype))
    assert found == {"verdict": "1 values differ"}


def test_numbers_booleans_and_lists_that_differ_are_each_reported():
    a, b = ledger(), ledger(value=0.75)
    b.loc[1, "exact"] = True
    b.at[0, "rows"] = [1, 3]
    assert compare_results.differing_columns(a, b) == {
        "value": "max |difference| 0.25",
        "exact": "1 values differ",
        "rows": "1 values differ",
    }


def test_equal_tables_nan_included_are_the_same():
    assert compare_results.differing_columns(ledger(), ledger()) == {}
