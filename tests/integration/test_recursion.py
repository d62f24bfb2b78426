"""The large-d recursion (causalpos.simulation.recursion) against the closed form, the Monte Carlo engine, and
what can be proved about it.

Tolerances. A Monte Carlo mean differs from the large-d limit by its sampling error and by a bias of order
1/d (the scores fluctuate by O(d^-1/2), and E[f(S)] - f(E[S]) is second order in the fluctuation). Every
comparison therefore allows, entry by entry,
    |MC - recursion| <= Z * SE + A / d,        Z = 5, A = 5 for scores, 0.5 for probabilities,
and, with the first-order correction included, |MC - recursion - correction| <= Z * SE + (A / d)^2.
Z = 5: with a few hundred entries per comparison, a 5-sigma excursion of a correct prediction has a
probability below 1e-4. A bounds the O(1/d) coefficient with the theory's own numbers, not the Monte
Carlo's: the first-order correction's d * |Delta| is at most 2.23 for the scores and 0.23 for the
probabilities over the variants tested here (both without the residual), and A is twice that, rounded up
(test_first_order_coefficient_below_A checks d * |Delta| <= A / 2 for each); the corrected remainder is the
next order of the same expansion, (A / d)^2. Each comparison also shows that the check can fail: a
deliberately wrong prediction (the residual's cross terms dropped, RoPE's factor dropped, no window, or the
leading order without the correction where the correction is checked) is outside the same tolerance.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest

from causalpos.matrices import visible_pairs
from causalpos.simulation import recursion as rec
from causalpos.simulation import theory
from causalpos.simulation.engine import result_frame, simulate
from causalpos.simulation.variant import Variant

Z, A, A_PROB = 5.0, 5.0, 0.5
N_SEQ, N_LAYERS = 12, 4
LARGE_D, LARGE_N = 1024, 4000  # Monte Carlo against the leading order: SE ~ 5e-4 against patterns of 0.02-0.1
SMALL_D, SMALL_N = 64, 100_000  # against the corrected recursion: SE ~ 4e-4, the 1/d bias ~ 0.01-0.03

LARGE_D_VARIANTS = {
    "l2_alpha0": {},
    "l2_alpha0.2": {"alpha": 0.2},
    "rope_causal": {"pe": "rope"},
    "nomask": {"mask": "none"},
    "noresidual": {"residual": False},
    "layernorm_d": {"norm": "layernorm", "scale": "d"},
}


def small(**kw) -> Variant:
    return Variant(**{"seq_len": N_SEQ, "n_layers": N_LAYERS, **kw})


@functools.cache
def engine(v: Variant):
    return simulate(v, device="cpu")


def off_diagonal(n: int) -> np.ndarray:
    return ~np.eye(n, dtype=bool)


def violations(mc_mean, mc_sem, predicted, visible, allowance):
    """Entries of [layer, n, n] where |mc - predicted| > Z SE + allowance (visible entries only)."""
    excess = np.abs(mc_mean - predicted) - Z * mc_sem - allowance
    return np.where(visible, excess, -np.inf)


def assert_within(mc_mean, mc_sem, predicted, visible, allowance, what):
    excess = violations(mc_mean, mc_sem, predicted, visible, allowance)
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    assert excess.max() <= 0, (
        f"{what}: layer {worst[0] + 1}, query {worst[1]}, key {worst[2]}: "
        f"MC {mc_mean[worst]:.6f} +- {mc_sem[worst]:.6f}, predicted {predicted[worst]:.6f}"
    )


def assert_outside(mc_mean, mc_sem, predicted, visible, allowance, what):
    assert violations(mc_mean, mc_sem, predicted, visible, allowance).max() > 0, f"{what} passed the check"


def wrong_recursion(v: Variant, drop_cross: bool = False, drop_rope: bool = False) -> np.ndarray:
    """A deliberately wrong large-d recursion (l2 only): the residual's cross terms P B + (P B)^T dropped, or RoPE's
    factor dropped. Written out here, independently of the module."""
    n = v.seq_len
    gram = rec.input_gram(n, v.alpha)
    visible = visible_pairs(n, v.mask)
    factor = rec.rope_factor(n, v.d, v.rope_theta) if v.pe == "rope" and not drop_rope else 1.0
    out = []
    for layer in range(v.n_layers):
        norm = np.sqrt(np.diag(gram))
        cosine = gram / np.outer(norm, norm)
        scores = cosine * factor
        logits = np.where(visible, scores, -np.inf)
        probs = np.exp(logits - logits.max(1, keepdims=True))
        probs /= probs.sum(1, keepdims=True)
        out.append(scores)
        cross = probs @ (gram / norm[:, None])
        gram = probs @ cosine @ probs.T + gram + (0 if drop_cross else cross + cross.T)
    return np.stack(out)


# ---------------------------------------------------------------- layer 2 is Eq. 4


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("alpha", [0.0, 0.05, 0.2, 0.5, 0.9])
def test_layer2_is_the_closed_form(alpha, residual):
    """Layer 2 of the recursion is the paper's Eq. 4 (App. A.2 without the residual), to rounding; layer 1 is
    the input Gram matrix (Eq. 2). The closed form is computed term by term in `theory`, independently."""
    n = 40
    result = rec.recursion(Variant(alpha=alpha, residual=residual, seq_len=n, n_layers=2))
    np.testing.assert_allclose(
        result.scores[1], theory.layer2_scores(n, alpha, residual), rtol=0, atol=1e-13, equal_nan=True
    )
    expected1 = np.where(np.tril(np.ones((n, n), bool)), rec.input_gram(n, alpha), np.nan)
    np.testing.assert_allclose(result.scores[0], expected1, rtol=0, atol=1e-15, equal_nan=True)
    np.testing.assert_allclose(result.probs[0], theory.layer1_attention(n, alpha), rtol=1e-13, atol=1e-16)


# ---------------------------------------------------------------- against the engine


@pytest.mark.parametrize(
    "name, window", [(name, None) for name in LARGE_D_VARIANTS] + [("l2_alpha0", 4), ("rope_causal", 4)]
)
def test_first_order_coefficient_below_A(name, window):
    """The allowance A / d covers the bias the theory predicts: d * |correction| <= A / 2 for every entry (A_PROB
    for the probabilities), for every variant compared with a Monte Carlo at d = 1024 below."""
    v = small(d=LARGE_D, **LARGE_D_VARIANTS[name])
    score_corr, prob_corr = rec.finite_d_correction(v, window=window)
    assert LARGE_D * np.abs(score_corr).max() <= A / 2
    assert LARGE_D * np.abs(prob_corr).max() <= A_PROB / 2


@pytest.mark.parametrize("name", list(LARGE_D_VARIANTS))
def test_matches_engine_at_large_d(name):
    """Engine (d = 1024, N = 4,000, 12 positions, 4 layers) against the recursion, scores and probabilities of
    every visible entry: within Z SE + A / d. For l2 the recursion without the residual's cross terms fails the
    same check, and for RoPE so does the recursion without the RoPE factor."""
    v = small(d=LARGE_D, n_samples=LARGE_N, **LARGE_D_VARIANTS[name])
    mc, result = engine(v), rec.recursion(v)
    visible = result.visible
    assert result.concentrates
    assert_within(mc.score_mean, mc.score_sem, result.scores, visible, A / LARGE_D, f"{name} scores")
    assert_within(mc.prob_mean, mc.prob_sem, result.probs, visible, A_PROB / LARGE_D, f"{name} probs")
    if v.norm == "l2" and v.residual:
        assert_outside(
            mc.score_mean,
            mc.score_sem,
            wrong_recursion(v, drop_cross=True),
            visible,
            A / LARGE_D,
            "the recursion without P B + (P B)^T",
        )
    if v.pe == "rope":
        assert_outside(
            mc.score_mean,
            mc.score_sem,
            wrong_recursion(v, drop_rope=True),
            visible,
            A / LARGE_D,
            "the recursion without the RoPE factor",
        )


def rope_tables32(n: int, d: int, theta: float):
    """cos and sin [n, d/2] of RoPE as the engine applies it (pairs k and k + d/2, positions 0 .. n-1)."""
    angles = np.arange(n)[:, None] * theta ** (-np.arange(0, d, 2) / d)[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rope_rotate(y: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    half = y.shape[-1] // 2
    first, second = y[..., :half], y[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def monte_carlo_window(v: Variant, window: int, seed: int = 0, chunk: int = 500):
    """The decoder with a sliding window, by Monte Carlo (the engine has no window), written out for this test:
    l2, i.i.d. inputs uniform on the sphere (alpha = 0), float32 as the engine, the causal mask restricted to
    i - window < j <= i. Mean and SE of the scores and the probabilities [layer, n, n]."""
    assert v.norm == "l2" and v.alpha == 0 and v.mask == "causal"
    rng = np.random.default_rng(seed)
    n = v.seq_len
    offset = np.arange(n)[:, None] - np.arange(n)[None, :]
    visible = (offset >= 0) & (offset < window)
    tables = rope_tables32(n, v.d, v.rope_theta) if v.pe == "rope" else None
    sums = np.zeros((4, v.n_layers, n, n))
    for first in range(0, v.n_samples, chunk):
        x = rng.standard_normal((min(chunk, v.n_samples - first), n, v.d), dtype=np.float32)
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
        for layer in range(v.n_layers):
            y = x / np.linalg.norm(x, axis=-1, keepdims=True)
            q = rope_rotate(y, *tables) if tables is not None else y
            scores = q @ np.swapaxes(q, 1, 2)
            logits = np.where(visible, scores, -np.inf)
            probs = np.exp(logits - logits.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            for k, values in enumerate((scores, scores**2, probs, probs**2)):
                sums[k, layer] += values.sum(0, dtype=np.float64)
            x = probs @ y + x
    mean = sums[[0, 2]] / v.n_samples
    sem = np.sqrt(np.maximum(sums[[1, 3]] / v.n_samples - mean**2, 0) / (v.n_samples - 1))
    return mean[0], sem[0], mean[1], sem[1]


@pytest.mark.parametrize("pe", ["none", "rope"])
def test_window_matches_monte_carlo(pe):
    """A sliding window of 4 keys (d = 1024, N = 4,000, our own Monte Carlo of the windowed decoder) against the
    recursion: within Z SE + A / d. The recursion with the full causal mask instead fails the check."""
    v = small(d=LARGE_D, n_samples=LARGE_N, pe=pe)
    score, score_sem, prob, prob_sem = monte_carlo_window(v, window=4)
    result = rec.recursion(v, window=4)
    visible = result.visible
    assert_within(score, score_sem, result.scores, visible, A / LARGE_D, f"window {pe} scores")
    assert_within(prob, prob_sem, result.probs, visible, A_PROB / LARGE_D, f"window {pe} probs")
    assert_outside(score, score_sem, rec.recursion(v).scores, visible, A / LARGE_D, "the unwindowed recursion")


# ---------------------------------------------------------------- finite d


CORRECTED_VARIANTS = {
    "l2_alpha0": {"sampler": "exact"},  # at alpha = 0 the laws are one; "exact" draws it in the reduced basis
    "l2_alpha0.2_official": {"alpha": 0.2},
    "rope_causal": {"pe": "rope"},
}


@pytest.mark.parametrize("name", list(CORRECTED_VARIANTS))
def test_correction_removes_the_finite_d_bias(name):
    """At d = 64 (N = 100,000) the recursion plus its first-order correction is within Z SE + (A / d)^2 of the
    engine, scores and probabilities; the leading order alone is not (its bias is O(1/d))."""
    v = small(d=SMALL_D, n_samples=SMALL_N, **CORRECTED_VARIANTS[name])
    mc, corrected = engine(v), rec.recursion(v, correction=True)
    visible, allowance = corrected.visible, (A / SMALL_D) ** 2
    assert_within(mc.score_mean, mc.score_sem, corrected.scores, visible, allowance, f"{name} corrected scores")
    assert_within(
        mc.prob_mean, mc.prob_sem, corrected.probs, visible, (A_PROB / SMALL_D) ** 2, f"{name} corrected probs"
    )
    leading = corrected.scores - corrected.score_correction
    assert_outside(mc.score_mean, mc.score_sem, leading, visible, allowance, "the uncorrected recursion")


def noise_free_rms(mc, predicted, visible) -> float:
    """RMS of (MC - predicted) over the visible off-diagonal entries of layers 2+, its sampling noise removed
    (E[residual^2] = bias^2 + SE^2)."""
    mask = visible[1:] & off_diagonal(visible.shape[-1])
    residual = (mc.score_mean - predicted)[1:][mask]
    return math.sqrt(max(np.mean(residual**2) - np.mean(mc.score_sem[1:][mask] ** 2), 0.0))


def test_residual_shrinks_like_one_over_d():
    """l2, alpha 0, d = 16, 64, 256 (N = 100,000, the reduced basis): the RMS difference between Monte Carlo and
    the recursion falls by 4 (within a factor 2) for each 4-fold d; after the correction what remains is
    O(d^-2): below (A / d)^2 at every d."""
    rms, remainder = {}, {}
    for d in (16, 64, 256):
        v = small(d=d, n_samples=SMALL_N, sampler="exact")
        mc, result = engine(v), rec.recursion(v, correction=True)
        rms[d] = noise_free_rms(mc, result.scores - result.score_correction, result.visible)
        remainder[d] = noise_free_rms(mc, result.scores, result.visible)
        assert remainder[d] <= (A / d) ** 2, (d, remainder[d])
    for low, high in ((16, 64), (64, 256)):
        assert 2.0 <= rms[low] / rms[high] <= 8.0, rms


# ---------------------------------------------------------------- sliding window


@pytest.mark.parametrize("alpha", [0.0, 0.3])
@pytest.mark.parametrize("pe", ["none", "rope"])
def test_window_makes_scores_relative_past_the_receptive_field(alpha, pe):
    """With a window w, a layer-l state depends on at most (l-1)(w-1) earlier positions, and the inputs' law does
    not depend on position: layer l's scores depend on i - j alone wherever the key j >= (l-1)(w-1) (layer 2:
    once the key, hence the query, sees a full window). Exact, to rounding. Nearer the start they need not be:
    layer 2's band j < w - 1 and layer 3's j < 2(w - 1) are not relative: among queries that see a full
    window, some diagonal's entries differ by more than 1e-4."""
    n, w, layers = 40, 6, 5
    result = rec.recursion(Variant(alpha=alpha, pe=pe, seq_len=n, n_layers=layers), window=w)
    i, j = np.indices((n, n))
    for layer in range(layers):
        start = layer * (w - 1)  # layer index 0-based: (l - 1)(w - 1)
        for offset in range(w):
            diagonal = result.scores[layer][(i - j == offset) & (j >= start)]
            if len(diagonal):
                assert np.ptp(diagonal) <= 1e-12, (layer + 1, offset)
        if 1 <= layer <= 2:  # before the boundary the pattern is not relative
            spreads = [np.ptp(result.scores[layer][(i - j == offset) & (i >= w - 1)]) for offset in range(1, w)]
            assert max(spreads) > 1e-4, (layer + 1, spreads)


