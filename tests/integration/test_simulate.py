"""The Monte Carlo engine: exact input laws, streaming moments, determinism, and the paper's simulated claims."""

import dataclasses
import json
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import torch

from causalpos.simulation import cpu_kernel as kern
from causalpos.simulation.cpu_random import block_state, normals16
from causalpos.simulation.cpu_vectors import vexp, vload, vstore
from causalpos.matrices import diagonal_normalise, visible_pairs
from causalpos.simulation.engine import result_frame, run_layers, simulate
from causalpos.simulation.sampling import (
    block_generator,
    block_sizes,
    rope_tables,
    sample_inputs,
    sample_inputs_official,
    sample_inputs_reduced,
)
from causalpos.simulation.variant import Variant

SMALL = dict(d=32, seq_len=12, n_layers=3, n_samples=3000)


def block_inputs(v: Variant, block: int = 0) -> np.ndarray:
    """The inputs X^(0) [size, n, D] that the CPU kernel decodes for one seeded block (v.sampler's law)."""
    plan = kern.KernelPlan(v, v.resolved_sampler)
    ((_, size),) = [bs for bs in block_sizes(v.n_samples) if bs[0] == block]
    return plan.inputs(block, size)


def lower(n: int, k: int = -1) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool), k)


def assert_results_equal(a, b):
    for field in ("score_mean", "score_sem", "prob_mean", "prob_sem"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)


def z_scores(a, b, visible):
    """(mean_a - mean_b) / combined SEM over visible, non-degenerate entries, scores and probs."""
    zs = []
    for mean, sem in (("score_mean", "score_sem"), ("prob_mean", "prob_sem")):
        se = np.hypot(getattr(a, sem), getattr(b, sem))[:, visible]
        diff = (getattr(a, mean) - getattr(b, mean))[:, visible]
        keep = se > 1e-6  # below float32 resolution (the S diagonal is 1 in every sample)
        zs.append(diff[keep] / se[keep])
        assert np.all(np.abs(diff[~keep]) < 1e-5)
    return np.concatenate(zs)


# ---------------------------------------------------------------- determinism


# over 20 s (~35 s, numba) when it is the first test of its worker to run the numba kernel: the kernel compiles on
# first use in a fresh clone (numba's cache then holds it)
@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_same_seed_same_result_other_seed_differs(backend):
    v = Variant(**SMALL, seed=7)
    a = simulate(v, backend=backend)
    b = simulate(v, backend=backend)
    assert_results_equal(a, b)
    c = simulate(Variant(**{**SMALL, "seed": 8}), backend=backend)
    assert not np.array_equal(a.score_mean, c.score_mean)


def test_cpu_kernel_bitwise_independent_of_chunks_and_threads():
    v = Variant(**{**SMALL, "n_samples": 2000})
    reference = simulate(v, chunk_size=256, threads=1)
    assert_results_equal(reference, simulate(v, chunk_size=4096, threads=2))
    assert_results_equal(reference, simulate(v, chunk_size=1000, threads=3))


def test_torch_path_independent_of_chunk_size():
    v = Variant(**{**SMALL, "n_samples": 1300})
    a = simulate(v, backend="torch", chunk_size=256)
    b = simulate(v, backend="torch", chunk_size=2048)
    for field in ("score_mean", "score_sem", "prob_mean", "prob_sem"):
        np.testing.assert_allclose(getattr(a, field), getattr(b, field), rtol=1e-6, atol=1e-9, err_msg=field)


def test_torch_path_close_across_thread_counts():
    v = Variant(**{**SMALL, "n_samples": 600})
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a = simulate(v, backend="torch")
        torch.set_num_threads(2)
        b = simulate(v, backend="torch")
    finally:
        torch.set_num_threads(before)
    for field in ("score_mean", "score_sem", "prob_mean", "prob_sem"):
        np.testing.assert_allclose(getattr(a, field), getattr(b, field), rtol=1e-6, atol=1e-9, err_msg=field)


def test_progress_reaches_n_samples():
    calls = []
    simulate(Variant(**{**SMALL, "n_samples": 700}), progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (700, 700)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)


# ---------------------------------------------------------------- the input laws

ALPHAS = [0.0, 0.05, 0.3, 0.8]  # 0 is the i.i.d. case, a law of its own
Z = 4.5  # tolerance in standard errors: ~1e-5 two-sided per check under N(0, 1)


