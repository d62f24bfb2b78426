"""The pattern ablation (issue 27): what is subtracted from a layer's attention logits, and the table it makes.

Section 5.2 ends on a conjecture: "Since this pattern non-uniformly emphasizes the first few keys, it may
potentially negatively affect length generalization." The ablation tests it by taking the pattern out at
inference (models.intervention runs a model so) and measuring the held-out loss.

What is subtracted. M_l[q, k] is layer l's mean score map: the head-averaged attention logit (q.k times the
model's own scaling, after RoPE where the model has it: what the extraction records, models.recorder),
averaged over `estimate` sequences of the evaluation length S, with the model unmodified. Its bands are the
diagonals q - k = d. Key 0, the attention sink that the ledger sets aside (claims.model_claims.KEYS_FROM), is
kept out of the bands: their means are over keys >= 1, and nothing is subtracted at key 0, except in
condition "pattern_sink". Each condition subtracts a bias B_l from the logits of every head of layer l at
every pair the layer sees (k <= q, inside any sliding window), before the softmax:

- "none": B = 0, the model as it is;
- "pattern": the non-relative part, B[q, k] = M[q, k] - (mean of M over band q - k, keys >= 1), keys >= 1;
- "shuffled", the control: the same values as "pattern", permuted at random within each band (seeded). Every
  band keeps its values (so its size, and a band mean of 0) and loses their order along the band: the same
  amount of change without the structure of the pattern;
- "relative": the relative part alone, B[q, k] = that band mean, keys >= 1 (the other half of M);
- "pattern_sink": the non-relative part over every key, key 0 included (bands over all keys): the literal
  "map minus its diagonal means", the sink taken out too.

The map is estimated at each evaluation length, so every condition is defined at any S, for NoPE and RoPE
alike (for RoPE, M holds RoPE's relative part as well, and "relative" removes it). All biases come from the
unmodified model: layer l's bias is not re-estimated after the layers below it changed. Pairs a layer
never sees (a sliding window's) are NaN in M and get no bias.

The table (ABLATION_COLUMNS, one row per model, seed, factor and condition; `ablation_rows` makes them
from per-sequence losses): `loss` (mean over the evaluation sequences of each sequence's mean next-token
loss) and `loss_sem` (standard error over those sequences); `delta` = loss minus condition "none"'s, paired
sequence by sequence (`delta_sem`); `gap` = loss at factor k minus at factor 1 under the same condition,
each sequence of k x the training length paired with the k blocks it is made of (0 at factor 1, the only
factor of a pretrained model); `effect` = gap minus the control's gap, paired the same
way (NaN at factor 1): the statistic of the new claim (claim 11) for condition "pattern"; `bias_rms` = the
root mean square of the bias over the pairs it applies to and the layers (equal for "pattern" and
"shuffled" by construction). `seed` is the training seed of a trained model, -1 for a pretrained one.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from causalpos.catalogue.tables import ABLATION_COLUMNS
from causalpos.tril import packed_pairs, seq_len_of_packed

CONDITIONS = ("none", "pattern", "shuffled", "relative", "pattern_sink")
TESTED, CONTROL = "pattern", "shuffled"  # claim 11 compares these two
KEYS_FROM = 1  # the bands leave key 0 (the attention sink) out, as the ledger does
PRETRAINED_SEED = -1  # the `seed` of a pretrained model's rows: it has no training seed of ours


def band_split(mean: np.ndarray, keys_from: int = KEYS_FROM) -> tuple[np.ndarray, np.ndarray]:
    """(relative, non-relative) parts of packed mean maps [layers, pairs]: the band mean (over the visible pairs
    of each band with key >= keys_from) and the map minus it. 0 at keys below keys_from and at NaN pairs."""
    mean = np.asarray(mean, dtype=np.float64)
    query, key = packed_pairs(seq_len_of_packed(mean.shape[-1]))
    band = query - key
    inside = key >= keys_from
    relative = np.zeros_like(mean)
    for layer, values in enumerate(mean):
        use = inside & np.isfinite(values)
        sums = np.bincount(band[use], weights=values[use], minlength=len(values))
        counts = np.bincount(band[use], minlength=len(values))
        band_mean = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
        relative[layer, use] = band_mean[band[use]]
    nonrelative = np.where(np.isfinite(mean) & inside, mean - relative, 0.0)
    return relative, nonrelative


def shuffle_within_bands(
    part: np.ndarray, visible: np.ndarray, rng: np.random.Generator, keys_from: int = KEYS_FROM
) -> np.ndarray:
    """`part` [layers, pairs] with its values at the `visible` pairs (bool, same shape) of key >= keys_from
    permuted at random within each band q - k; the other pairs as they are."""
    query, key = packed_pairs(seq_len_of_packed(part.shape[-1]))
    band = query - key
    out = np.array(part, dtype=np.float64)
    for layer in range(part.shape[0]):
        positions = np.flatnonzero(visible[layer] & (key >= keys_from))
        grouped = positions[np.argsort(band[positions], kind="stable")]
        shuffled = positions[np.lexsort((rng.random(len(positions)), band[positions]))]
        out[layer, grouped] = part[layer, shuffled]
    return out


def condition_biases(mean: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Every condition's bias from the packed mean maps [layers, pairs] (NaN where a layer hides a pair): the
    packed values subtracted from the logits, float64, 0 where nothing is subtracted."""
    visible = np.isfinite(mean)
    relative, nonrelative = band_split(mean)
    _, with_sink = band_split(mean, keys_from=0)
    return {
        "none": np.zeros_like(relative),
        "pattern": nonrelative,
        "shuffled": shuffle_within_bands(nonrelative, visible, np.random.default_rng(seed)),
        "relative": relative,
        "pattern_sink": with_sink,
    }