# ---------------------------------------------------------------- what can be proved


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"alpha": 0.4},
        {"pe": "rope"},
        {"mask": "none"},
        {"residual": False},
        {"norm": "layernorm", "scale": "d"},
        {"norm": "layernorm", "scale": "sqrt_d"},
    ],
)
def test_invariants(kw):
    """Rows of P sum to 1 over the visible keys and vanish elsewhere; invisible scores are NaN; every layer's
    input Gram matrix is symmetric positive semi-definite; |scores| <= |y|^2 / scale (Cauchy-Schwarz)."""
    v = Variant(seq_len=30, n_layers=6, **kw)
    result = rec.recursion(v, keep_grams=True)
    visible = result.visible
    np.testing.assert_allclose(result.probs.sum(-1), 1.0, rtol=0, atol=1e-12)
    assert np.all(result.probs[~visible] == 0) and np.all(result.probs[visible] > 0)
    assert np.array_equal(visible, np.broadcast_to(visible_pairs(30, v.mask), visible.shape))
    for gram in result.grams:
        np.testing.assert_array_equal(gram, gram.T)
        eig = np.linalg.eigvalsh(gram)
        assert eig.min() >= -1e-12 * eig.max()
    bound = (v.d if v.norm == "layernorm" else 1.0) / v.score_divisor
    assert np.nanmax(np.abs(result.scores)) <= bound * (1 + 1e-12)