def our_law_moments(d: int, alpha: float) -> tuple[float, float]:
    """Mean and variance of <x_i, x_j>, i != j, under our law (the "exact_full" and "exact_reduced" samplers).

    alpha = 0: x_i, x_j i.i.d. uniform on the unit sphere of R^d. Given x_i, <x_i, x_j> is
    one coordinate of a uniform unit vector: mean 0 by symmetry, and the d squared
    coordinates sum to 1 with equal means, so the variance is 1/d.
    alpha > 0: x_i = sqrt(a) u + sqrt(1-a) w_i with w_i orthogonal to u, so
    <x_i, x_j> = a + (1-a) <w_i, w_j>, and w_i, w_j are i.i.d. uniform on the unit
    sphere of the (d-1)-dimensional complement of u: mean a, variance (1-a)^2 / (d-1).
    """
    if alpha == 0:
        return 0.0, 1.0 / d
    return alpha, (1.0 - alpha) ** 2 / (d - 1)


def pair_statistics(x: np.ndarray, center: float) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: the mean over pairs i < j of <x_i, x_j> and of (<x_i, x_j> - center)^2.

    Pairs within a sample share vectors; the samples are independent, so these
    per-sample values give honest standard errors.
    """
    x = x.astype(np.float64)
    gram = np.einsum("bik,bjk->bij", x, x)
    rows, cols = np.triu_indices(x.shape[1], 1)
    pairs = gram[:, rows, cols]
    return pairs.mean(axis=1), ((pairs - center) ** 2).mean(axis=1)


def sem(values: np.ndarray) -> float:
    return values.std(ddof=1) / np.sqrt(len(values))


def assert_mean_is(values: np.ndarray, expected: float, what: str):
    z = (values.mean() - expected) / sem(values)
    assert abs(z) < Z, f"{what}: {values.mean():.6g} vs {expected:.6g} ({z:+.1f} standard errors)"


def assert_same_mean(a: np.ndarray, b: np.ndarray, what: str):
    z = (a.mean() - b.mean()) / np.hypot(sem(a), sem(b))
    assert abs(z) < Z, f"{what}: {a.mean():.6g} vs {b.mean():.6g} ({z:+.1f} standard errors)"


def check_our_law(x: np.ndarray, d: int, alpha: float):
    """Unit rows; mean and variance of the pairwise inner products equal the closed forms."""
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=2e-6)
    mean, var = our_law_moments(d, alpha)
    first, second = pair_statistics(x, mean)
    assert_mean_is(first, mean, "E<x_i, x_j>")
    assert_mean_is(second, var, "Var<x_i, x_j>")


def kernel_inputs(sampler: str, d: int, alpha: float, n: int = 10, blocks: int = 8) -> np.ndarray:
    v = Variant(d=d, seq_len=n, alpha=alpha, n_samples=256 * blocks, sampler=sampler)
    return np.concatenate([block_inputs(v, b) for b in range(blocks)])


def torch_inputs(draw, d: int, alpha: float, n: int = 10, batch: int = 2048) -> np.ndarray:
    return draw(batch, n, d, alpha, torch.Generator().manual_seed(5)).numpy()


def official_reference(d: int, alpha: float, n: int = 10, samples: int = 20000) -> np.ndarray:
    """The authors' formula in plain numpy, on its own random stream: normalize(g_i + l u)."""
    rng = np.random.default_rng(12345)
    g, u = rng.standard_normal((samples, n, d)), rng.standard_normal((samples, 1, d))
    x = g + np.sqrt(alpha / (1.0 - alpha)) * u
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("sampler,d", [("exact_full", 16), ("exact_reduced", 32), ("exact_reduced", 8)])
def test_kernel_inputs_have_our_law(sampler, d, alpha):
    """d = 8 < n = 10: the Bartlett factor is taller than wide (rows past k all Gaussian)."""
    x = kernel_inputs(sampler, d, alpha)
    lead = 1 if alpha > 0 else 0  # the shared coordinate
    expected_width = d if sampler == "exact_full" else lead + min(10, d - lead)
    assert x.shape == (2048, 10, expected_width)
    check_our_law(x, d, alpha)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("draw", [sample_inputs, sample_inputs_reduced], ids=["exact_full", "exact_reduced"])
