"""Claim 12 (ours, issue 43): the pattern under the content controls, measured by claim 8's statistics on each
condition's tables, as registered (catalogue.preregistered). On small synthetic tables (helpers.llm_tables: a
relative map plus a non-relative pattern, and a sink column): a control that is the documents' own tables again
keeps all of the amplitude, within its uncertainty, and its draws are its own (a shared bootstrap would give every
replicate the ratio 1, an SE of 0); a control whose maps are relative loses the pattern (12a not supported); 12b is
8d's median over layers 2+ on the control; the rows are a Holm family of their own, and a ledger without the
controls has none of them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from causalpos.analysis.claims.family import holm
from causalpos.analysis.claims.ledger import build_ledger, headline
from causalpos.catalogue.models import CONTROL_CONDITIONS, DOCUMENTS
from causalpos.catalogue.preregistered import REGISTRATIONS
from helpers import R_LEDGER, llm_tables, model_tables, toeplitz


def relative_tables():
    """The same model with a relative map in every layer (a function of i - j alone) and the same sink column."""
    relative = toeplitz(9, scale=1.0)
    return model_tables("llm", "pretrained", [relative, relative, relative], noise=0.05, seed=3)[::2]


@pytest.fixture(scope="module")
def ledgers():
    documents = llm_tables(seed=0)
    controls = {
        DOCUMENTS: documents,
        "mid_document": documents,  # the documents' own tables: all of the pattern is left
        "random_tokens": relative_tables(),  # no non-relative pattern: none is left
        "shuffled_documents": llm_tables(seed=1),  # another draw of the same pattern
    }
    with_controls = build_ledger(None, None, None, None, None, n_bootstrap=R_LEDGER, seed=0, controls=controls)
    scores, groups = documents
    default = build_ledger(None, None, scores, None, groups, n_bootstrap=R_LEDGER, seed=0)
    return with_controls, default


def row_of(ledger: pd.DataFrame, claim_id: str, condition: str) -> pd.Series:
    rows = ledger[(ledger["claim_id"] == claim_id) & ledger["setting"].str.contains(condition)]
    assert len(rows) == 1, rows[["setting", "value"]]
    return rows.iloc[0]


def test_the_documents_own_tables_keep_the_whole_pattern_with_draws_of_their_own(ledgers):
    ledger, _ = ledgers
    same = row_of(ledger, "12a", "mid_document")
    # the point estimates differ only by the bootstrap's bias correction, which each condition's own draws make
    assert same["uncertainty"] > 0 and abs(same["value"] - 1.0) < same["uncertainty"]
    assert same["verdict"] == "supported" and same["reference"].startswith("t(")


def test_a_relative_control_loses_the_pattern_and_another_draw_keeps_it(ledgers):
    ledger, _ = ledgers
    relative = row_of(ledger, "12a", "random_tokens")
    assert relative["value"] < 0.2 and relative["verdict"] == "not supported"
    again = row_of(ledger, "12a", "shuffled_documents")
    assert again["value"] > 0.5 and again["verdict"] != "not supported"


def test_12a_divides_by_8b_and_12b_is_8d_over_the_later_layers(ledgers):
    ledger, default = ledgers
    b = default[default["claim_id"] == "8b"].iloc[0]
    d = default[(default["claim_id"] == "8d") & (default["layer"] >= 1)]
    same = row_of(ledger, "12a", "mid_document")
    assert f"over {b['value']:.3g} ({DOCUMENTS})" in same["note"]  # the documents' draws are the default ledger's
    emphasis = row_of(ledger, "12b", "mid_document")
    assert emphasis["value"] == pytest.approx(np.median(d["value"].to_numpy()), rel=1e-12)


def test_claim_12_is_a_holm_family_of_its_own_as_registered(ledgers):
    ledger, default = ledgers
    twelve = ledger[ledger["claim"] == 12]
    assert len(twelve) == 2 * len(CONTROL_CONDITIONS)  # one model: a row per control, for 12a and 12b
    assert set(twelve["claim_id"]) == {"12a", "12b"}
    for claim_id in ("12a", "12b"):
        registered = REGISTRATIONS[claim_id].claim
        rows = twelve[twelve["claim_id"] == claim_id]
        assert (rows["statement"] == registered.statement).all() and (rows["direction"] == registered.direction).all()
    np.testing.assert_allclose(twelve["p_adjusted"], holm(twelve["p_value"].tolist()))
    assert "Our claim 12: 6 tests" in headline(twelve) and "paper's claims" not in headline(twelve)
    assert not (default["claim"] == 12).any()