@pytest.mark.parametrize("alpha", [0.0, 0.2])
def test_no_mask_no_position(alpha):
    """Without a mask (and without RoPE) the inputs are exchangeable and so is every layer: all diagonal scores
    are equal, all off-diagonal ones are equal, at every layer."""
    result = rec.recursion(Variant(alpha=alpha, mask="none", seq_len=20, n_layers=5))
    off = off_diagonal(20)
    for scores in result.scores:
        assert np.ptp(np.diag(scores)) <= 1e-14 and np.ptp(scores[off]) <= 1e-14


def test_no_mask_rope_is_symmetric_and_persymmetric():
    """Without a mask, RoPE's factor cbar(|i - j|) is symmetric and persymmetric, so every layer's scores are
    unchanged by (i, j) -> (j, i) and by (i, j) -> (n-1-i, n-1-j); under the causal mask the second fails."""
    for mask, persymmetric in (("none", True), ("causal", False)):
        scores = rec.recursion(Variant(pe="rope", mask=mask, seq_len=20, n_layers=4)).scores
        flipped = scores[:, ::-1, ::-1]
        if mask == "none":
            np.testing.assert_allclose(scores, np.swapaxes(scores, 1, 2), rtol=0, atol=1e-14)
        assert np.allclose(scores[1:], flipped[1:], rtol=0, atol=1e-12, equal_nan=True) == persymmetric


