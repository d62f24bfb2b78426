"""The simulations' standard errors: score sums per group of sample blocks, and the bootstrap over them."""

import numpy as np
import pytest
import torch

from causalpos.analysis.claims.replicates import LedgerInputs, estimate
from causalpos.simulation import cpu_kernel as kern
from causalpos.simulation.engine import groups_frame, result_frame, run_layers, simulate
from causalpos.simulation.sampling import SE_GROUPS, block_groups, block_sizes
from causalpos.simulation.variant import Variant
from causalpos.tril import packed_index, packed_pairs


@pytest.mark.parametrize("n_blocks", [1, 7, 32, 33, 391])
def test_block_groups_are_consecutive_runs_of_near_equal_length(n_blocks):
    groups = block_groups(n_blocks)
    sizes = np.bincount(groups)
    assert len(sizes) == min(SE_GROUPS, n_blocks) and sizes.min() >= 1 and sizes.max() - sizes.min() <= 1
    assert np.all(np.diff(groups) >= 0)  # consecutive blocks: a group is a run of the seeded stream


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("kwargs", [dict(), dict(mask="none", pe="rope"), dict(sampler="exact", alpha=0.3)])
def test_group_sums_add_up_to_the_mean_and_pack_in_tril_order(backend, kwargs):
    v = Variant(d=16, seq_len=9, n_layers=3, n_samples=256 * 5 + 100, **kwargs)
    result = simulate(v, backend=backend)
    sizes = result.group_sizes
    assert sizes.sum() == v.n_samples and len(sizes) == len(block_sizes(v.n_samples))  # 6 blocks < 32: one each
    np.testing.assert_allclose(result.group_score_sums.sum(0) / v.n_samples, result.score_mean, rtol=0, atol=1e-12)
    frame = groups_frame(result, "demo")
    assert len(frame) == v.n_layers * len(sizes) and (frame["seq_len"] == v.seq_len).all()
    row = frame[(frame["layer"] == 2) & (frame["group"] == 3)].iloc[0]
    assert row["n_samples"] == sizes[3]
    q, k = packed_pairs(v.seq_len)
    np.testing.assert_array_equal(row["sums"], result.group_score_sums[3, 2][q, k])
    assert row["sums"][packed_index(7, 4)] == result.group_score_sums[3, 2, 7, 4]


def per_sample_scores(v: Variant) -> np.ndarray:
    """Every sample's scores [N, layer, n, n], decoded by the torch decoder from the CPU kernel's own inputs."""
    plan = kern.KernelPlan(v, v.resolved_sampler)
    x = np.concatenate([plan.inputs(b, size) for b, size in block_sizes(v.n_samples)])
    n = v.seq_len
    mask = torch.full((n, n), float("-inf")).triu_(1)
    return np.stack([s.double().numpy() for s, _ in run_layers(torch.from_numpy(x), v, mask)], axis=1)


def test_bootstrap_over_blocks_gives_the_metric_its_own_standard_error():
    """A metric over many entries (here the mean layer-2 off-diagonal score) has the standard error of its
    per-sample values, sd / sqrt(N): entries of one sample are correlated, so treating them as independent
    (the parametric replicates from per-entry SEMs) understates it. The bootstrap over groups of blocks
    must match the direct per-sample value; the parametric one must fall well short of it."""
    v = Variant(d=16, seq_len=10, n_layers=2, n_samples=256 * 64, alpha=0.2, seed=4)
    result = simulate(v)
    off = np.tril(np.ones((v.seq_len, v.seq_len), dtype=bool), -1)
    per_sample = per_sample_scores(v)[:, 1][:, off].mean(axis=1)
    direct_se = per_sample.std(ddof=1) / np.sqrt(v.n_samples)
    assert per_sample.mean() == pytest.approx(result.score_mean[1][off].mean(), abs=1e-6)

    table, groups = result_frame(result, "v"), groups_frame(result, "v")
    q, k = packed_pairs(v.seq_len)
    entries = q > k

    def metric_se(simulation_groups):
        data = LedgerInputs(table, None, None, None, None, 400, 0, simulation_groups)
        field = data.sim_field("v", 1)
        return estimate(field.x[entries].mean(axis=0))

    value, block_se = metric_se(groups)
    _, parametric_se = metric_se(None)
    # two float32 computations of one mean (the kernel's block sums, the torch decoder's per-sample scores): they
    # agree to float32's resolution at a value of ~0.4 (2^-24 x 0.4 ~ 2.4e-8), not to the last bit
    assert value == pytest.approx(per_sample.mean(), abs=1e-7)
    # 32 groups: the bootstrap SE itself scatters by ~1/sqrt(2 * 31) = 13%, the replicates by ~4%
    assert 0.65 < block_se / direct_se < 1.4
    assert parametric_se < 0.5 * direct_se
