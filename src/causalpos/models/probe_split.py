"""How the position probe splits its sequences, without torch: the config check reads it before any job runs.

The first 60% of the probe's sequences train, the next 20% choose the ridge penalty, the last 20% give the
held-out error (causalpos.models.probe).
"""

from __future__ import annotations

from causalpos.models.errors import ExtractionError

MIN_SEQUENCES = 5  # the fewest that leave every phase a sequence


def split_points(n_sequences: int) -> tuple[int, int]:
    """First validation and first test sequence (0-based) of `n_sequences` probe sequences."""
    if n_sequences < MIN_SEQUENCES:
        raise ExtractionError(f"the position probe needs at least {MIN_SEQUENCES} sequences, got {n_sequences}")
    return int(0.6 * n_sequences), int(0.8 * n_sequences)