def test_rope_factor_is_the_engines_trace():
    """cbar(m) = tr(R_m) / d with the engine's rotation tables (pairs k, k + d/2, theta^(-2p/d)). It depends on d:
    it is the left Riemann sum, step h = 2/d, of f(t) = cos(m theta^-t) over [0, 1], so by Euler-Maclaurin
    d (cbar_d(m) - integral) = f(0) - f(1) + (f'(1) - f'(0)) / (3d) + O(d^-3)."""
    from causalpos.simulation.sampling import rope_tables

    n, d, theta = 30, 64, 10000.0
    cos, _ = rope_tables(n, d, theta)
    np.testing.assert_allclose(rec.rope_cosine_mean(n, d, theta), cos.double().numpy().mean(1), atol=1e-6)
    m = np.arange(6)
    t = (np.arange(200_000) + 0.5) / 200_000
    integral = np.cos(m[:, None] * theta ** (-t[None, :])).mean(1)

    def slope(t):  # f'(t)
        return np.sin(m * theta**-t) * m * theta**-t * math.log(theta)

    for big in (512, 2048, 8192):
        expected = np.cos(m) - np.cos(m / theta) + (slope(1.0) - slope(0.0)) / (3 * big)
        np.testing.assert_allclose(big * (rec.rope_cosine_mean(6, big, theta) - integral), expected, atol=1e-3)


