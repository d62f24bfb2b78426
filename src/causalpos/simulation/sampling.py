"""What both backends of the engine share: the input laws, the per-block seeding, the moments.

Samples are drawn in blocks of RNG_BLOCK from a generator seeded by (seed, block), so a result
does not depend on how the blocks are batched. `Variant.sampler` picks one of three samplers of
two laws (rows x_i of X^(0), i = 1..n, in R^d; a = alpha):
- "official", the default: the paper's construction (Section 4.1, "a shared Gaussian component with an
  independent Gaussian noise component", as in the authors' notebooks): x_i = normalize(g_i + l u), g_i
  and u i.i.d. N(0, I_d), l = sqrt(a / (1-a)). Unit norm and E<x_i, x_j> close to a, not equal: the
  shared part has a random length. Equal in law to the exact samplers at a = 0.
- "exact_full", our exact-moment law, a robustness check: the assumption of Section 3.2 taken literally,
  ||x_i|| = 1 and E<x_i, x_j> = a exactly.
  For a > 0, x_i = sqrt(a) u + sqrt(1-a) w_i with u a random unit vector and w_i independent
  random unit vectors orthogonal to u: <x_i, x_j> = a + (1-a) <w_i, w_j>, of variance
  (1-a)^2 / (d-1). At a = 0 the x_i are i.i.d. uniform on the sphere of R^d (the paper's i.i.d.
  case; variance 1/d): the a > 0 construction would put them all in the hyperplane orthogonal to
  u, one dimension short (variance 1/(d-1)).
- "exact_reduced": the law of "exact_full" up to a rotation, in 1 + min(n, d-1) coordinates (a > 0: the
  shared coordinate, then the Bartlett factor of the w_i's Wishart Gram in the d-1 dimensions
  orthogonal to u) or min(n, d) (a = 0: the Bartlett factor of n Gaussian vectors in R^d).
  Without RoPE and with l2 normalisation the decoder only sees inner products, which rotations
  keep, so this is exact, with far fewer random numbers and flops when d > n.
"""

from __future__ import annotations

import math

import numpy as np
import torch

RNG_BLOCK = 256  # samples per seeded random block: results do not depend on the chunk size
# Groups of consecutive blocks whose score sums the engine keeps apart: a metric's standard error is its
# spread over the groups (a bootstrap over blocks of samples, claims.replicates), which covers the
# correlation between the entries of one sample that per-entry SEMs leave out. 32 groups of ~3,000 samples
# at N = 100,000: [32, layers, n, n] float64 sums, 2.6 MB at n = 50 and 4 layers.
SE_GROUPS = 32


def block_generator(seed: int, block: int, device: torch.device) -> torch.Generator:
    state = np.random.SeedSequence([seed, block]).generate_state(1, dtype=np.uint64)[0]
    gen = torch.Generator(device=device)
    gen.manual_seed(int(state) & 0x7FFF_FFFF_FFFF_FFFF)
    return gen


def has_shared_direction(alpha: float) -> bool:
    """Whether our law has a shared unit direction u (a > 0); at a = 0 the rows are i.i.d."""
    return alpha > 0


def reduced_shape(n: int, d: int, alpha: float) -> tuple[int, int, int]:
    """(lead, k, m) of the reduced basis: lead shared columns (0 or 1), then a Bartlett factor of
    k = min(n, m) columns for n vectors in m dimensions (d - 1 orthogonal to u, or all d)."""
    lead = int(has_shared_direction(alpha))
    m = d - lead
    return lead, min(n, m), m


def kernel_basis_is_reduced(v, sampler: str) -> bool:
    """Whether the CPU kernel draws `sampler`'s law in the reduced basis (`reduced_shape`).

    "exact_reduced" always; "official" where that is exact (rotation invariant: l2, no RoPE; both laws are
    rotation invariant in R^d) and smaller than d (see `cpu_inputs`); its tables still say "official", the law.
    """
    lead, k, _ = reduced_shape(v.seq_len, v.d, v.alpha)
    return sampler == "exact_reduced" or (sampler == "official" and v.rotation_invariant and lead + k < v.d)