def test_torch_samplers_have_our_law(draw, alpha):
    check_our_law(torch_inputs(draw, 24, alpha), 24, alpha)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("d", [16, 8])
def test_official_inputs_follow_the_authors_formula_on_both_backends(alpha, d):
    """Unit rows; first and second moments of <x_i, x_j> equal an independent numpy Monte Carlo of
    normalize(g_i + sqrt(alpha / (1 - alpha)) u); at alpha = 0 (l = 0) our i.i.d. closed forms.
    The CPU kernel draws the law in the reduced basis where it is smaller than d (d = 16 > n = 10: inner
    products are all the decoder sees, and rotations keep them), in R^d otherwise (d = 8)."""
    lead = 1 if alpha > 0 else 0
    kernel_width = min(d, lead + min(10, d - lead))
    first_ref, second_ref = pair_statistics(official_reference(d, alpha), 0.0)
    for backend, x, width in (
        ("numba", kernel_inputs("official", d, alpha), kernel_width),
        ("torch", torch_inputs(sample_inputs_official, d, alpha), d),
    ):
        assert x.shape == (2048, 10, width)
        np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=2e-6)
        first, second = pair_statistics(x, 0.0)
        assert_same_mean(first, first_ref, f"{backend} E<x_i, x_j>")
        assert_same_mean(second, second_ref, f"{backend} E<x_i, x_j>^2")
        if alpha == 0:
            check_our_law(x, d, 0.0)


def test_official_law_is_not_ours():
    """The shared part l u has a random length, which adds variance: Var<x_i, x_j> is well above
    our (1 - alpha)^2 / (d - 1) (the reason both laws are simulated)."""
    d, alpha = 16, 0.3
    x = official_reference(d, alpha)
    first, _ = pair_statistics(x, 0.0)
    _, squares = pair_statistics(x, first.mean())  # mean: the variance, up to O(1/N)
    _, ours = our_law_moments(d, alpha)
    assert (squares.mean() - ours) / sem(squares) > 10 * Z


@pytest.mark.parametrize("alpha", [0.0, 0.4])
def test_reduced_inputs_are_lower_trapezoidal(alpha):
    v = Variant(d=64, seq_len=20, alpha=alpha, n_samples=300, sampler="exact_reduced")
    lead = 1 if alpha > 0 else 0  # column 0 is the shared direction when there is one
    for x in (block_inputs(v, 0), torch_inputs(sample_inputs_reduced, 64, alpha, n=20, batch=300)):
        assert x.shape[1:] == (20, lead + 20)
        for i in range(20):
            assert np.all(x[:, i, lead + i + 1 :] == 0)  # the Bartlett triangle
            assert np.all(x[:, i, lead + i] > 0)  # its chi diagonal
        if lead:
            assert np.all(x[:, :, 0] == np.float32(np.sqrt(alpha)))


@pytest.mark.parametrize("alpha", [0.0, 0.4])
def test_official_reduced_inputs_are_lower_trapezoidal(alpha):
    """The official law in the reduced basis (cpu_inputs): row i of X^(0) is zero past column lead + i, with
    a positive Bartlett diagonal; with alpha > 0 column 0 (along u) is not constant, unlike our law's."""
    v = Variant(d=64, seq_len=20, alpha=alpha, n_samples=300)
    lead = 1 if alpha > 0 else 0
    x = block_inputs(v, 0)
    assert x.shape[1:] == (20, lead + 20)
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=2e-6)
    for i in range(20):
        assert np.all(x[:, i, lead + i + 1 :] == 0)
        assert np.all(x[:, i, lead + i] > 0)
    if lead:
        assert x[:, :, 0].std() > 0.05


def test_exact_picks_the_reduced_basis_only_where_it_is_exact_and_smaller():
    assert Variant(d=64, seq_len=50, sampler="exact").resolved_sampler == "exact_reduced"
    assert Variant(d=32, seq_len=50, sampler="exact").resolved_sampler == "exact_full"
    assert Variant(d=64, seq_len=50, norm="layernorm", sampler="exact").resolved_sampler == "exact_full"
    assert Variant(d=64, seq_len=50, pe="rope", sampler="exact").resolved_sampler == "exact_full"
    assert Variant().sampler == "official"  # the paper's construction is the default
    for sampler in ("exact_full", "exact_reduced", "official"):
        assert Variant(sampler=sampler).resolved_sampler == sampler