def test_both_input_laws_have_the_limit():
    """The paper's construction and our exact-moment law both have Gram matrices -> 1 on the diagonal and alpha
    elsewhere: at d = 2^15 every inner product is within 6 d^-1/2 of it."""
    import torch

    from causalpos.simulation.sampling import sample_inputs, sample_inputs_official

    n, d, alpha = 6, 2**15, 0.3
    for draw in (sample_inputs, sample_inputs_official):
        x = draw(4, n, d, alpha, torch.Generator().manual_seed(1), dtype=torch.float64).numpy()
        gram = x @ np.swapaxes(x, 1, 2)
        assert np.abs(gram - rec.input_gram(n, alpha)).max() <= 6 / math.sqrt(d), draw.__name__


def test_temperature_limits():
    """The scales at large d. l2 with scale sqrt_d or d: the scores -> 0 and the attention is uniform over the
    visible keys. LayerNorm with scale sqrt_d: P -> I (the diagonal wins by sqrt(d)(1 - alpha)), every layer keeps
    C^(0), the scores are sqrt(d) C^(0); the result says it does not concentrate, and no correction is offered.
    LayerNorm with scale d tends to the l2 recursion without layer 1's residual (the unit-norm input against an
    attention output of norm ~sqrt(d)), at rate d^-1/2."""
    n, big = 10, 10**6
    uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    for scale in ("sqrt_d", "d"):
        result = rec.recursion(Variant(scale=scale, d=big, seq_len=n, n_layers=3))
        np.testing.assert_allclose(result.probs, np.broadcast_to(uniform, result.probs.shape), atol=1e-3)
    v = Variant(norm="layernorm", scale="sqrt_d", alpha=0.2, d=big, seq_len=n, n_layers=3)
    result = rec.recursion(v)
    assert not result.concentrates
    np.testing.assert_allclose(result.probs, np.broadcast_to(np.eye(n), result.probs.shape), atol=1e-12)
    expected = np.where(np.tril(np.ones((n, n), bool)), math.sqrt(big) * rec.input_gram(n, 0.2), np.nan)
    np.testing.assert_allclose(
        result.scores, np.broadcast_to(expected, result.scores.shape), rtol=2 * big * 1e-12, equal_nan=True
    )  # LayerNorm's eps: |y|^2 = d / (1 + d eps) at layer 1
    with pytest.raises(ValueError, match="do not concentrate"):
        rec.recursion(v, correction=True)
    first = rec.recursion(Variant(residual=False, seq_len=n, n_layers=2), keep_grams=True).grams[1]
    v = Variant(seq_len=n, n_layers=3)
    limit = rec.run(first, rec._plan(v, (None,) * 2, (v.rope_theta,) * 2), 2)[0]
    gaps = []
    for d in (10**4, 10**6):
        ln = rec.recursion(Variant(norm="layernorm", scale="d", d=d, seq_len=n, n_layers=3)).scores[1:]
        gaps.append(np.nanmax(np.abs(ln - limit)))
    assert 5 <= gaps[0] / gaps[1] <= 20, gaps  # d^-1/2: a factor 10 for a factor 100 in d


