"""Sliding windows in a pretrained LLM against the large-d recursion of its own stack (issue 25).

Gemma-3 alternates sliding-window layers (a query sees its last `window` keys) with global ones. Once a query
is `window` positions in, every sliding layer shows it the same number of keys, so one may guess that its
non-relative pattern fades there. The recursion (simulation.recursion) says what the parameter-free decoder
does on the model's own stack: which layers lose their pattern past the window and which do not. This module
measures it the same way on the model and on the recursion.

Regions. For a stack whose sliding layers have window w: "before", the queries 0 <= i < w; "after", the queries
w <= i < 2w; in both the bands 1 <= i - j <= w - 1 and the keys j >= 1 (the attention-sink key 0 left out, as
claim 8 does). Every layer, sliding or global, is measured over these same pairs, which every layer sees.
Amplitude: sqrt(Var(p) / Var(s)) over the region's pairs, p = s minus the mean of its band within the region
(claim 4a's non-relative amplitude, restricted to the region); "change" = after - before. A measured table
with S < 2w gives the queries it has (the columns query_from, query_to say which); S <= w has no "after".

Uncertainty: the extraction's bootstrap over groups of sequences (replicates.LedgerInputs.score_field, one set
of draws per model, shared by its layers, so a change and a median over layers are paired), bias-corrected
like claim 8a. The recursion (alpha = 0, l2, RoPE with each layer's base, the model's head dimension as d) is
deterministic; it runs at S = max(S measured, 2w), and since the decoder is causal its first S measured
positions are what it gives at S measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from causalpos.analysis.claims.replicates import amplitude, estimate
from causalpos.analysis.triangles import safe_ratio
from causalpos.catalogue.models import DIFFERENCE
from causalpos.catalogue.tables import WINDOW_TEST_COLUMNS
from causalpos.tril import packed_pairs

SLIDING, GLOBAL = "sliding", "global"
REGIONS = ("before", "after", "change")


@dataclass(frozen=True)
class AttentionStack:
    """What the recursion needs of a model's attention: per layer its window (None: global) and RoPE base."""

    windows: tuple
    rope_thetas: tuple
    head_dim: int

    @property
    def window(self) -> int:
        """The sliding layers' window (the one window the regions are defined by)."""
        return max(w for w in self.windows if w is not None)

    def layer_type(self, layer: int) -> str:
        return SLIDING if self.windows[layer] is not None else GLOBAL


def _theta(parameters, default):
    if isinstance(parameters, dict) and "rope_theta" in parameters:
        return float(parameters["rope_theta"])
    return default


def attention_stack(config: dict) -> AttentionStack | None:
    """The stack of a transformers config (its to_dict() or config.json), or None when no layer has a sliding
    window. Reads `layer_types` ("sliding_attention" / "full_attention") or, in older configs, every
    `sliding_window_pattern`-th layer global; `sliding_window`; the RoPE bases per layer type from
    `rope_parameters` (transformers 5) or `rope_theta` and `rope_local_base_freq` (Gemma-3 in transformers 4)."""
    config = config.get("text_config") or config  # a multimodal model's language part
    if config.get("use_sliding_window") is False or not config.get("sliding_window"):
        return None
    n_layers = int(config["num_hidden_layers"])
    types = config.get("layer_types")
    if types is None:
        pattern = config.get("sliding_window_pattern") or config.get("_sliding_window_pattern")
        types = [
            "full_attention" if pattern and (i + 1) % int(pattern) == 0 else "sliding_attention"
            for i in range(n_layers)
        ]
    if len(types) != n_layers:
        raise ValueError(f"config: {len(types)} layer_types for {n_layers} layers")
    if "sliding_attention" not in types:
        return None
    window = int(config["sliding_window"])
    rope = config.get("rope_parameters") or {}
    base = _theta(rope, float(config.get("rope_theta") or 10000.0))
    local = float(config.get("rope_local_base_freq") or base)
    thetas = {
        "full_attention": _theta(rope.get("full_attention"), base),
        "sliding_attention": _theta(rope.get("sliding_attention"), local),
    }
    head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // int(config["num_attention_heads"]))
    return AttentionStack(
        tuple(window if t == "sliding_attention" else None for t in types),
        tuple(thetas.get(t, base) for t in types),
        head_dim,
    )


def query_ranges(window: int, seq_len: int) -> dict:
    """{region: (first query, end query)} measurable at seq_len: before [0, min(w, S)), after [w, min(2w, S));
    None where the table has no such query."""
    before = (0, min(window, seq_len))
    after = (window, min(2 * window, seq_len)) if seq_len > window else None
    return {"before": before, "after": after}


def region_pairs(size: int, window: int, queries: tuple) -> np.ndarray:
    """Packed positions of the region's pairs: queries in [first, end), bands 1 .. window - 1, keys >= 1."""
    query, key = packed_pairs(size)
    band = query - key
    keep = (band >= 1) & (band < window) & (key >= 1) & (query >= queries[0]) & (query < queries[1])
    return np.flatnonzero(keep)


