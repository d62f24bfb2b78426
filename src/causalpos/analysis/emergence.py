"""How Figure 3's pattern grows over training: claim 7's metrics at every snapshot of the trained models.

Input: rule emergence's tables (the extraction at each snapshot: scores, intermediates, groups with a `step`
column; the held-out loss per step) and the alpha = 0 simulations. Each step's tables go through the claims
ledger's own machinery (claims.replicates.LedgerInputs: the bootstrap over the extraction's groups, seeded as
the ledger seeds it) and claim 7's metric functions (claims.model_claims), so the row of the last step of `nope`
is the number the ledger reports for the final model. Metrics (the `metric` column):

- ``concordance`` (stages f and i, claim 7a): share of key pairs j < j' < i, keys >= 1, where the nearer key
  is higher; reference: the same of the alpha = 0 simulation's scores at the depth of (i);
- ``nearer_key_advantage`` (stage i): the nearer-key advantage per score SD, keys >= 1 (7b's strength);
  reference: the simulation's;
- ``strength_ratio`` (stage i, claim 7b): the two above divided, model over simulation; reference 1;
- ``nonrelative_amplitude`` (stage "scores", every layer): sqrt of the bias-corrected share of the score
  variance that i - j does not explain, keys >= 1 (claims 4a / 8a's amplitude); reference: the simulation's
  at the same layer (none past its depth);
- ``heldout_loss``: the held-out loss at that step (no uncertainty: the same held-out blocks every time).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from causalpos.analysis.claims.model_claims import alpha0_reference, stage_concordance, standardised_advantage
from causalpos.analysis.claims.replicates import LedgerInputs, amplitude, estimate
from causalpos.analysis.triangles import nonrelative_share, safe_ratio
from causalpos.catalogue.tables import EMERGENCE_COLUMNS, STEP_COLUMNS

METRICS = ("concordance", "nearer_key_advantage", "strength_ratio", "nonrelative_amplitude", "heldout_loss")


def _row(model, step, tokens, layer, stage, metric, values, reference=None) -> dict:
    value, se = estimate(values) if values is not None else (math.nan, math.nan)
    ref, ref_se = estimate(reference) if reference is not None else (math.nan, math.nan)
    return {
        "model": model,
        "step": int(step),
        "tokens_seen": int(tokens),
        "layer": layer,
        "stage": stage,
        "metric": metric,
        "value": value,
        "uncertainty": se,
        "reference": ref,
        "reference_uncertainty": ref_se,
    }


def step_rows(data: LedgerInputs, model: str, step: int, tokens: int) -> list[dict]:
    """The rows of one model at one step from that step's tables (see the module docstring)."""
    rows = []
    inner, inner_layer = data.intermediate_field(model, "i")
    size = inner.size if inner is not None else None
    if size is None and data.score_layers(model):
        size = data.score_field(model, data.score_layers(model)[0]).size
    found = alpha0_reference(data, size, inner_layer if inner is not None else 1) if size else None
    sim = found[2] if found else None
    for stage in ("f", "i"):
        field, layer = data.intermediate_field(model, stage)
        if field is not None:
            rows.append(
                _row(
                    model,
                    step,
                    tokens,
                    layer,
                    stage,
                    "concordance",
                    stage_concordance(field),
                    stage_concordance(sim) if sim is not None else None,
                )
            )
    if inner is not None:
        strength = standardised_advantage(inner)
        reference = standardised_advantage(sim) if sim is not None else None
        rows.append(_row(model, step, tokens, inner_layer, "i", "nearer_key_advantage", strength, reference))
        ratio = safe_ratio(strength, reference) if reference is not None else None
        rows.append(
            _row(
                model,
                step,
                tokens,
                inner_layer,
                "i",
                "strength_ratio",
                ratio,
                np.ones(1) if reference is not None else None,
            )
        )
    for layer in data.score_layers(model):
        field = data.score_field(model, layer)
        ref = None
        if found is not None and layer < int(data.params.loc[found[0], "n_layers"]):
            sim_layer = data.sim_field(found[0], layer)
            ref = amplitude(nonrelative_share(sim_layer.x, sim_layer.size, 1))
        rows.append(
            _row(
                model,
                step,
                tokens,
                layer,
                "scores",
                "nonrelative_amplitude",
                amplitude(nonrelative_share(field.x, field.size, 1)),
                ref,
            )
        )
    return rows


def _at_step(frame: pd.DataFrame | None, step: int) -> pd.DataFrame | None:
    if frame is None:
        return None
    return frame.loc[frame["step"] == step].drop(columns=STEP_COLUMNS)


def emergence_frame(
    scores: pd.DataFrame,
    intermediates: pd.DataFrame | None,
    groups: pd.DataFrame | None,
    losses: pd.DataFrame | None,
    simulations: pd.DataFrame | None,
    n_bootstrap: int = 200,
    seed: int = 0,
    simulation_groups: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The emergence table (EMERGENCE_COLUMNS), one row per model, step, layer, stage and metric."""
    rows = []
    for (model, step), at in scores.groupby(["model", "step"], sort=True):
        tokens = int(at["tokens_seen"].iloc[0])
        pick = {
            name: _at_step(frame[frame["model"] == model], step) if frame is not None else None
            for name, frame in (("intermediates", intermediates), ("groups", groups))
        }
        data = LedgerInputs(
            simulations,
            None,
            at.drop(columns=STEP_COLUMNS),
            pick["intermediates"],
            pick["groups"],
            int(n_bootstrap),
            int(seed),
            simulation_groups,
        )
        rows += step_rows(data, str(model), int(step), tokens)
    for _, loss in (losses if losses is not None else pd.DataFrame(columns=["model"])).iterrows():
        rows.append(
            _row(
                loss["model"],
                loss["step"],
                loss["tokens_seen"],
                None,
                "",
                "heldout_loss",
                np.array([loss["heldout_loss"]]),
            )
        )
    frame = pd.DataFrame(rows, columns=EMERGENCE_COLUMNS)
    frame["layer"] = frame["layer"].astype("Int64")
    order = {metric: i for i, metric in enumerate(METRICS)}
    frame = frame.sort_values(
        ["model", "metric", "stage", "layer", "step"],
        key=lambda c: c.map(order) if c.name == "metric" else c,
        ignore_index=True,
    )
    return frame