def test_arguments_and_frame():
    """Windows per layer, RoPE bases per layer, errors; the frame has a row per layer and visible pair and the
    engine tables' parameter columns."""
    v = Variant(pe="rope", seq_len=16, n_layers=6)
    result = rec.recursion(v, window=[4, 4, None, 4, 4, None], rope_theta=[1e4, 1e4, 1e6, 1e4, 1e4, 1e6])
    assert result.windows == (4, 4, None, 4, 4, None)
    assert result.visible[0].sum() == sum(min(i + 1, 4) for i in range(16)) and result.visible[2].sum() == 136
    for bad in (0, 2.5, [4] * 5):
        with pytest.raises(ValueError):
            rec.recursion(v, window=bad)
    with pytest.raises(ValueError, match="causal"):
        rec.recursion(Variant(mask="none"), window=4)
    with pytest.raises(ValueError, match="alpha = 0"):
        rec.finite_d_correction(Variant(pe="rope", alpha=0.2, seq_len=6))

    v = Variant(seq_len=8, n_layers=3, n_samples=256)
    frame = rec.recursion_frame("x", v, window=[None, 3, None], correction=True)
    sim = result_frame(simulate(v, device="cpu"), "x")
    params = [p for p in v.params() if p != "window"]  # the frame's window is per layer (below)
    assert len(frame) == 36 + 21 + 36
    assert frame[params].drop_duplicates().equals(sim[params].drop_duplicates())
    assert {"score", "prob", "score_diagnorm", "window", "score_correction", "prob_correction"} <= set(frame.columns)
    row = frame[(frame.layer == 1) & (frame.query_pos == 5) & (frame.key_pos == 3)].iloc[0]
    full = rec.recursion(v, window=[None, 3, None], correction=True)
    assert row.score == full.scores[1, 5, 3] and row.window == 3
    assert pd.isna(frame[frame.layer == 0].window).all()
