"""The large-d limit of the parameter-free decoder: every layer's Gram matrix from the one before.

`causalpos.simulation.engine` averages the decoder of Eq. 1 over random inputs (Monte Carlo). As d grows
the inner products it sees concentrate, so the decoder becomes deterministic: this module computes that
limit for every setting a `Variant` has, plus a sliding window, in O(layers n^3) numpy operations, and
(optionally) its leading finite-d correction. docs/engine.md ("Every layer in the large-d limit") has the
derivation in prose; the summary:

State. X = X^(l) (rows x_i in R^d) is the input of layer l, G = X X^T its Gram matrix. The layer
(engine.run_layers, the CPU kernel) computes Y = Norm(X); Q = K = RoPE(Y) (or Y); S = QK^T / scale;
P = softmax(mask(S)) row-wise; X' = PY + X (residual) or PY. The values are Y itself, not rotated.
Every row of X' is a combination of rows of X, so X^(l) = M^(l) X^(0) for an n x n matrix M^(l): all
that the decoder computes is a function of the inner products of the inputs.

Inputs. Both input laws (`sampling`) have unit rows and, as d -> oo, <x_i, x_j> -> alpha (i != j):
  - "exact": <x_i, x_j> = alpha + (1 - alpha)<w_i, w_j>, mean alpha exactly, variance (1 - alpha)^2 / (d - 1);
  - "official": x_i = normalize(g_i + l u), l^2 = alpha / (1 - alpha); <g_i + lu, g_j + lu> / d -> l^2 and
    |g_i + lu|^2 / d -> 1 + l^2, so <x_i, x_j> -> l^2 / (1 + l^2) = alpha, with mean
    alpha - alpha (1 - alpha^2) / (2d) + O(d^-2) (`input_law`) and fluctuations of order d^-1/2.
  At alpha = 0 the two laws are one (i.i.d. uniform on the sphere). So G^(0) -> (1 - alpha) I + alpha 11^T.

One layer. Write r_k for the norm Norm divides row k by: y_k = x_k / r_k.
  - l2: r_k = sqrt(G_kk): rows of norm 1.
  - LayerNorm (no affine, eps = variant.LAYERNORM_EPS): y_k = (x_k - m_k 1) / sqrt(var_k + eps) with
    var_k = |x_k - m_k 1|^2 / d. The mean m_k over coordinates is the component along one fixed direction,
    <x_k, 1/sqrt(d)>, of order d^-1/2 of the row for isotropic states; without it r_k = sqrt(G_kk / d + eps):
    rows of norm sqrt(d) (App. B). The centring's effect on the means is O(d^-3/2) (it only reaches the
    unit-norm input's share of a state), below the finite-d correction's order.
  With H = R^-1 G R^-1 (H_kl = <y_k, y_l>) and B = R^-1 G (B_kj = <y_k, x_j>):
      scores S = c (.) H / scale,     P = softmax(mask(S)),
      G' = P H P^T + P B + (P B)^T + G      (residual),      G' = P H P^T      (no residual),
  where c = 1 without RoPE. For l2, H = C = D^-1/2 G D^-1/2 and B_kj = G_kj / sqrt(G_kk): the issue's
  recursion. Layer 2's scores are then the paper's Eq. 4 exactly (g(i) / (h(i) h(j)); App. A.2 without the
  residual): the closed form is this map applied once to G^(0).

Scale and temperature. The score of a pair is |y|^2 C_ij / scale, C the cosine:
  - l2 (|y|^2 = 1): scale none gives S = C, a finite limit. sqrt_d and d divide by a growing number: the
    limit is S -> 0, uniform attention over the visible keys (still position dependent through the mask).
  - LayerNorm (|y|^2 = d): S = d C / scale. Scale d gives S = C. At layer 1 the attention output PY has
    norm ~sqrt(d) against the unit-norm input x, so G^(1) = d [P C P^T + d^-1/2 (P B' + (P B')^T) + G / d]
    with B' = D^-1/2 G: the residual enters C^(2) at relative order d^-1/2 (kept exactly here, through
    r_k = sqrt(G_kk / d + eps)) and vanishes in the strict limit; from layer 2 on, x and PY both have norm
    ~sqrt(d) and the map is the l2 one. So LayerNorm with d scaling tends, at rate d^-1/2, to the l2
    recursion without layer 1's residual.
    Scale sqrt_d gives S = sqrt(d) C, a temperature sqrt(d) -> oo; scale none gives S = d C. There the
    limit is degenerate: the diagonal (C_ii = 1) beats every other key by sqrt(d)(1 - C_ij), so P -> I,
    every layer only rescales its rows, C^(l) = C^(0) and nothing depends on position; the scores diverge
    like sqrt(d) (or d), and, worse, they do not concentrate: their fluctuations sqrt(d) * O(d^-1/2) = O(1)
    (or O(sqrt(d))) are as large as the softmax's temperature, so E[softmax(S)] != softmax(E[S]) at leading
    order. This module still evaluates the map at the variant's d (softmax at the mean scores, the
    temperature kept), but marks the result `concentrates = False`: a heuristic there, not a limit, and no
    correction is offered.

RoPE. q_i = R_i y_i with R_i the rotation by angles i theta_p in the planes (k, k + d/2), theta_p =
rope_theta^(-2p/d), p = 0 .. d/2 - 1 (sampling.rope_tables), so S_ij = y_i^T R_(j-i) y_j. Since
y_i = sum_k M_ik x_k^(0), S_ij = sum_kl M_ik M_jl <x_k, R_(j-i) x_l>, and for an isotropic input law
E[x_k x_l^T] = (E<x_k, x_l> / d) I, so <x_k, R_m x_l> concentrates at <x_k, x_l> tr(R_m) / d =
<x_k, x_l> cbar(m), cbar(m) = mean over the d/2 planes of cos(m theta_p) (each plane holds 2/d of the
norm). Hence S_ij -> cbar(i - j) C_ij (times |y|^2 / scale): the cosine matrix multiplied entrywise by a
Toeplitz matrix, and the rest of the recursion unchanged (values are not rotated). cbar depends on d: it
is the left Riemann sum, with d/2 nodes, of integral_0^1 cos(m rope_theta^-t) dt, which it approaches at
rate O(1/d) for fixed m; this module uses the exact finite-d mean (the engine's own frequencies), which is
the exact expectation of x^T R_m x for unit isotropic x at every d.

Mask and window. Causal: query i sees keys j <= i; none: every key. A sliding window w (causal only):
query i sees i - w < j <= i (`window=None`: all; one entry per layer allowed). A layer-l state then depends
on at most (l - 1)(w - 1) earlier positions and the inputs' law does not depend on position, so layer l's
scores depend on i - j alone wherever the key j >= (l - 1)(w - 1) (layer 2: once the key, hence the query,
sees a full window); nearer the start they do not.

Finite d (`correction=True`; not for LayerNorm with scale none / sqrt_d, nor RoPE with alpha > 0). For l2
the decoder is exactly a function F of the input Gram G^(0) (LayerNorm up to the centring); with RoPE, of
the statistics T_kl(m) = <x_k, R_m x_l> of every offset m (`rope_state_layer`: each offset evolves on its
own, T'(m) = A T(m) A^T). The inputs are their large-d value plus delta, E[delta] = mu = O(1/d),
Cov(delta) = Sigma = O(1/d), third moments O(d^-2); the second-order delta method gives
    E[F] = F(mean) + DF[mu] + 1/2 sum_a sigma_a^2 D^2F[v_a, v_a] + O(d^-2),
with Sigma = sum_a sigma_a^2 v_a v_a^T the law's covariance written as uncorrelated directions (`input_law`,
`rope_input_law`): for both laws at alpha = 0 and for "exact", one direction per pair (i, j) of variance
1/d or (1 - alpha)^2 / (d - 1); for "official" also one per token (its g_i's length, its overlap with u)
and one for the shared u's length; with RoPE the covariance of each pair's T_kl(.) over offsets and of the
planes' shares of each row. This expands E[softmax(S)] around softmax(E[S]) (and E[S] around the recursion)
through every layer at once: the term is exact at order 1/d. The directional derivatives are central
differences of the recursion (step 1e-3: the correction to ~1e-6 of itself, steps 4e-3 and 2.5e-4
agree to that), batched: O(n^2)
recursions without RoPE (about a second at n = 50), O(n^3) state recursions of O(n^4) with RoPE (under a
second at n = 12, 6.5 minutes on one thread at n = 50).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causalpos.matrices import diagonal_normalise, visible_pairs
from causalpos.simulation.variant import LAYERNORM_EPS, Variant
from causalpos.catalogue.tables import RECURSION_COLUMNS

FD_STEP = 1e-3  # central-difference step of the finite-d correction (directions have entries of order 1)
FD_CHUNK = 128  # directions per batch of recursions in the correction
BLOCK = 128  # rows per block in the products with P: blocks skip the keys no query of theirs sees


@dataclass
class RecursionResult:
    """The large-d decoder of one variant. Arrays are [layer, query_pos, key_pos], float64, 0-based."""

    variant: Variant
    windows: tuple  # per layer: an int (a query sees its last `window` keys) or None (all)
    scores: np.ndarray  # the scores S (before the softmax); NaN where the key is invisible
    probs: np.ndarray  # softmax(mask(S)); 0 where invisible
    concentrates: bool  # False for LayerNorm with scale none / sqrt_d: a heuristic there, not a limit
    rope_thetas: tuple = ()  # per layer: the RoPE base (variant.rope_theta unless overridden)
    grams: np.ndarray | None = None  # the Gram matrix G of each layer's input (keep_grams=True)
    score_correction: np.ndarray | None = None  # the O(1/d) term included in scores (correction=True)
    prob_correction: np.ndarray | None = None

    @property
    def visible(self) -> np.ndarray:
        """[layer, query, key] bool: which keys each query sees."""
        return np.isfinite(self.scores)


# ---------------------------------------------------------------- ingredients


def rope_cosine_mean(n: int, d: int, theta: float) -> np.ndarray:
    """cbar(m) = mean over the d/2 RoPE planes of cos(m theta_p), theta_p = theta^(-2p/d), m = 0 .. n-1.

    The engine's frequencies (sampling.rope_tables): for unit isotropic x, E[x^T R_m x] = cbar(m) exactly.
    """
    return np.cos(np.arange(n, dtype=np.float64)[:, None] * rope_frequencies(d, theta)[None, :]).mean(axis=1)


def rope_frequencies(d: int, theta: float) -> np.ndarray:
    """theta_p = theta^(-2p/d), p = 0 .. d/2 - 1: the engine's frequencies (sampling.rope_tables)."""
    if d < 2 or d % 2:
        raise ValueError(f"RoPE needs an even d >= 2, got {d}")
    return theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)


