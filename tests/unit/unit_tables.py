"""Tiny extraction tables for the unit tests, in the extraction's columns (catalogue.tables): a model's scores,
groups (per-group sums, as the extraction writes them), per-head scores and probe, with a non-relative pattern
that grows with the layer so that every statistic has something to measure."""

from __future__ import annotations

import numpy as np
import pandas as pd

from causalpos.catalogue.tables import GROUP_COLUMNS, HEAD_SCORE_COLUMNS, PROBE_COLUMNS, SCORE_COLUMNS
from causalpos.tril import packed_pairs


def band_centred(q: np.ndarray, k: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each score minus the mean of its band q - k (the tables' score_diagnorm)."""
    out = values.astype(float).copy()
    for offset in np.unique(q - k):
        band = (q - k) == offset
        out[band] -= values[band].mean()
    return out


def model_tables(
    model: str = "llm",
    kind: str = "pretrained",
    layers: int = 3,
    size: int = 8,
    heads: int = 2,
    n_groups: int = 6,
    per_group: int = 2,
    seed: int = 0,
) -> dict[str, pd.DataFrame]:
    """{"scores", "groups", "head_scores", "probe"} of one model."""
    rng = np.random.default_rng(seed)
    q, k = packed_pairs(size)
    n = n_groups * per_group
    scores, groups, per_head = [], [], []
    for layer in range(layers):
        pattern = -0.3 * (q - k) + (0.1 + 0.4 * layer) * np.log1p(k)
        head_values = pattern + rng.normal(0, 0.3, size=(heads, n, q.size))
        per_sequence = head_values.mean(axis=0)
        for g in range(n_groups):
            block = per_sequence[g * per_group : (g + 1) * per_group]
            groups.append(
                {
                    "model": model,
                    "kind": kind,
                    "quantity": "scores",
                    "stage": "",
                    "layer": layer,
                    "group": g,
                    "n_sequences": per_group,
                    "seq_len": size,
                    "sums": block.sum(axis=0).astype(np.float32),
                }
            )
        mean = per_sequence.mean(axis=0)
        scores.append(
            pd.DataFrame(
                {
                    "model": model,
                    "kind": kind,
                    "layer": layer,
                    "query_pos": q,
                    "key_pos": k,
                    "score_mean": mean,
                    "score_sem": per_sequence.std(axis=0, ddof=1) / np.sqrt(n),
                    "score_diagnorm": band_centred(q, k, mean),
                    "n_sequences": n,
                    "seq_len": size,
                }
            )
        )
        per_head += [
            pd.DataFrame(
                {
                    "model": model,
                    "kind": kind,
                    "layer": layer,
                    "head": h,
                    "query_pos": q,
                    "key_pos": k,
                    "score_mean": head_values[h].mean(axis=0),
                    "n_sequences": n,
                    "seq_len": size,
                }
            )
            for h in range(heads)
        ]
    probe = pd.DataFrame(
        [
            {
                "model": model,
                "kind": kind,
                "layer": layer,
                "mae": size / 4 / (1 + layer),
                "mae_baseline": size / 4,
                "n_train": 40,
                "n_test": 16,
                "seq_len": size,
            }
            for layer in range(layers + 1)
        ]
    )
    return {
        "scores": pd.concat(scores, ignore_index=True)[SCORE_COLUMNS],
        "groups": pd.DataFrame(groups)[GROUP_COLUMNS],
        "head_scores": pd.concat(per_head, ignore_index=True)[HEAD_SCORE_COLUMNS],
        "probe": probe[PROBE_COLUMNS],
    }


def two_models() -> dict[str, pd.DataFrame]:
    """The tables of a trained model (nope) and a pretrained one (llm), concatenated."""
    parts = [model_tables("nope", "trained", layers=2, seed=1), model_tables("llm", "pretrained", seed=2)]
    return {name: pd.concat([p[name] for p in parts], ignore_index=True) for name in parts[0]}
