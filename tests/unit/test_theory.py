"""The paper's claims about the closed forms (Section 3, Appendix A), checked without stored outputs."""

import numpy as np
import pytest

from causalpos.simulation import theory
from causalpos.simulation.engine import simulate
from causalpos.simulation.variant import Variant

ALPHAS = [0.0, 0.05, 0.2, 0.5, 0.9, 0.99]
POSITIONS = np.arange(1, 301)


def layer2_scores_from_gram(n: int, alpha: float, residual: bool = True) -> np.ndarray:
    """The same quantity as `theory.layer2_scores`, by matrix algebra instead of the closed form.

    x^(1) = (A + r I) x^(0) with A the expected layer-1 attention, so the expected
    Gram matrix is (A + rI) G0 (A + rI)^T with G0 = (1 - alpha) I + alpha 11^T.
    """
    mix = theory.layer1_attention(n, alpha) + (np.eye(n) if residual else 0.0)  # checks alpha
    gram0 = (1 - alpha) * np.eye(n) + alpha * np.ones((n, n))
    gram1 = mix @ gram0 @ mix.T
    norms = np.sqrt(np.diag(gram1))
    scores = gram1 / np.outer(norms, norms)
    scores[np.triu_indices(n, k=1)] = np.nan
    return scores


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("h", [theory.h, theory.h_no_residual], ids=["h", "h_prime"])
def test_h_strictly_decreasing(h, alpha):
    """Appendix A.1 (h) and A.2 (h'): the norm after layer 1 falls strictly with position."""
    values = h(POSITIONS, alpha)
    assert np.all(np.isfinite(values)) and np.all(values > 0)
    assert np.all(np.diff(values) < 0)


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("alpha", ALPHAS)
def test_layer2_score_strictly_increases_with_key(alpha, residual):
    """Section 3.2: for every query i the layer-2 score rises strictly with the key j <= i."""
    n = 60
    scores = theory.layer2_scores(n, alpha, residual)
    for i in range(1, n):
        assert np.all(np.diff(scores[i, : i + 1]) > 0), f"row {i}"


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("n", [1, 2, 7, 50])
def test_layer2_diagonal_one_and_nan_above(n, residual):
    scores = theory.layer2_scores(n, 0.3, residual)
    assert scores.shape == (n, n)
    assert np.all(np.diag(scores) == 1.0)
    above = np.triu(np.ones((n, n), dtype=bool), 1)
    assert np.all(np.isnan(scores[above]))
    below = np.tril(np.ones((n, n), dtype=bool), -1)
    assert np.all((scores[below] > 0) & (scores[below] < 1))


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("alpha", ALPHAS)
def test_closed_form_equals_gram_matrix_computation(alpha, residual):
    """Eq. 4 (and its App. A.2 analogue) against (A + rI) G0 (A + rI)^T computed by matrix algebra."""
    n = 40
    closed = theory.layer2_scores(n, alpha, residual)
    gram = layer2_scores_from_gram(n, alpha, residual)
    np.testing.assert_allclose(closed, gram, rtol=1e-12, atol=1e-14, equal_nan=True)


def test_layer1_attention_is_eq2_softmax():
    n, alpha = 12, 0.2
    attention = theory.layer1_attention(n, alpha)
    logits = np.where(np.eye(n, dtype=bool), 1.0, alpha)
    logits[np.triu_indices(n, 1)] = -np.inf
    expected = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(attention, expected, rtol=1e-12)


@pytest.mark.parametrize("alpha", [-0.1, 1.0, 1.5])
@pytest.mark.parametrize(
    "fn",
    [
        lambda a: theory.g([1, 2], a),
        lambda a: theory.h([1, 2], a),
        lambda a: theory.g_no_residual([1, 2], a),
        lambda a: theory.h_no_residual([1, 2], a),
        lambda a: theory.layer1_attention(5, a),
        lambda a: theory.layer2_scores(5, a),
        lambda a: theory.layer2_scores(5, a, residual=False),
        lambda a: layer2_scores_from_gram(5, a),
    ],
    ids=["g", "h", "g_prime", "h_prime", "layer1", "layer2", "layer2_nores", "gram"],
)
def test_alpha_outside_unit_interval_rejected(fn, alpha):
    with pytest.raises(ValueError, match="alpha"):
        fn(alpha)


def test_positions_are_one_based():
    with pytest.raises(ValueError, match="1-based"):
        theory.h([0, 1], 0.1)


def _query_spread(alpha: float, first: int = 10, n: int = 50) -> float:
    """Largest relative spread over queries i >= first of the layer-2 score at a fixed key j."""
    scores = theory.layer2_scores(n, alpha)
    spreads = []
    for j in range(first - 1):
        column = scores[first:, j]
        spreads.append((column.max() - column.min()) / column.mean())
    return max(spreads)


def test_nonzero_alpha_saturates_in_the_query():
    """Section 4.1: with alpha != 0 the layer-2 pattern is nearly independent of the query i.

    g(i)/h(i) tends to a constant (shared leading terms), so a key's score barely
    changes across queries, while at alpha = 0 it keeps falling with i.
    """
    assert _query_spread(0.0) > 0.5
    spreads = [_query_spread(a) for a in (0.1, 0.2, 0.5)]
    assert spreads[1] < 0.05
    assert spreads == sorted(spreads, reverse=True)  # the larger alpha, the faster the saturation
    scores = theory.layer2_scores(50, 0.2)
    row_range = np.nanmax(scores[49, :49]) - np.nanmin(scores[49, :49])
    assert row_range > 10 * _query_spread(0.2) * np.nanmean(scores[10:, 0])  # it varies with the key


@pytest.mark.parametrize("alpha,sampler", [(0.0, "exact"), (0.2, "exact"), (0.2, "official")])
def test_monte_carlo_converges_to_closed_form_as_d_grows(alpha, sampler):
    """The closed form uses expected inner products; sampled ones deviate by O(1/sqrt(d)).

    So the simulated layer-2 scores (l2, causal, residual) approach Eq. 4 as d
    grows, and at d = 1024 the remaining gap is within the Monte Carlo error.
    The authors' law too: <g_i + l u, g_j + l u> / (|g_i + l u| |g_j + l u|)
    concentrates at l^2 d / ((1 + l^2) d) = alpha (at alpha = 0 it is our law).
    """
    n = 8
    closed = theory.layer2_scores(n, alpha)
    below = np.tril(np.ones((n, n), dtype=bool), -1)
    gaps, worst_z = [], None
    for d in (16, 64, 256, 1024):
        result = simulate(Variant(alpha=alpha, d=d, seq_len=n, n_layers=2, n_samples=4000, seed=3, sampler=sampler))
        gap = np.abs(result.score_mean[1] - closed)[below]
        gaps.append(gap.max())
        worst_z = (gap / result.score_sem[1][below]).max()
    assert all(later < earlier for earlier, later in zip(gaps, gaps[1:])), gaps
    assert gaps[0] > 5 * gaps[-1]
    assert worst_z < 4.0