# ---------------------------------------------------------------- the engine's statistics


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_means_and_sems_equal_direct_numpy_on_the_same_samples(backend):
    """Materialise every score and probability of the engine's own samples; average them with numpy."""
    v = Variant(d=24, seq_len=9, n_layers=3, alpha=0.2, mask="causal", n_samples=700, seed=11, sampler="exact")
    n = v.seq_len
    if backend == "numba":
        x = np.concatenate([block_inputs(v, b) for b in range(3)])
    else:
        gen = [block_generator(v.seed, b, torch.device("cpu")) for b in range(3)]
        x = torch.cat(
            [sample_inputs_reduced(size, n, v.d, v.alpha, g) for g, size in zip(gen, (256, 256, 188))]
        ).numpy()
    assert x.shape[0] == v.n_samples
    mask = torch.full((n, n), float("-inf")).triu_(1)
    result = simulate(v, backend=backend)
    for layer, (scores, probs) in enumerate(run_layers(torch.from_numpy(x), v, mask)):
        for name, values in (("score", scores), ("prob", probs)):
            values = values.double().numpy()
            mean, sem = values.mean(0), values.std(0, ddof=1) / np.sqrt(v.n_samples)
            got_mean, got_sem = getattr(result, f"{name}_mean")[layer], getattr(result, f"{name}_sem")[layer]
            np.testing.assert_allclose(got_mean, mean, rtol=0, atol=2e-6, err_msg=f"{name} mean, layer {layer}")
            np.testing.assert_allclose(got_sem, sem, rtol=2e-3, atol=2e-8, err_msg=f"{name} sem, layer {layer}")


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(sampler="exact"),
        dict(mask="none", alpha=0.3, sampler="exact"),
        dict(residual=False, sampler="exact"),
        dict(norm="layernorm", scale="sqrt_d"),
        dict(norm="layernorm", scale="none", d=20),
        dict(pe="rope", alpha=0.5),
        dict(pe="rope", mask="none", norm="layernorm", scale="d", residual=False),
        dict(alpha=0.3, sampler="exact"),
        dict(alpha=0.3, sampler="official"),
        dict(alpha=0.3, sampler="exact_full"),
    ],
    ids=[
        "l2",
        "nomask",
        "nores",
        "ln_sqrtd",
        "ln_none_odd_width",
        "rope",
        "rope_nomask_ln",
        "l2_shared",
        "official",
        "l2_full",
    ],
)
def test_cpu_kernel_equals_torch_decoder_on_identical_inputs(kwargs):
    """Sample by sample: the kernel's block sums equal the torch decoder's on the same X^(0).

    l2 runs in the reduced basis, whose triangular widths start one column later with a
    shared coordinate (alpha > 0) than without (alpha = 0).
    """
    v = Variant(**{**dict(d=32, seq_len=11, n_layers=3, n_samples=256), **kwargs})
    plan = kern.KernelPlan(v, v.resolved_sampler)
    x = plan.inputs(0, 256)
    sums = plan.run_block(0, 256, np.zeros((v.n_layers, 2, v.seq_len, plan.n_pad), np.float32))
    n = v.seq_len
    mask = torch.full((n, n), float("-inf")).triu_(1) if v.mask == "causal" else None
    rope = rope_tables(n, v.d, v.rope_theta) if v.pe == "rope" else None
    visible = visible_pairs(n, v.mask)
    for layer, (scores, probs) in enumerate(run_layers(torch.from_numpy(x), v, mask, rope)):
        for slot, values in enumerate((scores, scores**2, probs, probs**2)):
            expected = values.double().sum(0).numpy()[visible]
            got = sums[layer, slot, :, :n][visible]
            np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-4, err_msg=f"layer {layer} slot {slot}")


def test_kernel_vector_exp_is_float32_accurate():
    """The softmax's polynomial exp (Cephes expf) against float64 exp, over the range it sees."""
    import numba

    @numba.njit
    def exp_rows(x, out):
        for i in range(x.shape[0]):
            for t in range(0, x.shape[1], 8):
                vstore(out, i, t, vexp(vload(x, i, t), np.float32(1.0), np.float32(0.0)))

    x = np.linspace(-87.0, 10.0, 64 * 1000, dtype=np.float32).reshape(1000, 64)
    out = np.empty_like(x)
    exp_rows(x, out)
    exact = np.exp(x.astype(np.float64))
    assert np.max(np.abs(out - exact) / exact) < 4e-7  # a few float32 ulp