def rope_factor(n: int, d: int, theta: float) -> np.ndarray:
    """[n, n] Toeplitz matrix cbar(|i - j|) that multiplies the cosine of every pair under RoPE."""
    c = rope_cosine_mean(n, d, theta)
    i = np.arange(n)
    return c[np.abs(i[:, None] - i[None, :])]


def input_gram(n: int, alpha: float) -> np.ndarray:
    """The large-d Gram matrix of the inputs, both laws: 1 on the diagonal, alpha elsewhere."""
    return (1.0 - alpha) * np.eye(n) + alpha * np.ones((n, n))


def concentrates(v: Variant) -> bool:
    """Whether the scores concentrate as d grows: False for LayerNorm with scale none or sqrt_d, whose
    scores d C / scale fluctuate by O(sqrt(d) / scale * ...) = O(1) or more (module docstring)."""
    return not (v.norm == "layernorm" and v.scale in ("none", "sqrt_d"))


def _windows(window, n_layers: int, variant_window: int | None = None) -> tuple:
    if window is None:
        window = variant_window  # the variant's own sliding window (Variant.window), None: every key
    if window is None or isinstance(window, (int, float, np.number)):
        windows = (window,) * n_layers
    else:
        windows = tuple(window)
        if len(windows) != n_layers:
            raise ValueError(f"window: one entry per layer ({n_layers}), got {len(windows)}")
    for w in windows:
        if w is not None and (not isinstance(w, (int, np.integer)) or isinstance(w, bool) or w < 1):
            raise ValueError(f"window must be None or an integer >= 1, got {w!r}")
    return tuple(None if w is None else int(w) for w in windows)


