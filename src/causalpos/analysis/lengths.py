"""Length generalisation over training seeds (rule length_seeds): mean and spread of the held-out loss at each
length, and of the gap to the training length, over the default training and its reruns with other seeds.

One length evaluation (causalpos.models.train.evaluate_lengths) measures one trained model: its standard
error covers the held-out sequences, not the training run. Here each model is trained with several seeds
(initial weights and data order), so the spread over seeds includes the run. The gap of a seed at factor k is
its loss at k x the training length minus its loss at 1x (the same tokens, more context before them: > 0
means the longer context hurts). Rows "nope - rope" pair the two models seed by seed (the same seed gives
both the same initial weights and data order): their gap difference < 0 means NoPE loses less.
"""

from __future__ import annotations

import math

import pandas as pd

from causalpos.tables import require_columns

LENGTH_SEED_COLUMNS = ["model", "factor", "seq_len", "n_seeds", "seeds", "heldout_loss_mean", "heldout_loss_sd",
                       "gap_mean", "gap_sd", "gap_sem"]
PAIR = ("nope", "rope")


def with_gaps(per_seed: pd.DataFrame) -> pd.DataFrame:
    """The length evaluations of every model and seed (model, seed, factor, seq_len, heldout_loss) with their
    gap to factor 1 of the same model and seed."""
    frame = require_columns(per_seed, ["model", "seed", "factor", "seq_len", "heldout_loss"], "length_eval")
    base = frame[frame["factor"] == 1].set_index(["model", "seed"])["heldout_loss"]
    if base.index.duplicated().any():
        raise ValueError("length_eval: a model and seed evaluated twice at factor 1")
    keys = pd.MultiIndex.from_frame(frame[["model", "seed"]])
    return frame.assign(gap=frame["heldout_loss"].to_numpy() - base.reindex(keys).to_numpy())


def _summary(model: str, factor: int, seq_len: int, rows: pd.DataFrame, loss: str, gap: str) -> dict:
    n = len(rows)
    sd = lambda column: float(rows[column].std(ddof=1)) if n > 1 else math.nan  # noqa: E731
    return {"model": model, "factor": int(factor), "seq_len": int(seq_len), "n_seeds": n,
            "seeds": ",".join(str(int(s)) for s in sorted(rows["seed"])),
            "heldout_loss_mean": float(rows[loss].mean()), "heldout_loss_sd": sd(loss),
            "gap_mean": float(rows[gap].mean()), "gap_sd": sd(gap),
            "gap_sem": sd(gap) / math.sqrt(n) if n else math.nan}


def length_seed_frame(per_seed: pd.DataFrame) -> pd.DataFrame:
    """LENGTH_SEED_COLUMNS: per model and factor over its seeds, then "nope - rope" over the seeds both have."""
    frame = with_gaps(per_seed)
    rows = [_summary(model, factor, rows["seq_len"].iloc[0], rows, "heldout_loss", "gap")
            for (model, factor), rows in frame.groupby(["model", "factor"], sort=True)]
    if set(PAIR) <= set(frame["model"]):
        left, right = (frame[frame["model"] == m].set_index(["seed", "factor"]) for m in PAIR)
        both = left.merge(right, how="inner", left_index=True, right_index=True, suffixes=("_a", "_b")).reset_index()
        both = both.assign(loss=both["heldout_loss_a"] - both["heldout_loss_b"], diff=both["gap_a"] - both["gap_b"])
        rows += [_summary(f"{PAIR[0]} - {PAIR[1]}", factor, rows["seq_len_a"].iloc[0], rows, "loss", "diff")
                 for factor, rows in both.groupby("factor", sort=True)]
    return pd.DataFrame(rows, columns=LENGTH_SEED_COLUMNS)