def kernel_normals(seed: int, block: int, count: int) -> np.ndarray:
    import numba

    @numba.njit
    def fill(state, out):
        for pos in range(0, out.size, 16):
            normals16(state, out, pos)

    out = np.empty(count, np.float32)
    fill(block_state(seed, block), out)
    return out.astype(np.float64)


def test_kernel_normals_are_standard_normal():
    """The kernel's generator (xoshiro128++ lanes, vector Box-Muller with polynomial log, sin and cos) against
    N(0, 1): the first four moments within Z standard errors of 0, 1, 0, 3 (the standard errors from the normal's
    own higher moments), a Kolmogorov-Smirnov test, the two normals of one Box-Muller pair (8 apart) and
    neighbouring ones uncorrelated, also in their squares; another block's stream is another stream."""
    from scipy import stats

    count = 1 << 21
    x = kernel_normals(0, 0, count)
    for power, mean, variance in ((1, 0.0, 1.0), (2, 1.0, 2.0), (3, 0.0, 15.0), (4, 3.0, 96.0)):
        z = ((x**power).mean() - mean) / np.sqrt(variance / count)
        assert abs(z) < Z, f"E[x^{power}]: {z:+.1f} standard errors"
    assert stats.kstest(x, "norm").pvalue > 1e-4
    for lag in (1, 8, 16):
        for f in (lambda v: v, np.square):
            r = np.corrcoef(f(x[:-lag]), f(x[lag:]))[0, 1]
            assert abs(r) * np.sqrt(count) < Z, f"lag {lag}: correlation {r:.2e}"
    other = kernel_normals(0, 1, 4096)
    assert abs(np.corrcoef(x[:4096], other)[0, 1]) * np.sqrt(4096) < Z
    np.testing.assert_array_equal(kernel_normals(0, 0, 4096), x[:4096])  # the same seed and block, the same numbers


@pytest.mark.parametrize("alpha", [0.0, 0.2])
def test_full_and_reduced_samplers_agree_statistically(alpha):
    """One law in two bases: i.i.d. at alpha = 0, a shared direction otherwise."""
    v = Variant(d=40, seq_len=12, n_layers=3, alpha=alpha, n_samples=6000)
    full = simulate(dataclasses.replace(v, sampler="exact_full"))
    reduced = simulate(dataclasses.replace(v, sampler="exact_reduced"))
    assert (full.sampler, reduced.sampler) == ("exact_full", "exact_reduced")
    z = z_scores(full, reduced, lower(12, 0))
    assert np.abs(z).max() < 5.0
    assert abs(z.mean()) < 0.5  # no systematic offset (entries are correlated, so not 1/sqrt(len))
    assert 0.7 < z.std() < 1.3  # SEMs are right: differences scatter like N(0, 1)


@pytest.mark.parametrize(
    "kwargs", [dict(pe="rope", mask="none"), dict(alpha=0.3, sampler="official")], ids=["rope_nomask", "official"]
)
def test_cpu_kernel_and_torch_path_agree_statistically(kwargs):
    v = Variant(d=32, seq_len=10, n_layers=3, n_samples=4000, **kwargs)
    numba_result, torch_result = simulate(v), simulate(v, backend="torch")
    assert numba_result.sampler == torch_result.sampler == v.resolved_sampler
    z = z_scores(numba_result, torch_result, visible_pairs(10, v.mask))
    assert np.abs(z).max() < 5.0
    assert 0.7 < z.std() < 1.3


# ---------------------------------------------------------------- what the paper shows


@pytest.mark.parametrize("alpha", [0.0, 0.2])
def test_layer1_scores_are_one_on_diagonal_and_alpha_off_it(alpha):
    n = 12
    result = simulate(Variant(**{**SMALL, "alpha": alpha}))
    first = result.score_mean[0]
    np.testing.assert_allclose(np.diag(first), 1.0, atol=1e-6)
    off = ~np.eye(n, dtype=bool)
    z = (first[off] - alpha) / result.score_sem[0][off]
    assert np.abs(z).max() < 5.0


def test_unmasked_probability_rows_sum_to_one():
    result = simulate(Variant(**{**SMALL, "mask": "none", "pe": "rope"}))
    np.testing.assert_allclose(result.prob_mean.sum(-1), 1.0, atol=1e-5)


