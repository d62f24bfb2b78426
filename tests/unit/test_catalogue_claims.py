"""The claims' records: each names the builder that makes its rows, its threshold is a record with bounds that
hold its default, and the config schema's bounds are those records'."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

from causalpos.catalogue.claims import CLAIMS, PAGES, THRESHOLDS, TOPICS, claim_number, merge_thresholds, page_of
from causalpos.catalogue.models import CONDITIONS
from causalpos.catalogue.thresholds import REMOVED_THRESHOLDS, THRESHOLD_RECORDS, Threshold

SCHEMA = Path(__file__).resolve().parents[2] / "src" / "causalpos" / "schemas" / "config.schema.yaml"


def builder_ids() -> dict[str, str]:
    """claim id -> the dotted name of the builder whose rows carry it, found by running every builder of the
    ledger on no data (each then gives its claims' rows, inconclusive)."""
    from causalpos.analysis.claims import ledger, robustness
    from causalpos.analysis.claims.replicates import LedgerInputs

    # claim 12's builder makes rows only for a ledger given the controls' tables (target mask_controls's)
    data = LedgerInputs(None, None, None, None, None, 4, 0, controls={c: (None, None) for c in CONDITIONS})
    th = merge_thresholds(None)
    found = {}
    builders = [*ledger.BUILDERS, *(b for family in ledger.OWN_FAMILIES for b in family)]
    for build in builders:
        for row in build(data, th):
            found.setdefault(row["claim_id"], f"{build.__module__}.{build.__name__}")
    for row in robustness.claim9([], [], data, th):  # 9a compares verdicts: built after the others
        found.setdefault(row["claim_id"], f"{robustness.claim9.__module__}.claim9")
    return found


def test_each_claim_names_the_builder_that_makes_its_rows():
    found = builder_ids()
    assert set(found) == set(CLAIMS)
    assert {c: CLAIMS[c].measured_by for c in CLAIMS} == found


@pytest.mark.parametrize("claim_id", CLAIMS)
def test_a_claims_code_and_threshold_exist(claim_id):
    claim = CLAIMS[claim_id]
    module, _, name = claim.measured_by.rpartition(".")
    assert callable(getattr(importlib.import_module(module), name))
    assert claim.threshold in THRESHOLD_RECORDS and claim.direction in (">", "<", ">=")
    assert claim.number in TOPICS and claim.number in PAGES[page_of(claim_id)]
    assert claim_number(claim_id) == claim.number


@pytest.mark.parametrize("key", THRESHOLD_RECORDS)
def test_a_thresholds_default_is_within_its_bounds(key):
    record = THRESHOLD_RECORDS[key]
    assert record.key == key and THRESHOLDS[key] == record.default and record.allows(record.default)
    assert record.meaning and record.why


@pytest.mark.parametrize("key", THRESHOLD_RECORDS)
def test_the_schemas_bounds_are_the_records(key):
    """scripts/generate-docs.py writes them; this reads the schema as the config check does."""
    node = yaml.safe_load(SCHEMA.read_text())["$defs"]["thresholds"]["properties"][key]
    record = THRESHOLD_RECORDS[key]
    assert {k: v for k, v in node.items() if k != "description"} == record.schema()
    assert node["description"] == record.meaning


def test_the_schema_lists_every_threshold_in_order_and_refuses_the_removed_ones():
    thresholds = yaml.safe_load(SCHEMA.read_text())["$defs"]["thresholds"]
    assert list(thresholds["properties"]) == list(THRESHOLD_RECORDS)
    removed = [key for block in thresholds["propertyNames"]["allOf"] for key in block["not"]["enum"]]
    assert sorted(removed) == sorted(REMOVED_THRESHOLDS)


@pytest.mark.parametrize(
    "bounds, inside, outside, schema",
    [
        ("(0, 1)", [0.5, 1e-9], [0, 1, -1], {"exclusiveMinimum": 0, "exclusiveMaximum": 1}),
        ("[0.5, 1)", [0.5, 0.99], [0.49, 1], {"minimum": 0.5, "exclusiveMaximum": 1}),
        ("(-inf, 0]", [0, -5], [1e-9], {"maximum": 0}),
        ("[1, inf)", [1, 100], [0.99], {"minimum": 1}),
        ("(0, inf)", [1e-12, 9], [0, -1], {"exclusiveMinimum": 0}),
    ],
)
def test_bounds_read_as_intervals(bounds, inside, outside, schema):
    record = Threshold("x", inside[0], bounds, "m", "w")
    assert all(record.allows(v) for v in inside) and not any(record.allows(v) for v in outside)
    assert record.schema() == {"type": "number", **schema}
    assert all(isinstance(v, int) for k, v in record.schema().items() if k != "type" and "." not in bounds)


def test_overrides_merge_key_by_key_and_removed_or_unknown_keys_are_refused():
    merged = merge_thresholds({"concordance": 0.9})
    assert merged["concordance"] == 0.9 and merged["eq4_r2"] == THRESHOLDS["eq4_r2"]
    assert merge_thresholds({"concordance": 1.5})["concordance"] == 1.5  # outside the config's bounds: Python may
    with pytest.raises(ValueError, match="claims.thresholds.z was removed"):
        merge_thresholds({"z": 2})
    with pytest.raises(ValueError, match="unknown claims threshold 'concordence'"):
        merge_thresholds({"concordence": 0.9})
    with pytest.raises(ValueError, match=r"'family_alpha' must be in \(0, 1\), got 1.5"):
        merge_thresholds({"family_alpha": 1.5})