def _unit_rows(x: torch.Tensor) -> torch.Tensor:
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def sample_inputs(
    batch: int, n: int, d: int, alpha: float, gen: torch.Generator, device="cpu", dtype=torch.float32
) -> torch.Tensor:
    """Unit vectors [batch, n, d] with exact E<x_i, x_j> = alpha (the "exact_full" sampler)."""
    if not has_shared_direction(alpha):
        return _unit_rows(torch.randn(batch, n, d, generator=gen, device=device, dtype=dtype))
    shared = _unit_rows(torch.randn(batch, 1, d, generator=gen, device=device, dtype=dtype))
    noise = torch.randn(batch, n, d, generator=gen, device=device, dtype=dtype)
    noise = _unit_rows(noise - (noise * shared).sum(-1, keepdim=True) * shared)
    return math.sqrt(alpha) * shared + math.sqrt(1.0 - alpha) * noise


def sample_inputs_official(
    batch: int, n: int, d: int, alpha: float, gen: torch.Generator, device="cpu", dtype=torch.float32
) -> torch.Tensor:
    """The paper's construction (Section 4.1, as the authors' notebooks draw it) [batch, n, d]:
    normalize(g_i + sqrt(alpha / (1 - alpha)) u)."""
    shared = torch.randn(batch, 1, d, generator=gen, device=device, dtype=dtype)
    noise = torch.randn(batch, n, d, generator=gen, device=device, dtype=dtype)
    return _unit_rows(noise + math.sqrt(alpha / (1.0 - alpha)) * shared)


def chi_dof(n: int, m: int) -> torch.Tensor:
    """Degrees of freedom m, m-1, ... of the Bartlett diagonal for n vectors in m dimensions."""
    return torch.arange(m, m - min(n, m), -1, dtype=torch.float32)


def _sample_chi(batch: int, dof: torch.Tensor, gen: torch.Generator, device="cpu", dtype=torch.float32):
    dof = dof.to(device, dtype).expand(batch, -1)
    return (2.0 * torch._standard_gamma(dof / 2.0, generator=gen)).sqrt_()


def sample_inputs_reduced(
    batch: int, n: int, d: int, alpha: float, gen: torch.Generator, device="cpu", dtype=torch.float32
) -> torch.Tensor:
    """The law of `sample_inputs` up to a rotation, in lead + k coordinates (`reduced_shape`).

    Coordinate 0 (alpha > 0 only) is the shared direction u. The other vectors are Gaussian
    in m dimensions (u's complement, or R^d), normalised; their Gram matrix is Wishart, and its
    Bartlett factor L (lower trapezoidal: N(0,1) below the diagonal, chi with m-i degrees of
    freedom on it) has rows with the same inner products.
    """
    lead, k, m = reduced_shape(n, d, alpha)
    lower = torch.randn(batch, n, k, generator=gen, device=device, dtype=dtype).tril_(-1)
    lower[:, :k, :].diagonal(dim1=1, dim2=2).copy_(_sample_chi(batch, chi_dof(n, m), gen, device, dtype))
    lower = _unit_rows(lower)
    if not lead:
        return lower
    x = torch.empty(batch, n, k + 1, device=device, dtype=dtype)
    x[..., 0] = math.sqrt(alpha)
    x[..., 1:] = math.sqrt(1.0 - alpha) * lower
    return x


INPUT_SAMPLERS = {
    "exact_full": sample_inputs,
    "exact_reduced": sample_inputs_reduced,
    "official": sample_inputs_official,
}


def mean_sem(shift, total, total_sq, n):
    """Mean and standard error from shifted sums (torch or numpy, float64)."""
    mean_dev = total / n
    var = (total_sq - n * mean_dev**2).clip(min=0) / (n - 1)
    mean = shift + mean_dev
    sem = (var / n) ** 0.5
    if isinstance(mean, torch.Tensor):
        return mean.cpu().numpy(), sem.cpu().numpy()
    return mean, sem


def block_groups(n_blocks: int, groups: int = SE_GROUPS) -> np.ndarray:
    """The group of every seeded block: min(groups, n_blocks) runs of consecutive blocks of near-equal length."""
    groups = max(1, min(groups, n_blocks))
    return np.arange(n_blocks) * groups // n_blocks


def block_sizes(n_samples: int):
    """(block index, samples in it) for every seeded block."""
    return [(b, min(RNG_BLOCK, n_samples - b * RNG_BLOCK)) for b in range(-(-n_samples // RNG_BLOCK))]


def rope_tables(n: int, d: int, theta: float, device="cpu", dtype=torch.float32):
    """cos and sin of shape [n, d] for the half-split RoPE (pairs i and i + d/2)."""
    inv_freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(device, dtype), angles.sin().to(device, dtype)