def test_causal_probabilities_vanish_above_the_diagonal():
    result = simulate(Variant(**SMALL))
    upper = np.triu(np.ones((12, 12), dtype=bool), 1)
    assert np.all(result.prob_mean[:, upper] == 0) and np.all(result.prob_sem[:, upper] == 0)
    np.testing.assert_allclose(result.prob_mean.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(result.score_mean, result.score_mean.transpose(0, 2, 1))  # Q = K


def _row_pattern(variant: Variant):
    """Layer-2 scores in cosine units: mean within-row spread and mean correlation with the key index."""
    result = simulate(variant)
    cosine = result.score_mean[1] * variant.score_divisor / (variant.d if variant.norm == "layernorm" else 1)
    n = variant.seq_len
    spread = np.mean([cosine[i, :i].std() for i in range(2, n)])
    trend = np.mean([np.corrcoef(np.arange(i), cosine[i, :i])[0, 1] for i in range(3, n)])
    return spread, trend


def test_layernorm_sqrt_d_scaling_weakens_the_pattern_and_d_scaling_restores_it():
    """Appendix B: LayerNorm rows have norm sqrt(d), so sqrt(d) scaling sharpens softmax and washes
    out the positional pattern; scaling by d gives l2-like scores and the pattern comes back."""
    base = dict(d=64, seq_len=20, n_layers=2, n_samples=4000)
    l2_spread, l2_trend = _row_pattern(Variant(**base))
    sqrt_spread, sqrt_trend = _row_pattern(Variant(**base, norm="layernorm", scale="sqrt_d"))
    d_spread, d_trend = _row_pattern(Variant(**base, norm="layernorm", scale="d"))
    assert l2_trend > 0.8 and d_trend > 0.8  # closer keys score higher
    assert sqrt_spread < 0.5 * l2_spread and abs(sqrt_trend) < 0.3
    assert d_spread > l2_spread


def test_rope_pattern_is_relative_only_without_the_causal_mask():
    """Fig. 4 vs Fig. 10: with RoPE alone the layer-2 scores are constant along diagonals (up to
    Monte Carlo noise); the causal mask makes them depend on the absolute position."""
    n = 16
    rms_z, largest = {}, {}
    for mask in ("none", "causal"):
        result = simulate(Variant(pe="rope", mask=mask, d=32, seq_len=n, n_layers=2, n_samples=8000))
        visible = visible_pairs(n, mask)
        off = visible & ~np.eye(n, dtype=bool)
        residual = diagonal_normalise(result.score_mean[1], visible)[off]
        rms_z[mask] = np.sqrt(np.mean((residual / result.score_sem[1][off]) ** 2))
        largest[mask] = np.abs(residual).max()
    assert rms_z["none"] < 1.5  # what noise alone gives
    assert rms_z["causal"] > 3.0
    assert largest["causal"] > 3 * largest["none"]


# ---------------------------------------------------------------- tables and validation


@pytest.mark.parametrize(
    "mask,sampler,written",
    [
        ("causal", "exact", "exact_reduced"),
        ("none", "exact", "exact_reduced"),
        ("causal", "official", "official"),
        ("causal", "exact_full", "exact_full"),
    ],
)
def test_result_frame_rows_and_columns(mask, sampler, written):
    v = Variant(**{**SMALL, "mask": mask, "n_samples": 300, "sampler": sampler})
    result = simulate(v)
    frame = result_frame(result, "demo")
    assert result.sampler == written and (frame.sampler == written).all()  # resolved, never "exact"
    n, layers = v.seq_len, v.n_layers
    pairs = n * (n + 1) // 2 if mask == "causal" else n * n
    assert len(frame) == layers * pairs
    engine_columns = [
        "variant",
        "layer",
        "query_pos",
        "key_pos",
        "score_mean",
        "score_sem",
        "score_diagnorm",
        "prob_mean",
        "prob_sem",
    ]
    assert list(frame.columns) == engine_columns + list(v.params())  # sampler: the last parameter
    assert not frame.duplicated(["layer", "query_pos", "key_pos"]).any()
    if mask == "causal":
        assert (frame.key_pos <= frame.query_pos).all()
    row = frame[(frame.layer == 1) & (frame.query_pos == 5) & (frame.key_pos == 2)].iloc[0]
    assert row.score_mean == result.score_mean[1, 5, 2] and row.prob_sem == result.prob_sem[1, 5, 2]
    assert (frame.variant == "demo").all() and (frame.d == v.d).all() and (frame.sampler == result.sampler).all()
    assert isinstance(frame, pd.DataFrame) and frame.score_diagnorm.notna().all()


@pytest.mark.parametrize(
    "key,value",
    [
        ("norm", "rms"),
        ("scale", "d2"),
        ("pe", "alibi"),
        ("mask", "sliding"),
        ("alpha", 1.0),
        ("alpha", -0.5),
        ("seq_len", 1),
        ("d", 1),
        ("d", 33),
        ("n_layers", 0),
        ("n_samples", 1),
        ("rope_theta", 0.0),
        ("sampler", "fast"),
        ("sampler", "exact_reduced"),
        ("sampler", "auto"),
        ("sampler", "full"),
    ],
)
def test_variant_validation_names_the_key(key, value):
    kwargs = {key: value}
    if key == "d" and value == 33:
        kwargs["pe"] = "rope"  # odd d is only invalid with RoPE
    if value == "exact_reduced":
        kwargs["norm"] = "layernorm"  # the reduced basis is only exact for l2 without RoPE
    with pytest.raises(ValueError, match=f"'{key}'"):
        Variant(**kwargs)


def test_invalid_engine_options_rejected():
    with pytest.raises(ValueError, match="backend"):
        simulate(Variant(n_samples=10), backend="jax")


# ---------------------------------------------------------------- streaming memory

_RSS_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    from causalpos.simulation.engine import simulate
    from causalpos.simulation.variant import Variant
    backend, small, large = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB on Linux
    for _ in range(2):  # compile or load the kernel; let threads and allocators settle
        simulate(Variant(n_samples=small), backend=backend)
    before = peak()
    simulate(Variant(n_samples=large), backend=backend)
    print(json.dumps({"before": before, "after": peak()}))
""")


# over 20 s (~35 s, torch side): a process per size, each simulating enough samples to tell memory from N
@pytest.mark.parametrize("backend,small,large", [("numba", 4096, 40000), ("torch", 1024, 6144)])
def test_peak_memory_does_not_grow_with_n_samples(backend, small, large):
    """Paper-scale shapes (n = 50, d = 64, 4 layers). Holding the inputs of `large` samples alone
    would take large*50*64*4 bytes (512 MB / 79 MB) and every layer's S and A eight times 50*50*4
    per sample more (4 GB / 490 MB); the streaming engine's peak must stay flat."""
    out = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, backend, str(small), str(large)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    rss = json.loads(out.stdout.strip().splitlines()[-1])
    assert rss["after"] - rss["before"] < 48, rss


# over 20 s (~60 s): numba compiles the kernels twice, in fresh processes, for each of the four kinds of variant
def test_a_kernel_compiled_in_the_job_and_one_loaded_from_the_cache_give_the_same_bits(tmp_path):
    """A simulate job either compiles the numba kernels or loads them from numba's cache; with fast-math
    reassociation the two summed differently (2.3e-9 apart, issue 40). Two processes on an empty cache folder: the
    first compiles (and fills it), the second loads; every variant kind's table is equal bit for bit."""
    script = textwrap.dedent(
        """
        import hashlib, sys
        import numpy as np
        from causalpos.simulation.engine import simulate
        from causalpos.simulation.variant import Variant
        kinds = [
            dict(norm="l2", alpha=0.0), dict(norm="l2", alpha=0.2), dict(norm="layernorm", scale="sqrt_d"),
            dict(norm="l2", pe="rope"),
        ]
        for kind in kinds:
            v = Variant(d=64, seq_len=12, n_layers=4, n_samples=600, seed=0, **kind)
            r = simulate(v, device="cpu", backend="numba", threads=1)
            arrays = [a for a in vars(r).values() if isinstance(a, np.ndarray)]
            print(hashlib.sha256(b"".join(a.tobytes() for a in arrays)).hexdigest())
        """
    )
    env = {**__import__("os").environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True) for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr[-3000:] + runs[1].stderr[-3000:]
    assert any((tmp_path / "numba").rglob("*.nbi"))  # the first run filled the cache, the second read it
    compiled, cached = (run.stdout.split() for run in runs)
    assert len(compiled) == 4 and compiled == cached