def region_share(x: np.ndarray, size: int, positions: np.ndarray) -> np.ndarray:
    """Var(s minus its band mean within the region) / Var(s) over the region's pairs: [N] for x [P, N]."""
    query, key = packed_pairs(size)
    band = (query - key)[positions]
    order = np.argsort(band, kind="stable")
    s = x[positions[order]]
    _, starts, counts = np.unique(band[order], return_index=True, return_counts=True)
    means = np.add.reduceat(s, starts, axis=0) / counts[:, None]
    within = ((s - np.repeat(means, counts, axis=0)) ** 2).mean(axis=0)
    return safe_ratio(within, s.var(axis=0))


def predicted_scores(stack: AttentionStack, seq_len: int) -> np.ndarray:
    """[layer, query, key] scores of the parameter-free decoder (alpha 0, l2, RoPE, causal, residual) on the
    stack, in the large-d limit, at seq_len positions."""
    from causalpos.simulation.recursion import recursion
    from causalpos.simulation.variant import Variant

    variant = Variant(
        norm="l2",
        pe="rope",
        alpha=0.0,
        d=stack.head_dim,
        seq_len=seq_len,
        n_layers=len(stack.windows),
        mask="causal",
        residual=True,
    )
    return recursion(variant, window=list(stack.windows), rope_theta=list(stack.rope_thetas)).scores


def predicted_amplitude(scores: np.ndarray, window: int, queries: tuple) -> float:
    """The region's amplitude of one layer's [S, S] predicted scores."""
    size = scores.shape[0]
    packed = scores[packed_pairs(size)][:, None]
    return float(np.sqrt(np.clip(region_share(packed, size, region_pairs(size, window, queries)), 0, None))[0])


def layer_rows(field, layer: int, stack: AttentionStack, predicted: np.ndarray) -> list[dict]:
    """The rows of one layer: before, after (where measured) and change, measured on `field` (a
    replicates.Field of the layer's scores) and predicted on `predicted` ([S', S'] recursion scores)."""
    window, size = stack.window, field.size
    common = {
        "layer": layer,
        "layer_type": stack.layer_type(layer),
        "window": window,
        "rope_theta": stack.rope_thetas[layer],
        "predicted_seq_len": predicted.shape[0],
    }
    ranges = query_ranges(window, size)
    rows, values, forecasts = [], {}, {}
    for region in ("before", "after"):
        queries = ranges[region]
        if queries is None:  # nothing measured: the recursion's value over the whole region
            full = (window, 2 * window)
            rows.append(
                {
                    **common,
                    "region": region,
                    "query_from": full[0],
                    "query_to": full[1] - 1,
                    "n_pairs": 0,
                    "measured": np.nan,
                    "uncertainty": np.nan,
                    "predicted": predicted_amplitude(predicted, window, full),
                    "replicates": [],
                }
            )
            continue
        positions = region_pairs(size, window, queries)
        values[region] = amplitude(region_share(field.x, size, positions))
        forecasts[region] = predicted_amplitude(predicted, window, queries)
        value, se = estimate(values[region])
        rows.append(
            {
                **common,
                "region": region,
                "query_from": queries[0],
                "query_to": queries[1] - 1,
                "n_pairs": int(positions.size),
                "measured": value,
                "uncertainty": se,
                "predicted": forecasts[region],
                "replicates": values[region][1:].tolist(),
            }
        )
    if len(values) == 2:
        change = values["after"] - values["before"]
        value, se = estimate(change)
        rows.append(
            {
                **common,
                "region": "change",
                "query_from": np.nan,
                "query_to": np.nan,
                "n_pairs": 0,
                "measured": value,
                "uncertainty": se,
                "predicted": forecasts["after"] - forecasts["before"],
                "replicates": change[1:].tolist(),
            }
        )
    return rows


def lifted_stack(stack: AttentionStack) -> AttentionStack:
    """The stack with every window lifted, each layer keeping its RoPE base: the recursion of target
    window_control's lifted arm."""
    return AttentionStack(tuple(None for _ in stack.windows), stack.rope_thetas, stack.head_dim)


def difference_rows(windowed: list[dict], lifted: list[dict]) -> list[dict]:
    """The window's own effect at one layer: the `change` row of the windowed arm minus the lifted arm's, measured
    (replicate by replicate: the arms' bootstraps draw the same groups of the same sequences, so the difference
    is paired) and predicted; no row where either arm has no change."""
    changes = [next((r for r in rows if r["region"] == "change"), None) for rows in (windowed, lifted)]
    if any(c is None for c in changes):
        return []
    (w, lift) = changes
    values = np.r_[w["measured"], w["replicates"]] - np.r_[lift["measured"], lift["replicates"]]
    value, se = estimate(values)
    return [
        {
            **w,
            "arm": DIFFERENCE,
            "measured": value,
            "uncertainty": se,
            "predicted": w["predicted"] - lift["predicted"],
            "replicates": values[1:].tolist(),
        }
    ]


def window_frame(rows: list[dict]) -> pd.DataFrame:
    """The window test's table (results/summary/window_test.parquet) from rows with model, source, seq_len and
    n_sequences added; an empty table with the columns where no model has sliding windows."""
    frame = pd.DataFrame(rows, columns=WINDOW_TEST_COLUMNS)
    for column in ("query_from", "query_to"):
        frame[column] = pd.array(frame[column], dtype="Int64")
    return frame
