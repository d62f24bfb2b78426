"""What kind of evidence each ledger row is, what its p is referred to, and which rows rest on our own reading of
the paper rather than on the paper's words (issue 41).

Row kinds (the ledger's ``row_kind``): only ``test`` rows are hypothesis tests, and only the paper's test rows
enter the paper's Holm family; the headline counts each kind apart.

- ``test``: a one-sided test of the claim against its threshold (its p's in ``p_value``, ``p_against``);
- ``exact``: a closed form or a symbolic check, without sampling error (p 0 or 1, certain);
- ``agreement``: claim 9a, whether two verdicts (the paper's input law and ours) agree: not a test;
- ``by construction``: a property that holds by how the quantity is built: not a test;
- ``decision``: a verdict read from a value against a threshold without an uncertainty (10c's breaks).

References (``reference``): ``normal`` (z = (value - threshold) / SE, the SE the SD of the bootstrap or Monte
Carlo replicates), ``t(df)`` (Student's t with df degrees of freedom: a bootstrap over G groups of sequences has
df = G - 1, training seeds n - 1), ``bootstrap bound`` (replicates that never vary, a concordance of 1 in every
one: the bootstrap cannot put p below 1 / (R + 1) with R replicates, so that is its p), ``exact`` and ``none``.

Our readings (``ours``: why, "" for the paper's own claim in the paper's scope). A row whose statement, threshold
or setting is ours and not the paper's is kept out of the paper's Holm family and adjusted in one of its own, so
that our choices neither take power from the paper's verdicts nor count among them. Claims 10 and 11 are ours
whole (each its own family, analysis.claims.ledger.OWN_FAMILIES).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ROW_KINDS = ("test", "exact", "agreement", "by construction", "decision")
NOT_TESTS = ROW_KINDS[1:]


@dataclass(frozen=True)
class OurReading:
    claim_id: str
    why: str
    setting: str = ""  # a regular expression the row's setting must match ("": every row of the claim)
    layer: int | None = None  # the 0-based layer it must have (None: any)

    def covers(self, row: dict) -> bool:
        if row.get("claim_id") != self.claim_id:
            return False
        if self.setting and not re.search(self.setting, str(row.get("setting", ""))):
            return False
        if self.layer is not None:
            layer = row.get("layer")
            if layer is None or layer != layer or int(layer) != self.layer:  # NaN or another layer
                return False
        return True


OUR_READINGS = (
    OurReading("1a", "the paper measures Eq. 4 at d = 64; d = 16 is our setting", setting=r"\bd=16\b"),
    OurReading("2d", "our reading: a third printed digit of the paper's schematic Figure 1 (d)"),
    OurReading(
        "3d", "our second reading of App. A's sentence (in i, 3a's query share); the first is in j", r"\bin i\b"
    ),
    OurReading("5c", "our threshold: the paper says 'similar', with no size"),
    OurReading("6e", "the paper's sentence is about Figure 4 (alpha = 0); alpha = 0.5 is our setting", r"α=0\.5\b"),
    OurReading("7m", "our threshold: the paper says 'only weakly dependent', with no size"),
    OurReading(
        "7n",
        "our reading: the paper shows Figure 8's later layers (diagonal-normalised in the authors' notebook) and "
        "says nothing of them",
    ),
    OurReading("8d", "the paper says the pattern emphasises the first keys 'except for the first layer'", layer=0),
    OurReading("9a", "our robustness check: the exact-moment input law is ours"),
)
OWN_CLAIM = "our own claim (not the paper's)"


def our_reading(row: dict) -> str:
    """Why the row is ours ("" where it is the paper's claim in the paper's scope)."""
    return next((reading.why for reading in OUR_READINGS if reading.covers(row)), "")
