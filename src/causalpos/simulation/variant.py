"""One simulated decoder's parameters: the config keys and the Parquet columns.

Kept free of torch and numba so that parsing the workflow stays fast.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

NORMS = ("l2", "layernorm")
SCALES = ("none", "sqrt_d", "d")
PES = ("none", "rope")
MASKS = ("causal", "none")
# Input laws (see `sampling`): "official" is the paper's construction (Section 4.1, the authors'
# normalize(g_i + l u), E<x_i, x_j> close to alpha), the default; "exact" is our exact-moment law
# (||x_i|| = 1, E<x_i, x_j> = alpha exactly), a robustness check, drawn in the basis the engine picks:
# "exact_full" or "exact_reduced" (one law, two bases; name one to force it).
SAMPLERS = ("official", "exact", "exact_full", "exact_reduced")
RENAMED_SAMPLERS = {"auto": "exact", "full": "exact_full", "reduced": "exact_reduced"}  # before issue 23
LAYERNORM_EPS = 1e-12  # rows of norm sqrt(d) (App. B), as the authors' notebook (torch's default 1e-5 shrinks them)


@dataclass(frozen=True)
class Variant:
    """One simulated decoder. Field names are the config keys and the Parquet columns.

    The `sampler` column holds `resolved_sampler` ("exact" is never written: its basis is).
    `window` (causal mask only): query i sees keys i - window < j <= i, a sliding window as in Gemma's local
    layers; None, every key. A window of seq_len or more hides nothing and is stored as None, so it is the
    unwindowed variant (same table, same numbers). The tables hold it as a nullable integer, <NA> for None.
    """

    norm: str = "l2"
    scale: str = "none"
    alpha: float = 0.0
    pe: str = "none"
    rope_theta: float = 10000.0
    mask: str = "causal"
    residual: bool = True
    d: int = 64
    seq_len: int = 50
    n_layers: int = 4
    n_samples: int = 100_000
    seed: int = 0
    sampler: str = "official"  # after seed, so the table's columns keep their order (it was written after seed)
    window: int | None = None  # last, for the same reason: the tables gained it after sampler

    def __post_init__(self):
        def bad(key, value, allowed):
            raise ValueError(f"simulation setting '{key}' = {value!r} is invalid; allowed: {allowed}")

        if self.norm not in NORMS:
            bad("norm", self.norm, list(NORMS))
        if self.scale not in SCALES:
            bad("scale", self.scale, list(SCALES))
        if self.pe not in PES:
            bad("pe", self.pe, list(PES))
        if self.mask not in MASKS:
            bad("mask", self.mask, list(MASKS))
        if not 0.0 <= self.alpha < 1.0:
            bad("alpha", self.alpha, "0 <= alpha < 1")
        if self.seq_len < 2:
            bad("seq_len", self.seq_len, "an integer >= 2")
        if self.d < 2 or (self.pe == "rope" and self.d % 2):
            bad("d", self.d, "an integer >= 2, even when pe is rope")
        if self.n_layers < 1:
            bad("n_layers", self.n_layers, "an integer >= 1")
        if self.n_samples < 2:
            bad("n_samples", self.n_samples, "an integer >= 2")
        if self.rope_theta <= 0:
            bad("rope_theta", self.rope_theta, "a positive number")
        if self.sampler in RENAMED_SAMPLERS:
            bad(
                "sampler",
                self.sampler,
                f"{list(SAMPLERS)} ('{self.sampler}' is now "
                f"'{RENAMED_SAMPLERS[self.sampler]}': the exact-moment law, not the paper's)",
            )
        if self.sampler not in SAMPLERS:
            bad("sampler", self.sampler, list(SAMPLERS))
        if self.sampler == "exact_reduced" and not self.rotation_invariant:
            bad("sampler", self.sampler, "'exact_reduced' only with norm 'l2' and pe 'none' (rotation invariant)")
        if self.window is not None:
            if isinstance(self.window, bool) or not isinstance(self.window, numbers.Integral) or self.window < 1:
                bad("window", self.window, "None (every key) or an integer >= 1")
            if self.mask != "causal":
                bad(
                    "window",
                    self.window,
                    f"None unless mask is 'causal' (a query sees its last `window` keys, "
                    f"j <= i); mask is {self.mask!r}",
                )
            # a window of seq_len or more hides no key: the unwindowed decoder, recorded as such
            object.__setattr__(self, "window", None if self.window >= self.seq_len else int(self.window))

    @property
    def score_divisor(self) -> float:
        return {"none": 1.0, "sqrt_d": math.sqrt(self.d), "d": float(self.d)}[self.scale]

    @property
    def rotation_invariant(self) -> bool:
        """True when the decoder depends on the inputs only through their inner products."""
        return self.norm == "l2" and self.pe == "none"

    @property
    def resolved_sampler(self) -> str:
        """The law and basis actually drawn: "official", "exact_full" or "exact_reduced" (what the tables record).

        "exact" takes the reduced basis when it is exact (rotation invariant) and smaller (d - 1 > n).
        """
        if self.sampler != "exact":
            return self.sampler
        return "exact_reduced" if self.rotation_invariant and self.d - 1 > self.seq_len else "exact_full"

    def params(self) -> dict:
        return dataclasses.asdict(self)
