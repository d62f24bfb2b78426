"""Registered claims (catalogue.preregistered) are what the ledger will judge them by: once a registered claim is in
catalogue.claims.CLAIMS, its statement, metric, unit, direction and threshold are the registered ones, and so is
its threshold's record; until then the ledger holds only the definitions a registration says it replaces."""

from __future__ import annotations

import dataclasses

from causalpos.catalogue.claims import CLAIMS
from causalpos.catalogue.preregistered import REGISTRATIONS, REPLACES
from causalpos.catalogue.thresholds import THRESHOLD_RECORDS

FROZEN = ("title", "statement", "metric", "unit", "direction", "threshold")


def test_each_registration_is_whole_and_its_threshold_allows_its_default():
    for claim_id, registration in REGISTRATIONS.items():
        claim, threshold = registration.claim, registration.threshold
        assert claim.id == claim_id and claim.direction in (">", "<")
        assert claim.threshold == threshold.key and threshold.allows(threshold.default)
        assert claim.statement.startswith("Ours"), f"{claim_id}: a registered claim is ours, and says so"
        for field in ("expected", "family", "rows", "uncertainty"):
            assert getattr(registration, field).strip(), f"{claim_id}: {field} is empty"


def test_a_landed_claim_is_its_registration():
    for claim_id, registration in REGISTRATIONS.items():
        claim = CLAIMS.get(claim_id)
        if claim is None or claim_id in REPLACES:
            continue
        for field in FROZEN:
            assert getattr(claim, field) == getattr(registration.claim, field), f"{claim_id}.{field} moved"
        assert THRESHOLD_RECORDS[claim.threshold] == registration.threshold, f"{claim_id}: its threshold moved"


def test_a_replaced_definition_is_still_the_old_one():
    """An id in REPLACES whose ledger claim already is its registration has landed: it leaves REPLACES, so that
    the test above holds it to the registration from then on."""
    for claim_id in REPLACES:
        assert claim_id in REGISTRATIONS and claim_id in CLAIMS
        old, new = CLAIMS[claim_id], REGISTRATIONS[claim_id].claim
        assert any(getattr(old, f) != getattr(new, f) for f in FROZEN), f"{claim_id} landed: remove it from REPLACES"


def test_a_registered_threshold_does_not_redefine_one_in_use():
    for registration in REGISTRATIONS.values():
        live = THRESHOLD_RECORDS.get(registration.threshold.key)
        if live is not None:
            assert dataclasses.asdict(live) == dataclasses.asdict(registration.threshold)
