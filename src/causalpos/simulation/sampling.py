"""What both backends of the engine share: the input laws, the per-block seeding, the moments.

Samples are drawn in blocks of RNG_BLOCK from a generator seeded by (seed, block), so a result
does not depend on how the blocks are batched. Two exact samplers of one law:
- "full": token vectors in R^d, x_i = sqrt(a) u + sqrt(1-a) w_i with u a random unit vector and
  w_i independent random unit vectors orthogonal to u. Then ||x_i|| = 1 and E<x_i, x_j> = a exactly.
- "reduced": the same distribution written in a basis of dimension 1 + min(n, d-1). Without RoPE
  and with l2 normalisation the decoder only sees inner products, which are rotation invariant, so
  the Bartlett decomposition of the Wishart Gram of the w_i gives the same law with far fewer
  random numbers and flops when d > n (the convergence sweep in d).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from causalpos.simulation.variant import Variant

SAMPLERS = ("auto", "full", "reduced")
RNG_BLOCK = 256  # samples per seeded random block: results do not depend on the chunk size


def block_generator(seed: int, block: int, device: torch.device) -> torch.Generator:
    state = np.random.SeedSequence([seed, block]).generate_state(1, dtype=np.uint64)[0]
    gen = torch.Generator(device=device)
    gen.manual_seed(int(state) & 0x7FFF_FFFF_FFFF_FFFF)
    return gen


def sample_inputs(batch: int, n: int, d: int, alpha: float, gen: torch.Generator,
                  device="cpu", dtype=torch.float32) -> torch.Tensor:
    """Unit vectors [batch, n, d] with exact E<x_i, x_j> = alpha (the "full" sampler)."""
    shared = torch.randn(batch, 1, d, generator=gen, device=device, dtype=dtype)
    shared = shared / torch.linalg.vector_norm(shared, dim=-1, keepdim=True)
    noise = torch.randn(batch, n, d, generator=gen, device=device, dtype=dtype)
    noise = noise - (noise * shared).sum(-1, keepdim=True) * shared
    noise = noise / torch.linalg.vector_norm(noise, dim=-1, keepdim=True)
    return math.sqrt(alpha) * shared + math.sqrt(1.0 - alpha) * noise


def chi_dof(n: int, d: int) -> torch.Tensor:
    """Degrees of freedom d-1, d-2, ... of the Bartlett diagonal (one per row of the triangle)."""
    m = d - 1
    return torch.arange(m, m - min(n, m), -1, dtype=torch.float32)


def _sample_chi(batch: int, n: int, d: int, gen: torch.Generator, device="cpu", dtype=torch.float32):
    dof = chi_dof(n, d).to(device, dtype).expand(batch, -1)
    return (2.0 * torch._standard_gamma(dof / 2.0, generator=gen)).sqrt_()


def sample_inputs_reduced(batch: int, n: int, d: int, alpha: float, gen: torch.Generator,
                          device="cpu", dtype=torch.float32) -> torch.Tensor:
    """The law of `sample_inputs` up to a rotation, in 1 + min(n, d-1) coordinates.

    Coordinate 0 is the shared direction u. The noise vectors live in the
    (d-1)-dimensional complement of u; their Gram matrix is Wishart, and its
    Bartlett factor L (lower trapezoidal: N(0,1) below the diagonal, chi with
    d-1-i degrees of freedom on it) has rows with the same inner products.
    """
    k = min(n, d - 1)
    lower = torch.randn(batch, n, k, generator=gen, device=device, dtype=dtype).tril_(-1)
    chi = _sample_chi(batch, n, d, gen, device, dtype)
    lower[:, :k, :].diagonal(dim1=1, dim2=2).copy_(chi)
    lower = lower / torch.linalg.vector_norm(lower, dim=-1, keepdim=True)
    x = torch.empty(batch, n, k + 1, device=device, dtype=dtype)
    x[..., 0] = math.sqrt(alpha)
    x[..., 1:] = math.sqrt(1.0 - alpha) * lower
    return x


def mean_sem(shift, total, total_sq, n):
    """Mean and standard error from shifted sums (torch or numpy, float64)."""
    mean_dev = total / n
    var = (total_sq - n * mean_dev**2).clip(min=0) / (n - 1)
    mean = shift + mean_dev
    sem = (var / n) ** 0.5
    if isinstance(mean, torch.Tensor):
        return mean.cpu().numpy(), sem.cpu().numpy()
    return mean, sem


def resolve_sampler(v: Variant, sampler: str) -> str:
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    if sampler == "reduced" and not v.rotation_invariant:
        raise ValueError("the reduced sampler needs norm 'l2' and pe 'none'")
    if sampler == "auto":
        return "reduced" if v.rotation_invariant and v.d - 1 > v.seq_len else "full"
    return sampler


def block_sizes(n_samples: int):
    """(block index, samples in it) for every seeded block."""
    return [(b, min(RNG_BLOCK, n_samples - b * RNG_BLOCK)) for b in range(-(-n_samples // RNG_BLOCK))]


def rope_tables(n: int, d: int, theta: float, device="cpu", dtype=torch.float32):
    """cos and sin of shape [n, d] for the half-split RoPE (pairs i and i + d/2)."""
    inv_freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(device, dtype), angles.sin().to(device, dtype)
