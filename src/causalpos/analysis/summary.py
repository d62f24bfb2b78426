"""Numbers behind the attention heatmaps: how non-relative, how monotone, how positional.

Every function takes the long tables written by the extraction stage (see causalpos.catalogue.tables:
SCORE_COLUMNS, PROBE_COLUMNS) and returns one tidy row per (model, kind, layer).

- `nonrelativeness(scores)`: how far the scores are from depending on the distance i - j alone,
  and whether the left region (the first keys) is darker than its diagonals (paper Sections 4.1, 5.1, 5.2).
- `increasing_fraction(scores)`: how often a nearer key scores higher (Sections 3.2, 4.1, 4.2).
- `probe_summary(probe)`: how well a linear probe reads the token position from the hidden state.
- `write_summaries(scores, probe, out_dir)`: the three tables as Parquet files.

Layers are 0-based here, as in the input tables. "Off-diagonal" means the visible entries with
key_pos < query_pos; the main diagonal (a token attending to itself) is left out of every
statistic that is about positions, because its scores are of another size than the rest
(Figure 3 (b), (i)) and the paper's argument is about the off-diagonal bands.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from causalpos.analysis.triangles import (
    LEFT_FRACTION,
    band_centred,
    band_statistics,
    off_diagonal,
    pack,
    visible_window,
)
from causalpos.io import PartTable, write_parquet
from causalpos.catalogue.tables import (
    INCREASING_COLUMNS,
    NONRELATIVENESS_COLUMNS,
    PROBE_SUMMARY_COLUMNS,
    SUMMARY_FILES,
    require_columns,
)

KEYS = ["model", "kind", "layer"]
SCORE_NEEDS = KEYS + ["query_pos", "key_pos", "score_mean", "score_sem", "seq_len"]
PROBE_NEEDS = KEYS + ["mae", "mae_baseline"]


def _layer_row(rows: pd.DataFrame, left_fraction: float) -> dict:
    """One (model, kind, layer) of the scores table: the statistics of nonrelativeness, from its packed triangle."""
    size = int(rows["seq_len"].max())
    score, sem = pack(rows, ["score_mean", "score_sem"], size)
    try:  # a sliding-window layer has no score for the bands q - k >= its window: they are left out
        window = visible_window(score, size)
    except ValueError as err:
        raise ValueError(
            f"scores table: model {rows['model'].iloc[0]!r}, layer {int(rows['layer'].iloc[0])}: {err}"
        ) from None
    every = off_diagonal(size, 0, window)
    x = score[:, None]
    bands = band_statistics(x, size, left_fraction, window=window)
    row = {"seq_len": size, "left_keys": max(2, math.ceil(left_fraction * size))}
    for kmin, suffix in ((0, ""), (1, "_no_sink")):
        var = float(bands[f"var{kmin}"][0])
        row[f"index{suffix}"] = float(bands[f"share{kmin}"][0])  # NaN for a constant matrix: no pattern
        noise = float(np.mean(sem[off_diagonal(size, kmin, window)] ** 2))
        row[f"index_noise{suffix}"] = noise / var if var > 0 else math.nan
        row[f"deficit{suffix}"] = float(bands[f"left{kmin}"][0])
    pattern = band_centred(x, size, 0, window)[:, 0]
    values = score[every]
    row.update(
        n_pairs=len(every),
        score_std=math.sqrt(max(float(bands["var0"][0]), 0.0)),
        score_q01=float(np.quantile(values, 0.01)),
        score_q99=float(np.quantile(values, 0.99)),
        pattern_std=float(pattern.std()),
        pattern_q01=float(np.quantile(pattern, 0.01)),
        pattern_q99=float(np.quantile(pattern, 0.99)),
    )
    row["n_sequences"] = rows["n_sequences"].max() if "n_sequences" in rows.columns else np.nan
    return row


# ---------------------------------------------------------------- non-relativeness


def nonrelativeness(scores: pd.DataFrame, left_fraction: float = LEFT_FRACTION) -> pd.DataFrame:
    """Per (model, kind, layer): how far the scores are from a purely relative (Toeplitz) pattern.

    Let s(i, j) be score_mean over the visible off-diagonal pairs j < i, and p(i, j) = s(i, j)
    minus the mean of s over its band {(i', j'): i' - j' = i - j} (the paper's "diagonal-normalised"
    score, Section 5.1; this equals the table's score_diagnorm, recomputed here so that the
    variant without key 0 can centre its bands without key 0).

    - ``index`` = Var(p) / Var(s), both over the same off-diagonal pairs (population variances).
      Var(s) splits into the variance of the band means plus the variance within the bands, so
      the index is the share of the score variance that the distance i - j does *not* explain
      (1 - the correlation ratio η² of s on i - j), in [0, 1]. A relative positional encoding
      alone gives scores that depend on i - j only (Section 4.1, Figure 10), hence index 0; the
      causal mask adds a dependence on the absolute positions ("highly non-uniform" bands), which
      raises it. NaN where the scores are constant.
    - ``index_no_sink``: the same over keys j >= 1 only, bands recentred without key 0, so an
      attention sink (a special column 0, Section 4.2) cannot by itself make the index large.
    - ``index_noise`` (and ``_no_sink``) = mean(score_sem²) / Var(s): roughly the index that
      sampling noise alone would produce for an exactly relative matrix. An index well above it
      is a property of the model, not of the finite number of sequences.
    - ``deficit`` = mean of p over the left region {j < i, j < left_keys}, with
      left_keys = max(2, ceil(left_fraction * seq_len)). Within every band p averages to 0, so
      the mean of p over all off-diagonal pairs is 0 and the deficit says how the left region
      compares with the diagonals it lies on. Negative = the left region is darker than its
      diagonals ("the left portion of the attention maps appears darker", Section 5.1); 0 for a
      relative matrix. ``deficit_no_sink``: the same for 1 <= j < left_keys with bands recentred
      without key 0.
    - The scale, over the off-diagonal pairs with every key: ``score_std``, ``score_q01``,
      ``score_q99`` (1% and 99% quantiles of s) against ``pattern_std``, ``pattern_q01``,
      ``pattern_q99`` (the same for p). Section 5.2 argues the pattern matters because it is
      about [-1, 1] while raw scores span about [-10, 10]; these columns put numbers on both.
    """
    require_columns(scores, SCORE_NEEDS, "scores")
    if not 0 < left_fraction <= 1:
        raise ValueError(f"left_fraction must be in (0, 1], got {left_fraction}")
    if not (scores["seq_len"] >= 2).any():
        raise ValueError("scores table has no off-diagonal pairs (seq_len < 2?)")
    rows = [
        {"model": model, "kind": kind, "layer": layer, **_layer_row(group, left_fraction)}
        for (model, kind, layer), group in scores.groupby(KEYS, sort=True)
        if group["seq_len"].max() >= 2
    ]
    table = pd.DataFrame(rows)[NONRELATIVENESS_COLUMNS]
    return table.astype({column: scores[column].dtype for column in ("layer", "seq_len")})  # the scores' types


# ---------------------------------------------------------------- monotonicity


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    """Φ(z) via Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7; no scipy in the environment)."""
    x = np.abs(z) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(z) * erf)


def _fraction_stats(pairs: pd.DataFrame, suffix: str) -> pd.DataFrame:
    groups = pairs.groupby(KEYS, sort=True)
    n = groups.size()
    var = pairs.assign(v=pairs["p_up"] * (1.0 - pairs["p_up"])).groupby(KEYS, sort=True)["v"].sum()
    return pd.DataFrame(
        {
            f"n_pairs{suffix}": n,
            f"fraction{suffix}": groups["up"].mean(),
            f"fraction{suffix}_sem": np.sqrt(var) / n,
        }
    )


def increasing_fraction(scores: pd.DataFrame) -> pd.DataFrame:
    """Per (model, kind, layer): how often the nearer of two adjacent keys gets the higher score.

    For a query i and adjacent keys j, j + 1 (both visible), the step is
    d(i, j) = s(i, j + 1) - s(i, j) with s = score_mean. Section 3.2 proves, and Section 4.1
    shows, that from layer 2 on the score "strictly increases with j" for a fixed i, i.e. nearer
    keys score higher, as with common positional encodings; the fraction of steps with d > 0
    measures how far that holds (1 = strictly increasing in every row, 0 = strictly decreasing,
    about 0.5 = no preference; ties count as not increasing).

    - ``fraction``: over the steps with both keys off the diagonal (j + 1 < i), so the
      self-attention entry, of another scale, does not decide the answer.
    - ``fraction_no_sink``: the same without the steps that start at key 0 (j >= 1), so a
      large attention-sink column cannot decide it.
    - ``fraction_with_diagonal``: every step with j + 1 <= i, the paper's literal range.
    - ``*_sem``: the sampling uncertainty of each fraction. Each step's sign is a Bernoulli
      event with probability Φ(d / se(d)), se(d) = sqrt(sem(i, j)² + sem(i, j + 1)²) from
      score_sem; the SEM is sqrt(Σ p(1 - p)) / n_pairs. It treats the entries as independent
      (entries share sequences, so it is only a guide).
    - ``unresolved``: share of the off-diagonal steps whose |d| < 2 se(d) (sign not resolved by
      the data); ``mean_step``: the mean of d over them (average score gain per key towards i).
    """
    require_columns(scores, SCORE_NEEDS, "scores")
    cols = KEYS + ["query_pos", "key_pos", "score_mean", "score_sem", "seq_len"]
    here = scores.loc[scores["key_pos"] < scores["query_pos"], cols]
    nxt = scores.loc[
        scores["key_pos"] <= scores["query_pos"], KEYS + ["query_pos", "key_pos", "score_mean", "score_sem"]
    ]
    nxt = nxt.assign(key_pos=nxt["key_pos"] - 1).rename(columns={"score_mean": "next_mean", "score_sem": "next_sem"})
    # a step needs both scores: a sliding-window layer has none for keys its window hides (NaN)
    pairs = here.merge(nxt, on=KEYS + ["query_pos", "key_pos"], how="inner").dropna(subset=["score_mean", "next_mean"])
    if pairs.empty:
        raise ValueError("scores table has no pair of adjacent visible keys (seq_len < 2?)")
    step = (pairs["next_mean"] - pairs["score_mean"]).to_numpy(float)
    se = np.sqrt(pairs["score_sem"].to_numpy(float) ** 2 + pairs["next_sem"].to_numpy(float) ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_up = np.where(se > 0, _normal_cdf(step / np.where(se > 0, se, 1.0)), (step > 0).astype(float))
    pairs = pairs.assign(step=step, up=step > 0, p_up=p_up, unresolved=np.abs(step) < 2 * se)
    both_off = pairs["key_pos"] + 1 < pairs["query_pos"]

    parts = [
        _fraction_stats(pairs[both_off], ""),
        _fraction_stats(pairs[both_off & (pairs["key_pos"] >= 1)], "_no_sink"),
        _fraction_stats(pairs, "_with_diagonal"),
    ]
    meta = pairs.groupby(KEYS, sort=True).agg(seq_len=("seq_len", "max"))
    extra = pairs[both_off].groupby(KEYS, sort=True).agg(unresolved=("unresolved", "mean"), mean_step=("step", "mean"))
    out = meta.join(parts).join(extra).reset_index()
    for column in ("n_pairs", "n_pairs_no_sink", "n_pairs_with_diagonal"):
        out[column] = out[column].fillna(0).astype(int)  # seq_len 2-3: some variants have no pair
    return out[INCREASING_COLUMNS]


# ---------------------------------------------------------------- position probe


def probe_summary(probe: pd.DataFrame) -> pd.DataFrame:
    """Per (model, kind, layer): the position probe's held-out MAE, its baseline and their ratio.

    ``ratio`` = mae / mae_baseline, the probe's error relative to always guessing the mean
    training position: 1 = the hidden state tells a linear read-out nothing about the position,
    0 = it gives the position exactly. The paper's claim is that a model without positional
    encoding still knows positions after the first layer (the causal mask writes them in,
    Sections 3-4): the ratio should be about 1 at layer 0 (embeddings; no positional information,
    Section 4.2) and drop below 1 after block 1. Layer k is the output of block k - 1
    (HF hidden_states); NaN where the baseline is 0.
    """
    require_columns(probe, PROBE_NEEDS, "probe")
    out = probe.copy()
    baseline = out["mae_baseline"].astype(float)
    out["ratio"] = out["mae"].astype(float) / baseline.where(baseline > 0)
    for column in ("n_train", "n_test", "seq_len"):
        if column not in out.columns:
            out[column] = np.nan
    return out.sort_values(KEYS, ignore_index=True)[PROBE_SUMMARY_COLUMNS]


# ---------------------------------------------------------------- entry point


def write_summaries(
    scores, probe: pd.DataFrame, out_dir, metadata: dict | None = None, left_fraction: float = LEFT_FRACTION
) -> dict[str, Path]:
    """Write the three summary tables into out_dir (atomically); return {name: path}. `scores` is a DataFrame
    or an io.PartTable, read one (model, kind, layer) at a time: every statistic is per layer, so the tables
    are the same and memory is one layer's."""
    out_dir = Path(out_dir)
    if isinstance(scores, PartTable):
        require_columns(scores, SCORE_NEEDS, "scores")
        nonrelative, increasing = [], []
        for key in scores.keys(KEYS):
            rows = scores.read(dict(zip(KEYS, key)))
            nonrelative.append(nonrelativeness(rows, left_fraction=left_fraction))
            increasing.append(increasing_fraction(rows))
        if not nonrelative:
            raise ValueError("the scores table is empty")
        nonrelative, increasing = pd.concat(nonrelative, ignore_index=True), pd.concat(increasing, ignore_index=True)
    else:
        nonrelative, increasing = nonrelativeness(scores, left_fraction=left_fraction), increasing_fraction(scores)
    frames = {"nonrelativeness": nonrelative, "increasing_fraction": increasing, "position_probe": probe_summary(probe)}
    paths = {}
    for name, frame in frames.items():
        paths[name] = out_dir / SUMMARY_FILES[name]
        meta = {**(metadata or {}), "table": name}
        if name == "nonrelativeness":
            meta["left_fraction"] = left_fraction
        write_parquet(frame, paths[name], meta)
    return paths