def _thetas(v: Variant, rope_theta, n_layers: int) -> tuple:
    if rope_theta is None:
        return (v.rope_theta,) * n_layers
    if isinstance(rope_theta, (int, float)):
        thetas = (float(rope_theta),) * n_layers
    else:
        thetas = tuple(float(t) for t in rope_theta)
    if len(thetas) != n_layers or any(t <= 0 for t in thetas):
        raise ValueError(f"rope_theta: a positive number or one per layer ({n_layers}), got {rope_theta!r}")
    return thetas


@dataclass
class _Plan:
    """What every layer needs besides the Gram matrix: visibility, RoPE factor, norm and scale."""

    visible: list  # [n, n] bool per layer
    blocks: list  # per layer: (first row, end row, first key, end key) of P's nonzero blocks
    factor: list  # [n, n] RoPE factor per layer, or None
    thetas: tuple  # RoPE base per layer
    layernorm: bool
    d: int
    divisor: float
    residual: bool


def _plan(v: Variant, windows: tuple, thetas: tuple) -> _Plan:
    n = v.seq_len
    cache: dict = {}
    visible, blocks, factor = [], [], []
    for w, theta in zip(windows, thetas):
        if w not in cache:
            shown = visible_pairs(n, v.mask, w)
            cache[w] = shown, _row_blocks(shown)
        visible.append(cache[w][0])
        blocks.append(cache[w][1])
        if v.pe == "rope":
            if ("rope", theta) not in cache:
                cache[("rope", theta)] = rope_factor(n, v.d, theta)
            factor.append(cache[("rope", theta)])
        else:
            factor.append(None)
    return _Plan(visible, blocks, factor, thetas, v.norm == "layernorm", v.d, v.score_divisor, v.residual)


