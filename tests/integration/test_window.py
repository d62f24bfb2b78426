"""The Monte Carlo engine's sliding window (Variant.window: query i sees keys i - window < j <= i).

What is checked, and against what:
- the windowed engine against the large-d recursion (causalpos.simulation.recursion, tested on its own in
  tests/integration/test_recursion.py) at d = 1024: entry by entry |MC - recursion| <= Z SE + A / d with Z = 5 and A = 5 for
  the scores, 0.5 for the probabilities, the tolerance of tests/integration/test_recursion.py (a 5-sigma excursion of a
  correct prediction has a probability below 1e-4 over a few hundred entries; A is twice the largest O(1/d)
  coefficient the theory predicts, and each test checks d |correction| <= A / 2 for its own variant). The
  unwindowed recursion, and the recursion with a window one key wider, fail the same check;
- the CPU kernel against the torch decoder, sample by sample on the same inputs (the tolerance of
  tests/integration/test_simulate.py's backend comparison: float32 sums over 256 samples), and the unwindowed decoder
  outside it; both backends' full runs agree statistically;
- window = 1, where the closed form is known: every query sees itself only, P = I, and with unit inputs and
  the residual X' = Y + X = 2X, so every layer's scores are layer 1's;
- window None: the numbers of the engine before the window existed (commit 4545842, printed by that code with
  the same seeds), and a window of seq_len or more is the unwindowed variant;
- the tables: the pairs a window hides are absent from the simulation table and NaN in the groups table; the
  `window` column is a nullable integer;
- refused settings are named in the error.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from causalpos.io import read_table, write_parquet
from causalpos.simulation import cpu_kernel as kern
from causalpos.simulation import recursion as rec
from causalpos.simulation.engine import additive_mask, groups_frame, result_frame, run_layers, simulate, visible
from causalpos.simulation.sampling import rope_tables
from causalpos.simulation.variant import Variant
from causalpos.catalogue.tables import SIMULATION_COLUMNS, SIMULATION_GROUP_COLUMNS
from causalpos.tril import packed_pairs, packed_size

Z, A, A_PROB = 5.0, 5.0, 0.5
LARGE_D, LARGE_N = 1024, 4000


def window_band(n: int, window: int) -> np.ndarray:
    """[n, n] bool: i - window < j <= i, written out here (not the engine's `visible`)."""
    offset = np.arange(n)[:, None] - np.arange(n)[None, :]
    return (offset >= 0) & (offset < window)


def excess(mc_mean, mc_sem, predicted, shown, allowance) -> float:
    """The largest |MC - predicted| - (Z SE + allowance) over the shown entries of [layer, n, n]."""
    gap = np.abs(mc_mean - predicted) - Z * mc_sem - allowance
    return float(np.where(shown, gap, -np.inf).max())


# ---------------------------------------------------------------- against the large-d recursion

LARGE_D_CASES = {
    "l2_alpha0_w4": dict(window=4),
    "rope_w4": dict(window=4, pe="rope"),
    "l2_alpha0.2_w3": dict(window=3, alpha=0.2),
    "layernorm_d_nores_w5": dict(window=5, norm="layernorm", scale="d", residual=False),
}


@pytest.mark.parametrize("name", list(LARGE_D_CASES))
def test_windowed_engine_matches_the_recursion_at_large_d(name):
    """Engine (CPU kernel, d = 1024, N = 4,000, 12 positions, 4 layers) with a window against the recursion with
    the same window: every visible entry within Z SE + A / d. The unwindowed recursion and one with a window
    one key wider are outside that tolerance: the check sees the window."""
    v = Variant(seq_len=12, n_layers=4, d=LARGE_D, n_samples=LARGE_N, **LARGE_D_CASES[name])
    w = v.window
    score_corr, prob_corr = rec.finite_d_correction(v, window=w)  # the O(1/d) term A / d must cover
    assert LARGE_D * np.abs(score_corr).max() <= A / 2 and LARGE_D * np.abs(prob_corr).max() <= A_PROB / 2
    mc = simulate(v, device="cpu")
    result = rec.recursion(v, window=w)
    shown = np.broadcast_to(window_band(12, w), mc.score_mean.shape)
    assert np.array_equal(result.visible[0], shown[0])
    assert excess(mc.score_mean, mc.score_sem, result.scores, shown, A / LARGE_D) <= 0, "scores"
    assert excess(mc.prob_mean, mc.prob_sem, result.probs, shown, A_PROB / LARGE_D) <= 0, "probabilities"
    for wrong in (None, w + 1):
        other = rec.recursion(dataclasses.replace(v, window=None), window=wrong)  # None: the unwindowed decoder
        worst = max(
            excess(mc.score_mean, mc.score_sem, other.scores, shown, A / LARGE_D),
            excess(mc.prob_mean, mc.prob_sem, other.probs, shown, A_PROB / LARGE_D),
        )
        assert worst > 0, f"the recursion with window {wrong} passed the check"


# ---------------------------------------------------------------- the two backends

KERNEL_CASES = {
    "l2_reduced": dict(window=4, sampler="exact"),
    "l2_reduced_shared": dict(window=5, alpha=0.3, sampler="exact"),
    "official": dict(window=3, alpha=0.3),
    "rope": dict(window=4, pe="rope", alpha=0.5),
    "layernorm_sqrtd": dict(window=6, norm="layernorm", scale="sqrt_d"),
    "nores_odd": dict(window=2, residual=False, seq_len=13),
    "window1": dict(window=1, pe="rope"),
}


@pytest.mark.parametrize("name", list(KERNEL_CASES))
def test_cpu_kernel_equals_torch_decoder_with_a_window(name):
    """Sample by sample on the kernel's own inputs: the kernel's block sums of S, S^2, P, P^2 equal those of the
    torch decoder (`run_layers` with the windowed additive mask) on every pair of the lower triangle, hidden
    pairs included (their scores are summed, their probabilities are 0). The torch decoder with the plain
    causal mask is outside the same tolerance."""
    v = Variant(**{**dict(d=32, seq_len=11, n_layers=3, n_samples=256), **KERNEL_CASES[name]})
    n = v.seq_len
    plan = kern.KernelPlan(v, v.resolved_sampler)
    x = torch.from_numpy(plan.inputs(0, 256))
    sums = plan.run_block(0, 256, np.zeros((v.n_layers, 2, n, plan.n_pad), np.float32))
    rope = rope_tables(n, v.d, v.rope_theta) if v.pe == "rope" else None
    lower = np.tril(np.ones((n, n), dtype=bool))
    mask = additive_mask(v, "cpu")
    assert torch.equal(torch.isfinite(mask), torch.from_numpy(window_band(n, v.window)))
    for layer, (scores, probs) in enumerate(run_layers(x, v, mask, rope)):
        assert np.all(probs.numpy()[:, ~window_band(n, v.window)] == 0)
        for slot, values in enumerate((scores, scores**2, probs, probs**2)):
            np.testing.assert_allclose(
                sums[layer, slot, :, :n][lower],
                values.double().sum(0).numpy()[lower],
                rtol=2e-5,
                atol=2e-4,
                err_msg=f"layer {layer} slot {slot}",
            )
    causal = torch.full((n, n), float("-inf")).triu_(1)
    *_, (_, unwindowed) = run_layers(x, v, causal, rope)  # the last layer's probabilities, no window
    gap = np.abs(sums[-1, 2, :, :n] - unwindowed.double().sum(0).numpy())[lower]
    assert gap.max() > 100 * 2e-4


def test_backends_agree_statistically_with_a_window():
    """Full runs, each backend with its own random stream: differences of the means over the visible entries
    scatter like N(0, 1) in units of their combined standard error."""
    v = Variant(d=32, seq_len=10, n_layers=3, n_samples=4000, window=3, alpha=0.2, pe="rope")
    a, b = simulate(v, backend="numba"), simulate(v, backend="torch")
    shown = window_band(10, 3) & ~np.eye(10, dtype=bool)  # the diagonal score is 1 in every sample
    zs = []
    for mean, sem in (("score_mean", "score_sem"), ("prob_mean", "prob_sem")):
        se = np.hypot(getattr(a, sem), getattr(b, sem))[:, shown]
        zs.append(((getattr(a, mean) - getattr(b, mean))[:, shown] / se).ravel())
    z = np.concatenate(zs)
    assert np.abs(z).max() < 5.0 and 0.6 < z.std() < 1.4
    for r in (a, b):  # hidden keys: probability exactly 0; every row's visible probabilities sum to 1
        assert np.all(r.prob_mean[:, ~window_band(10, 3)] == 0) and np.all(r.prob_sem[:, ~window_band(10, 3)] == 0)
        np.testing.assert_allclose(r.prob_mean.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_window_one_keeps_every_layer_at_the_input_gram(backend):
    """window = 1: each query sees only itself, so P = I; with unit-norm inputs and the residual, X' = Y + X = 2X
    (up to the float32 norm), so every layer's scores equal layer 1's, sample by sample, RoPE or not."""
    for pe in ("none", "rope"):
        v = Variant(d=16, seq_len=7, n_layers=3, n_samples=300, window=1, pe=pe, alpha=0.2)
        r = simulate(v, backend=backend)
        np.testing.assert_array_equal(r.prob_mean, np.broadcast_to(np.eye(7), r.prob_mean.shape))
        for layer in (1, 2):
            np.testing.assert_allclose(r.score_mean[layer], r.score_mean[0], rtol=0, atol=2e-6)
        unwindowed = simulate(dataclasses.replace(v, window=None), backend=backend)
        assert np.abs(unwindowed.score_mean[2] - unwindowed.score_mean[0])[np.tril_indices(7, -1)].max() > 1e-2


# ---------------------------------------------------------------- window None: the engine as it was

# score_mean[2, 5] and prob_mean[2, 5] (layer 3, query 5) of Variant(d=16, seq_len=6, n_layers=3, n_samples=512,
# seed=3, **kwargs), printed by the engine of commit 4545842 (before the window) on each backend (CPU). Since issue 42
# the numba kernel draws its own normals (another stream of the same law): its numbers are held to these in
# distribution (SAME_STREAM), never to numbers the new kernel printed.
BEFORE = {
    ("numba", "l2"): (
        [0.1951481534, 0.2109711538, 0.2222638558, 0.2437818616, 0.249433786, 1.0000000003],
        [0.136363359, 0.1381960113, 0.1397386769, 0.1429396846, 0.1440066534, 0.2987556158],
    ),
    ("numba", "rope"): (
        [0.3325790372, 0.3496137278, 0.3826667707, 0.4657932308, 0.5508843462, 1.0000000016],
        [0.1358969696, 0.1378505118, 0.1423325963, 0.1542983618, 0.16797154, 0.261650019],
    ),
    ("torch", "l2"): (
        [0.1741430279, 0.1894900779, 0.221421041, 0.2520782699, 0.2431524486, 0.9999999964],
        [0.1344392779, 0.1363119327, 0.1402743916, 0.1446719329, 0.1438102374, 0.300492229],
    ),
    ("torch", "rope"): (
        [0.3363141479, 0.3448265393, 0.3678961169, 0.4575062178, 0.5569889603, 0.9999999915],
        [0.1367997295, 0.1375385867, 0.1408006051, 0.1534610354, 0.1691911387, 0.2622089057],
    ),
}


SAME_STREAM = {"torch"}  # backends whose random stream is the one of 4545842


@pytest.mark.parametrize("backend, kind", list(BEFORE))
def test_no_window_gives_the_numbers_of_before(backend, kind):
    """window None (the default), and a window of seq_len or more (which hides nothing and is stored as None):
    the numbers the engine gave before the window existed (to 1e-6: float32 rounding on another CPU; in
    distribution where the stream changed since), bitwise
    the same as each other. A window of seq_len - 1, which hides one key of the last query, moves them."""
    kwargs = dict(d=16, seq_len=6, n_layers=3, n_samples=512, seed=3)
    if kind == "rope":
        kwargs.update(pe="rope", alpha=0.2)
    base = simulate(Variant(**kwargs), device="cpu", backend=backend)
    score, prob = BEFORE[(backend, kind)]
    for mean, sem, before in ((base.score_mean, base.score_sem, score), (base.prob_mean, base.prob_sem, prob)):
        if backend in SAME_STREAM:
            np.testing.assert_allclose(mean[2, 5], before, rtol=0, atol=1e-6)
        else:  # two runs of 512 samples: within 4 combined standard errors (the score diagonal, constant: 1e-6)
            allowed = np.maximum(4 * np.sqrt(2) * sem[2, 5], 1e-6)
            assert (np.abs(mean[2, 5] - before) <= allowed).all(), (mean[2, 5], before, allowed)
    for window in (6, 100):
        same = simulate(Variant(**kwargs, window=window), device="cpu", backend=backend)
        for field in ("score_mean", "score_sem", "prob_mean", "prob_sem", "group_score_sums"):
            np.testing.assert_array_equal(getattr(same, field), getattr(base, field), err_msg=field)
    moved = simulate(Variant(**kwargs, window=5), device="cpu", backend=backend)
    assert moved.prob_mean[2, 5, 0] == 0 and np.abs(moved.prob_mean[2, 5] - prob).max() > 1e-2


def test_a_window_that_hides_nothing_is_the_unwindowed_path_inside_the_kernel():
    """The kernel and the torch mask given window = seq_len directly (past Variant's normalisation to None) run
    the window's code path with nothing to hide: bitwise the unwindowed block sums, the same mask tensor."""
    v = Variant(d=16, seq_len=9, n_layers=3, n_samples=256, alpha=0.2)
    forced = Variant(d=16, seq_len=9, n_layers=3, n_samples=256, alpha=0.2)
    object.__setattr__(forced, "window", 9)
    plans = [kern.KernelPlan(u, u.resolved_sampler) for u in (v, forced)]
    zero = np.zeros((3, 2, 9, plans[0].n_pad), np.float32)
    np.testing.assert_array_equal(plans[0].run_block(0, 256, zero), plans[1].run_block(0, 256, zero))
    assert torch.equal(additive_mask(v, "cpu"), additive_mask(forced, "cpu"))
    assert torch.equal(additive_mask(v, "cpu"), torch.full((9, 9), float("-inf")).triu_(1))


# ---------------------------------------------------------------- the tables


@pytest.mark.parametrize("window", [None, 1, 4])
def test_tables_hold_only_the_visible_pairs(window, tmp_path):
    """The simulation table has one row per layer and pair i - window < j <= i, no other; `window` is a
    nullable integer (<NA> for None) that survives Parquet; the diagonal normalisation averages each diagonal
    over its visible entries (mean 0 on every diagonal shown). The groups table keeps vectors of S (S + 1) / 2
    with NaN exactly at the hidden pairs, and its sums over the samples are the table's means."""
    v = Variant(d=16, seq_len=9, n_layers=3, n_samples=600, window=window)
    n = v.seq_len
    band = window_band(n, window or n)
    result = simulate(v)
    frame = result_frame(result, "w")
    assert list(frame.columns) == SIMULATION_COLUMNS + list(v.params())
    assert list(frame.columns)[-1] == "window" and str(frame["window"].dtype) == "Int64"
    assert frame["window"].isna().all() if window is None else (frame["window"] == window).all()
    assert len(frame) == v.n_layers * band.sum()
    for layer, rows in frame.groupby("layer"):
        got = np.zeros((n, n), dtype=bool)
        got[rows.query_pos, rows.key_pos] = True
        assert np.array_equal(got, band) and np.array_equal(visible(v), band)
        assert rows.score_diagnorm.notna().all()
        offsets = rows.query_pos - rows.key_pos
        assert np.abs(rows.groupby(offsets).score_diagnorm.mean()).max() < 1e-12
        np.testing.assert_array_equal(rows.score_mean, result.score_mean[layer][rows.query_pos, rows.key_pos])
    path = tmp_path / "w.parquet"
    write_parquet(frame, path)
    back = read_table(path)
    assert str(back["window"].dtype) == "Int64"
    pd.testing.assert_series_equal(back["window"], frame["window"])

    groups = groups_frame(result, "w")
    assert list(groups.columns) == SIMULATION_GROUP_COLUMNS
    query, key = packed_pairs(n)
    hidden = ~band[query, key]
    sums = np.stack(groups[groups.layer == 2].sort_values("group").sums.to_numpy())
    assert sums.shape[1] == packed_size(n)
    assert np.isnan(sums[:, hidden]).all() and np.isfinite(sums[:, ~hidden]).all()
    np.testing.assert_allclose(
        sums[:, ~hidden].sum(0) / v.n_samples, result.score_mean[2][query[~hidden], key[~hidden]], rtol=1e-9, atol=1e-12
    )


# ---------------------------------------------------------------- settings


def test_window_settings():
    """None is the default; a window >= seq_len hides nothing and is stored as None (one variant, one table);
    a narrower one is kept as an int."""
    assert Variant().window is None and Variant(window=None) == Variant()
    assert Variant(seq_len=50, window=50) == Variant(seq_len=50) and Variant(seq_len=50, window=51).window is None
    assert Variant(seq_len=50, window=49).window == 49 and Variant(seq_len=50, window=np.int64(7)).window == 7
    assert type(Variant(seq_len=50, window=np.int64(7)).window) is int
    assert Variant(window=16).params()["window"] == 16 and list(Variant().params())[-1] == "window"


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(window=4, mask="none"), ["'window'", "causal", "'none'"]),
        (dict(window=0), ["'window'", ">= 1"]),
        (dict(window=-3), ["'window'", ">= 1"]),
        (dict(window=2.5), ["'window'", "integer"]),
        (dict(window=4.0), ["'window'", "integer"]),
        (dict(window="4"), ["'window'", "integer"]),
        (dict(window=True), ["'window'", "integer"]),
    ],
)
def test_refused_windows_name_the_setting(kwargs, words):
    with pytest.raises(ValueError) as err:
        Variant(**kwargs)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_config_refuses_a_window_without_the_causal_mask():
    """Through the workflow's config check: the schema takes an integer >= 1 or null, Variant the rest, and the
    error names the variant and the setting."""
    import copy

    from causalpos.workflow.config import ConfigError, load_config, validate_config

    from causalpos.workflow.settings import variant_params

    config = load_config(Path(__file__).resolve().parents[2] / "config.yaml", devices=False)
    good = copy.deepcopy(config)
    good["simulation"]["variants"]["l2_window16"] = {"window": 16}
    validate_config(good)
    assert Variant(**variant_params(good, "l2_window16")).window == 16
    for override, words in (
        ({"window": 4, "mask": "none"}, ["l2_window", "'window'", "causal"]),
        ({"window": 0}, ["window"]),
    ):
        bad = copy.deepcopy(config)
        bad["simulation"]["variants"]["l2_window"] = override
        with pytest.raises(ConfigError) as err:
            validate_config(bad)
        for word in words:
            assert word in str(err.value), (word, str(err.value))