def bias_rms(bias: np.ndarray, mean: np.ndarray, keys_from: int = KEYS_FROM) -> float:
    """RMS of a bias over the pairs the pattern conditions change: visible, key >= keys_from, every layer."""
    _, key = packed_pairs(seq_len_of_packed(bias.shape[-1]))
    use = np.isfinite(mean) & (key >= keys_from)
    return float(np.sqrt(np.mean(np.square(bias[use])))) if use.any() else math.nan


def square(packed: np.ndarray) -> np.ndarray:
    """Packed [layers, pairs] as [layers, S, S], 0 above the diagonal."""
    seq_len = seq_len_of_packed(packed.shape[-1])
    query, key = packed_pairs(seq_len)
    out = np.zeros((packed.shape[0], seq_len, seq_len), dtype=packed.dtype)
    out[:, query, key] = packed
    return out


def _mean_sem(values: np.ndarray) -> tuple[float, float]:
    n = len(values)
    sem = float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return float(values.mean()), sem


def block_means(per_block: np.ndarray, factor: int) -> np.ndarray:
    """Factor 1's per-sequence losses averaged over the `factor` consecutive blocks each longer sequence is made
    of: the pairing of `gap`."""
    usable = len(per_block) // factor * factor
    return np.asarray(per_block[:usable]).reshape(-1, factor).mean(axis=1)


def ablation_rows(
    losses: dict, biases_rms: dict, seq_lens: dict, model: str, kind: str, seed: int, n_estimate: int
) -> pd.DataFrame:
    """ABLATION_COLUMNS from per-sequence losses: `losses[(factor, condition)]` the mean next-token loss of each
    evaluation sequence (the same sequences under every condition; at factor k, sequence i made of the blocks
    k i .. k i + k - 1 of factor 1's), `biases_rms[(factor, condition)]`, `seq_lens[factor]`."""
    factors = sorted({factor for factor, _ in losses})
    rows = []
    for factor in factors:
        for condition in CONDITIONS:
            if (factor, condition) not in losses:
                continue
            x = np.asarray(losses[(factor, condition)], dtype=np.float64)
            row = {
                "model": model,
                "kind": kind,
                "seed": int(seed),
                "factor": int(factor),
                "seq_len": int(seq_lens[factor]),
                "condition": condition,
                "n_sequences": len(x),
                "n_estimate": int(n_estimate),
                "bias_rms": float(biases_rms[(factor, condition)]),
            }
            row["loss"], row["loss_sem"] = _mean_sem(x)
            row["delta"], row["delta_sem"] = _mean_sem(x - np.asarray(losses[(factor, "none")], dtype=np.float64))
            gap = effect = None
            if (1, condition) in losses and len(losses[(1, condition)]) >= factor * len(x):
                gap = x - block_means(np.asarray(losses[(1, condition)], dtype=np.float64), factor)[: len(x)]
                if factor != 1 and (factor, CONTROL) in losses:
                    control = np.asarray(losses[(factor, CONTROL)], dtype=np.float64)
                    effect = gap - (
                        control - block_means(np.asarray(losses[(1, CONTROL)], dtype=np.float64), factor)[: len(x)]
                    )
            row["gap"], row["gap_sem"] = _mean_sem(gap) if gap is not None else (math.nan, math.nan)
            row["effect"], row["effect_sem"] = _mean_sem(effect) if effect is not None else (math.nan, math.nan)
            rows.append(row)
    return pd.DataFrame(rows, columns=ABLATION_COLUMNS)