# ---------------------------------------------------------------- the recursion


def _transpose(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _row_blocks(visible: np.ndarray, block: int = BLOCK) -> list:
    """(r0, r1, c0, c1) per block of BLOCK rows: the keys c0 <= j < c1 that any of its queries sees."""
    n = visible.shape[0]
    if n < 2 * block:
        return [(0, n, 0, n)]
    out = []
    for r0 in range(0, n, block):
        keys = np.nonzero(visible[r0 : r0 + block].any(axis=0))[0]
        out.append((r0, min(r0 + block, n), int(keys[0]), int(keys[-1]) + 1))
    return out


def _p_times(probs: np.ndarray, other: np.ndarray, blocks: list) -> np.ndarray:
    """probs @ other, skipping the blocks of probs that the mask makes zero (a causal mask: ~half the work)."""
    if len(blocks) == 1:
        return probs @ other
    out = np.empty(probs.shape[:-1] + other.shape[-1:])
    for r0, r1, c0, c1 in blocks:
        np.matmul(probs[..., r0:r1, c0:c1], other[..., c0:c1, :], out=out[..., r0:r1, :])
    return out


def layer(
    gram: np.ndarray, plan: _Plan, index: int, scores: np.ndarray, probs: np.ndarray, last: bool = False
) -> np.ndarray | None:
    """One layer on Gram matrices [..., n, n]: writes its scores and probs (unmasked scores) into the given
    arrays and returns the next layer's Gram matrix (None when `last`).

    y_k = x_k / r_k; B_kj = <y_k, x_j> = G_kj / r_k; H_kl = <y_k, y_l> = B_kl / r_l; S = c (.) H / scale;
    P = softmax(mask(S)); G' = P H P^T + P B + (P B)^T + G = K + K^T with K = P H P^T / 2 + P B + G / 2
    (exactly symmetric), or P H P^T (symmetrised) without the residual.
    """
    diag = np.diagonal(gram, axis1=-2, axis2=-1)
    inv_r = 1.0 / (np.sqrt(diag / plan.d + LAYERNORM_EPS) if plan.layernorm else np.sqrt(diag))
    cross = gram * inv_r[..., :, None]  # B
    np.multiply(cross, inv_r[..., None, :], out=scores)  # H
    if plan.factor[index] is not None:
        scores *= plan.factor[index]
    if plan.divisor != 1.0:
        scores /= plan.divisor
    visible = plan.visible[index]
    np.copyto(probs, scores)
    if not visible.all():
        np.copyto(probs, -np.inf, where=~visible)
    probs -= probs.max(axis=-1, keepdims=True)
    np.exp(probs, out=probs)
    probs /= probs.sum(axis=-1, keepdims=True)
    if last:
        return None
    blocks = plan.blocks[index]
    pb = _p_times(probs, cross, blocks)
    php = _p_times(probs, _transpose(pb) * inv_r[..., :, None], blocks)  # P (P B R^-1)^T = P H P^T
    if not plan.residual:
        php += _transpose(php)
        php *= 0.5
        return php
    php *= 0.5
    php += pb
    php += 0.5 * gram
    return php + _transpose(php)


def run(gram0: np.ndarray, plan: _Plan, n_layers: int, keep_grams: bool = False):
    """The recursion from input Gram matrices [..., n, n]: scores, probs [..., layer, n, n] (scores not masked),
    and the layers' input Grams (or None)."""
    shape = gram0.shape[:-2] + (n_layers,) + gram0.shape[-2:]
    scores, probs = np.empty(shape), np.empty(shape)
    grams = np.empty(shape) if keep_grams else None
    gram = gram0
    for index in range(n_layers):
        if keep_grams:
            grams[..., index, :, :] = gram
        gram = layer(gram, plan, index, scores[..., index, :, :], probs[..., index, :, :], last=index + 1 == n_layers)
    return scores, probs, grams


def recursion(
    variant: Variant, window=None, *, rope_theta=None, correction: bool = False, keep_grams: bool = False
) -> RecursionResult:
    """The large-d limit of `engine.simulate(variant)`: every layer's scores and attention probabilities.

    window: None (every visible key), an int (query i sees keys i - window < j <= i; causal mask only), or one
    such entry per layer. rope_theta: overrides variant.rope_theta, a number or one per layer (e.g. Gemma's
    local and global bases). variant.d enters only through RoPE's frequencies, LayerNorm's norm sqrt(d) and
    the scale. correction: add the O(1/d) finite-d term (`finite_d_correction`). n_samples, seed and the
    sampler do not enter, except the sampler in the correction (the laws differ at order 1/d).
    """
    n, n_layers = variant.seq_len, variant.n_layers
    windows = _windows(window, n_layers, variant.window)
    plan = _plan(variant, windows, _thetas(variant, rope_theta, n_layers))
    scores, probs, grams = run(input_gram(n, variant.alpha), plan, n_layers, keep_grams)
    score_corr = prob_corr = None
    if correction:
        score_corr, prob_corr = finite_d_correction(variant, plan=plan)
        scores, probs = scores + score_corr, probs + prob_corr
    for index, visible in enumerate(plan.visible):
        if not visible.all():
            hidden = ~visible
            for values, fill in ((scores, np.nan), (probs, 0.0), (score_corr, np.nan), (prob_corr, 0.0)):
                if values is not None:
                    values[index][hidden] = fill
    return RecursionResult(
        variant, windows, scores, probs, concentrates(variant), plan.thetas, grams, score_corr, prob_corr
    )


# ---------------------------------------------------------------- the finite-d correction


def _pair_directions(n: int) -> np.ndarray:
    """[n(n-1)/2, n, n]: e_ij + e_ji for every pair i < j."""
    iu, ju = np.triu_indices(n, 1)
    pairs = np.zeros((len(iu), n, n))
    pairs[np.arange(len(iu)), iu, ju] = 1.0
    pairs[np.arange(len(iu)), ju, iu] = 1.0
    return pairs


def input_law(variant: Variant):
    """The input Gram's law to order 1/d: (mu, sigma2, directions).

    G^(0) = input_gram + delta with E[delta] = mu ([n, n], zero diagonal; O(1/d)) and
    Cov(delta) = sum_a sigma2[a] directions[a] (x) directions[a] (directions [A, n, n], symmetric,
    zero diagonal: the rows have unit norm in both laws). Higher cumulants are O(d^-2).
      - alpha = 0 (both laws: uniform on the sphere): mu = 0, one direction e_ij + e_ji per pair, variance 1/d
        (E<x_i, x_j>^2 = 1/d and different pairs are uncorrelated, exactly).
      - "exact": <x_i, x_j> = alpha + (1 - alpha) <w_i, w_j>, w on the sphere of R^(d-1): mu = 0, one direction
        per pair, variance (1 - alpha)^2 / (d - 1), exactly.
      - "official": x_i = a_i / |a_i|, a_i = g_i + l u, l^2 = alpha / (1 - alpha). With gamma_ij = <g_i, g_j>/d,
        eta_i = <g_i, u>/d (variance 1/d), eps_i = |g_i|^2/d - 1, eps_u = |u|^2/d - 1 (variance 2/d), all
        uncorrelated, to first order
            delta_ij = (1 - a) gamma_ij + l (1 - a)^2 (eta_i + eta_j) - a (1 - a) / 2 (eps_i + eps_j) + a (1 - a) eps_u
        (a = alpha), and to second order E[delta_ij] = -a (1 - a^2) / (2d).
    """
    n, d, a = variant.seq_len, variant.d, variant.alpha
    pairs = _pair_directions(n)
    mu = np.zeros((n, n))
    if a == 0.0:
        return mu, np.full(len(pairs), 1.0 / d), pairs
    if variant.resolved_sampler != "official":
        return mu, np.full(len(pairs), (1.0 - a) ** 2 / (d - 1)), pairs
    off = 1.0 - np.eye(n)
    l = math.sqrt(a / (1.0 - a))
    token = np.zeros((n, n, n))  # e_i 1^T + 1 e_i^T off the diagonal
    token[np.arange(n), np.arange(n), :] = 1.0
    token[np.arange(n), :, np.arange(n)] = 1.0
    token *= off
    directions = np.concatenate(
        [(1.0 - a) * pairs, l * (1.0 - a) ** 2 * token, -0.5 * a * (1.0 - a) * token, (a * (1.0 - a) * off)[None]]
    )
    sigma2 = np.concatenate([np.full(len(pairs), 1.0 / d), np.full(n, 1.0 / d), np.full(n, 2.0 / d), [2.0 / d]])
    mu = -a * (1.0 - a * a) / (2.0 * d) * off
    return mu, sigma2, directions


def rope_input_law(n: int, d: int, theta: float):
    """RoPE's input statistics T_kl(m) = <x_k, R_m x_l>, m = -(n-1) .. n-1, for i.i.d. unit vectors uniform on
    the sphere (alpha = 0, both laws), to order 1/d: (mean [2n-1, n, n], pair law, diagonal law).

    E T_kl(m) = cbar(m) delta_kl exactly. For k != l, Cov(T_kl(m), T_kl(m')) = E[x_k^T R_m x_l x_l^T R_m'^T x_k]
    = tr(R_(m-m')) / d^2 = cbar(m - m') / d, and T_lk(m) = T_kl(-m); pairs are uncorrelated with each other and
    with the diagonals. T_kk(m) = sum_p cos(m theta_p) rho_p with rho ~ Dirichlet(1, ..., 1) over the d/2
    planes, so Cov(T_kk(m), T_kk(m')) = 2 (mean_p cos(m theta_p) cos(m' theta_p) - cbar(m) cbar(m')) / (d + 2),
    m, m' = 1 .. n-1 (T_kk(0) = 1, T_kk(-m) = T_kk(m)). Each law: (eigenvalues, eigenvectors) of its covariance.
    """
    c = rope_cosine_mean(2 * n - 1, d, theta)
    m = np.arange(-(n - 1), n)
    mean = c[np.abs(m)][:, None, None] * np.eye(n)
    freqs = rope_frequencies(d, theta)
    cosines = np.cos(np.arange(1, n)[:, None] * freqs[None, :])
    laws = []
    for cov in (
        c[np.abs(m[:, None] - m[None, :])] / d,
        2.0 / (d + 2) * (cosines @ cosines.T / len(freqs) - np.outer(c[1:n], c[1:n])),
    ):
        lam, vec = np.linalg.eigh(cov)
        keep = lam > 1e-12 * max(lam.max(), 1e-300)
        laws.append((lam[keep], vec[:, keep]))
    return mean, laws[0], laws[1]


def _rope_chunks(n: int, pair_law, diag_law, chunk: int):
    """(sigma2 [k], directions [k, 2n-1, n, n]) in chunks of about `chunk` directions."""
    lam, vec = pair_law
    iu, ju = np.triu_indices(n, 1)
    per = max(1, chunk // max(1, len(lam)))
    for first in range(0, len(iu), per):
        k, l = iu[first : first + per], ju[first : first + per]
        dirs = np.zeros((len(k), len(lam), 2 * n - 1, n, n))
        pair = np.arange(len(k))
        dirs[pair, :, :, k, l] = vec.T  # T_kl(m) += u(m)
        dirs[pair, :, :, l, k] = vec[::-1].T  # T_lk(m) = T_kl(-m) += u(-m)
        yield np.tile(lam, len(k)), dirs.reshape(-1, 2 * n - 1, n, n)
    lam, vec = diag_law
    dirs = np.zeros((n, len(lam), 2 * n - 1, n, n))
    for k in range(n):
        dirs[k, :, n:, k, k] = vec.T  # m = 1 .. n-1
        dirs[k, :, n - 2 :: -1, k, k] = vec.T  # m = -1 .. -(n-1)
    yield np.tile(lam, n), dirs.reshape(-1, 2 * n - 1, n, n)


def rope_state_layer(
    state: np.ndarray, plan: _Plan, index: int, scores: np.ndarray, probs: np.ndarray, last: bool = False
):
    """One layer on RoPE statistics T [..., M, n, n] (T[m + n - 1]_kl = <x_k, R_m x_l>, m = -(n-1) .. M - n):
    S_ij = T_ij(j - i) / (r_i r_j) / scale, P as `layer`, T'(m) = A T(m) A^T with A = P R^-1 (+ I): exact at every
    d (up to LayerNorm's centring), where the recursion takes T(m) = cbar(m) G. Each offset evolves on its own,
    so under the causal mask the offsets m <= 0 (M = n) are all the scores need."""
    n = state.shape[-1]
    inv_r = np.diagonal(state[..., n - 1, :, :], axis1=-2, axis2=-1)
    inv_r = 1.0 / (np.sqrt(inv_r / plan.d + LAYERNORM_EPS) if plan.layernorm else np.sqrt(inv_r))
    i = np.arange(n)
    offsets = np.minimum(i[None, :] - i[:, None] + n - 1, state.shape[-3] - 1)  # m > 0 only where invisible
    raw = state[..., offsets, i[:, None], i[None, :]]
    np.multiply(raw * inv_r[..., :, None], inv_r[..., None, :] / plan.divisor, out=scores)
    visible = plan.visible[index]
    np.copyto(probs, np.where(visible, scores, -np.inf))
    probs -= probs.max(axis=-1, keepdims=True)
    np.exp(probs, out=probs)
    probs /= probs.sum(axis=-1, keepdims=True)
    if last:
        return None
    mix = probs * inv_r[..., None, :]
    if plan.residual:
        mix = mix + np.eye(n)
    return mix[..., None, :, :] @ state @ _transpose(mix)[..., None, :, :]


def rope_state_run(state0: np.ndarray, plan: _Plan, n_layers: int):
    """`run` on RoPE statistics [..., 2n-1, n, n]: scores, probs [..., layer, n, n] (scores not masked)."""
    shape = state0.shape[:-3] + (n_layers,) + state0.shape[-2:]
    scores, probs = np.empty(shape), np.empty(shape)
    state = state0
    for index in range(n_layers):
        state = rope_state_layer(
            state, plan, index, scores[..., index, :, :], probs[..., index, :, :], last=index + 1 == n_layers
        )
    return scores, probs


def finite_d_correction(variant: Variant, window=None, *, plan: _Plan | None = None):
    """The O(1/d) term of E[scores], E[probs] [layer, n, n] beyond the recursion (module docstring).

    DF[mu] + 1/2 sum_a sigma_a^2 D^2F[v_a, v_a] by central differences of the whole decoder F (all layers at
    once) in its input statistics: the Gram matrix without RoPE (`input_law`), the statistics <x_k, R_m x_l>
    of every offset m with RoPE (`rope_input_law`; alpha = 0 and one rope_theta only). Not for LayerNorm
    with scale none / sqrt_d, whose scores do not concentrate. Cost: O(n^2) recursions without RoPE
    (O(layers n^5)), O(n^3) recursions of O(n^4) each with RoPE (O(layers n^7): n up to ~20).
    """
    if not concentrates(variant):
        raise ValueError(
            f"no finite-d correction for LayerNorm with scale '{variant.scale}': its scores "
            "do not concentrate (their fluctuations are as large as the softmax's temperature)"
        )
    n, n_layers = variant.seq_len, variant.n_layers
    if plan is None:
        plan = _plan(variant, _windows(window, n_layers, variant.window), (variant.rope_theta,) * n_layers)
    if variant.pe == "rope":
        if variant.alpha != 0.0:
            raise ValueError("the finite-d correction under RoPE is derived for alpha = 0 only")
        if len(set(plan.thetas)) != 1:
            raise ValueError("the finite-d correction under RoPE needs one rope_theta for every layer")
        base, pair_law, diag_law = rope_input_law(n, variant.d, plan.thetas[0])
        kept = n if variant.mask == "causal" else 2 * n - 1  # offsets the scores need (rope_state_layer)
        base, mu = base[:kept], None

        def forward(states):
            return rope_state_run(states, plan, n_layers)

        chunks = ((lam, dirs[:, :kept]) for lam, dirs in _rope_chunks(n, pair_law, diag_law, FD_CHUNK))
    else:
        base = input_gram(n, variant.alpha)
        mu, sigma2, directions = input_law(variant)

        def forward(states):
            return run(states, plan, n_layers)[:2]

        chunks = ((sigma2[f : f + FD_CHUNK], directions[f : f + FD_CHUNK]) for f in range(0, len(sigma2), FD_CHUNK))
    h = FD_STEP
    s0, p0 = forward(base)
    score_corr, prob_corr = np.zeros_like(s0), np.zeros_like(p0)
    if mu is not None and np.any(mu):
        sp, pp = forward(np.stack([base + h * mu, base - h * mu]))
        score_corr += (sp[0] - sp[1]) / (2 * h)
        prob_corr += (pp[0] - pp[1]) / (2 * h)
    for chunk_sigma2, chunk in chunks:
        w = 0.5 * chunk_sigma2[:, None, None, None] / h**2
        sp, pp = forward(np.concatenate([base + h * chunk, base - h * chunk]))
        k = len(chunk)
        score_corr += (w * (sp[:k] + sp[k:] - 2 * s0)).sum(axis=0)
        prob_corr += (w * (pp[:k] + pp[k:] - 2 * p0)).sum(axis=0)
    return score_corr, prob_corr


# ---------------------------------------------------------------- tables


def recursion_frame(
    name: str,
    variant: Variant,
    window=None,
    *,
    rope_theta=None,
    correction: bool = False,
    result: RecursionResult | None = None,
) -> pd.DataFrame:
    """Long table: one row per layer and visible (query_pos, key_pos), 0-based, like engine.result_frame.

    Columns: variant, layer, query_pos, key_pos, score, score_diagnorm (each visible diagonal's mean
    subtracted, as the simulation tables), prob, window (per layer; <NA>: all keys), concentrates, and, with
    the correction, score_correction and prob_correction; then the variant's parameter columns as the
    simulation tables have them (`sampler`: the resolved law).
    """
    if result is None:
        result = recursion(variant, window, rope_theta=rope_theta, correction=correction)
    diagnorm = np.full(result.scores.shape, np.nan)
    for index, visible in enumerate(result.visible):
        diagnorm[index] = diagonal_normalise(result.scores[index], visible)
    frames = []
    for index, visible in enumerate(result.visible):
        query, key = np.nonzero(visible)
        columns = {
            "variant": name,
            "layer": index,
            "query_pos": query,
            "key_pos": key,
            "score": result.scores[index][query, key],
            "score_diagnorm": diagnorm[index][query, key],
            "prob": result.probs[index][query, key],
        }
        if result.score_correction is not None:
            columns["score_correction"] = result.score_correction[index][query, key]
            columns["prob_correction"] = result.prob_correction[index][query, key]
        frame = pd.DataFrame(columns)
        frame.insert(7, "window", pd.array([result.windows[index]] * len(frame), dtype="Int64"))
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True)
    frame["concentrates"] = result.concentrates
    for key_name, value in result.variant.params().items():
        if key_name != "window":  # the per-layer column above is the window that applies
            frame[key_name] = value
    frame["sampler"] = result.variant.resolved_sampler
    if len(set(result.rope_thetas)) > 1:  # rope_theta given per layer
        frame["rope_theta"] = np.asarray(result.rope_thetas)[frame["layer"].to_numpy()]
    return frame


def cheap_correction(v: Variant) -> bool:
    """Whether `recursion_table` adds the finite-d correction: where the scores concentrate and without RoPE
    (O(n^2) recursions, about a second at n = 50). RoPE's correction runs its statistics over every offset, minutes
    at n = 50 (`finite_d_correction`), and is derived for alpha = 0 only; LayerNorm with scale none / sqrt_d has
    none."""
    return concentrates(v) and v.pe != "rope"


def recursion_table(variants: dict) -> pd.DataFrame:
    """The table of rule recursion (results/theory/recursion.parquet): every variant {name: Variant} in the
    large-d limit, each with its own window, one row per variant, layer and visible pair (a window's hidden pairs
    left out, as in the simulation tables).

    Columns: tables.RECURSION_COLUMNS (score, score_diagnorm, prob: the limit; concentrates; corrected: whether the
    O(1/d) correction was computed, `cheap_correction`; score_corrected, score_diagnorm_corrected, prob_corrected:
    the limit plus the correction, NaN where it was not), then the variant's parameters as the simulation tables
    have them (engine.result_frame: `sampler` resolved, `window` a nullable integer, last).
    """
    frames = []
    for name, v in variants.items():
        result = recursion(v)
        frame = recursion_frame(name, v, result=result)
        corrected = cheap_correction(v)
        frame["corrected"] = corrected
        values = {"score_corrected": np.nan, "score_diagnorm_corrected": np.nan, "prob_corrected": np.nan}
        if corrected:
            score_corr, prob_corr = finite_d_correction(v)
            scores, probs = result.scores + score_corr, result.probs + prob_corr
            diagnorm = np.stack([diagonal_normalise(s, visible) for s, visible in zip(scores, result.visible)])
            layer, query, key = (frame[c].to_numpy() for c in ("layer", "query_pos", "key_pos"))
            values = {
                "score_corrected": scores[layer, query, key],
                "score_diagnorm_corrected": diagnorm[layer, query, key],
                "prob_corrected": probs[layer, query, key],
            }
        for column, value in values.items():
            frame[column] = value
        params = list(v.params())
        frame["window"] = pd.array([v.window] * len(frame), dtype="Int64")  # the variant's, as result_frame
        frames.append(frame[RECURSION_COLUMNS + params])
    return pd.concat(frames, ignore_index=True)
