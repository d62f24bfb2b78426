"""The catalogue's two record types: a claim as the ledger measures it (Claim) and the threshold its metric must
pass (Threshold). Apart from the registries that hold them (catalogue.claims.CLAIMS, catalogue.thresholds) so that
claims registered before their numbers exist (catalogue.preregistered) are records of the same kind, read by both
registries without an import circle."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """One claim of the paper as the ledger measures it. Each field but per_layer fills the ledger's column of
    that name in the claim's rows (id: claim_id; threshold: the column holds THRESHOLDS[threshold] after the
    config's overrides); measured_by names the code that measures it."""

    id: str  # "7a": part a of claim 7 (TOPICS[7])
    title: str  # a short name, the title of the claim's panel in the claims figure
    section: str  # where the paper states it
    statement: str  # the claim in the paper's words (quoted where literal) and where it is measured
    metric: str  # what the ledger measures for it
    unit: str  # the metric's unit
    direction: str  # ">" or "<": which side of the threshold supports the claim; ">=": a test of its own (2c)
    threshold: str  # its key in THRESHOLDS (claims.thresholds in the config overrides the value)
    measured_by: str  # the dotted name of the builder that makes its rows (analysis.claims.ledger.BUILDERS)
    per_layer: bool = False  # one row per model and layer: ledger_markdown summarises them per model

    @property
    def number(self) -> int:
        """The ledger's `claim` column: 7 for 7a."""
        return claim_number(self.id)


def claim_number(claim_id: str) -> int:
    """The claim a claim id belongs to: 7 for "7a"."""
    return int(claim_id.rstrip("abcdefghijklmnopqrstuvwxyz"))


@dataclass(frozen=True)
class Threshold:
    """key: its name in THRESHOLDS and under claims.thresholds; default: its value unless the config overrides it;
    bounds: the values a config may give, an interval: "(0, 1]", "[0.5, 1)", "(-inf, 0]" ("(" and ")" leave the
    end out; inf: no bound); meaning: what the number is, and why the bounds (the schema's description); why: the
    reason for the default (the docs' "why")."""

    key: str
    default: float
    bounds: str
    meaning: str
    why: str

    def limits(self) -> tuple[str, str, str, str]:
        """The bounds as ("[" or "(", low, high, "]" or ")"), the numbers as written ("-inf", "inf": none)."""
        low, high = (part.strip() for part in self.bounds.split(","))
        return low[0], low[1:], high[:-1], high[-1]

    def schema(self) -> dict:
        """The bounds as JSON Schema keywords, in the order the config schema lists them."""
        opening, low, high, closing = self.limits()
        node = {"type": "number"}
        if low != "-inf":
            node["minimum" if opening == "[" else "exclusiveMinimum"] = _number(low)
        if high != "inf":
            node["maximum" if closing == "]" else "exclusiveMaximum"] = _number(high)
        return node

    def allows(self, value: float) -> bool:
        opening, low, high, closing = self.limits()
        above = low == "-inf" or (value >= float(low) if opening == "[" else value > float(low))
        below = high == "inf" or (value <= float(high) if closing == "]" else value < float(high))
        return above and below


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value
