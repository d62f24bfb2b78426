"""The position probe (Haviv et al., 2022): ridge regression from a hidden state to its token position.

The sequences are split by sequence: the first 60% train, the next 20% choose the
penalty, the last 20% give the held-out mean absolute error; `mae_baseline` always
predicts the mean training position (what a state without positional information
can do). Features are standardised with the training rows' mean and standard
deviation (+ 1e-8); the fit on train + validation with the chosen penalty gives the error.

`StreamingProbe` fits the same probe for every hidden state at once without keeping the
rows: sequences arrive in order, so the training rows are all seen before the first
validation row, and those before the first test row. It keeps float64 torch sums on the
model's device, stacked over the hidden states: one [states, features, features] Gram
matrix and a few [states, features] vectors, whatever the number of sequences. A batch of
sequences adds its rows with one batched product (`add_batch`; a batch that straddles a
phase boundary is split there). The ridge is solved on the device by a Cholesky
factorisation per penalty (`ridge_solve`) rather than one eigendecomposition per state: on
one CPU thread about as fast at 576 features and 1.7x faster at 2,048, on an H200 4-19x
faster (bench/bench_probe.py). Its MAEs are the former numpy probe's to ~1e-13 (float64 rounding).
"""

from __future__ import annotations

import torch

from causalpos.models.errors import ExtractionError
from causalpos.models.probe_split import split_points

PENALTIES = (1e-3, 1e-2, 1e-1, 1, 10, 100, 1000)
SOLVE_BYTES = 1 << 29  # matrices factorised at once: bounds the solve's extra memory beside the Gram matrices


def ridge_solve(gram: torch.Tensor, diagonals: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """w[s, :, k] = (gram[s] + diagonals[s, k] I)^-1 rhs[s] for gram [states, f, f], diagonals [states, k] (> 0)
    and rhs [states, f]: every state's ridge weights [states, f, k] for k penalties.

    A Cholesky factorisation per penalty, gram being positive semidefinite. A few states at a time,
    so that a 4,096-feature model's 33 states (4.4 GB a copy) need no second copy at once; the
    matrix and its factor are buffers reused over the penalties (fresh ones cost page faults)."""
    out = rhs.new_empty(*rhs.shape, diagonals.shape[1])
    step = max(1, SOLVE_BYTES // (gram[0].numel() * gram.element_size()))
    for start in range(0, len(gram), step):
        part = slice(start, start + step)
        matrix, factor = torch.empty_like(gram[part]), torch.empty_like(gram[part])
        info = torch.empty(len(matrix), dtype=torch.int32, device=gram.device)
        for k in range(diagonals.shape[1]):
            matrix.copy_(gram[part])
            matrix.diagonal(dim1=-2, dim2=-1).add_(diagonals[part, k, None])
            torch.linalg.cholesky_ex(matrix, out=(factor, info))
            out[part, :, k] = torch.cholesky_solve(rhs[part, :, None], factor)[..., 0]
            failed = torch.nonzero(info).flatten()
            if len(failed):  # rounding made a matrix indefinite (huge standardised validation values): LU instead
                out[start + failed, :, k] = torch.linalg.solve(matrix[failed], rhs[part][failed])
    return out


class StreamingProbe:
    """Probes of `n_states` hidden states over `n_sequences` sequences given in order (0, 1, ...).

    Its sums are torch float64 tensors on `device`; the features may come in any float dtype."""

    def __init__(self, n_states: int, n_features: int, n_sequences: int, penalties=PENALTIES, device="cpu"):
        self.cuts = split_points(n_sequences)
        self.n_sequences, self.n_states, self.n_features = n_sequences, n_states, n_features
        self.phase = 0
        self.next_sequence = 0

        def zeros(*shape):
            return torch.zeros(shape, dtype=torch.float64, device=device)

        s, f = n_states, n_features
        self.penalties = torch.tensor(penalties, dtype=torch.float64, device=device)
        self.n = [0, 0, 0]  # rows per phase (the same for every state)
        self.sum_y = zeros(3)  # positions per phase
        # training sums of u = z - shift, shift = the first training row: no cancellation in the variances,
        # and a constant feature's sums are exactly zero
        self.shift = None
        self.sum_u, self.sum_uu, self.sum_uy = zeros(s, f), zeros(s, f), zeros(s, f)
        self.gram = zeros(s, f, f)  # training: sum u u^T; then sum x x^T (standardised) of train + val
        self.mean = self.scale = self.weights = self.sum_xy_train = None  # set when the training rows are complete
        self.errors = zeros(s, len(penalties))  # validation |error| sums per penalty
        self.sum_x, self.sum_xy = zeros(s, f), zeros(s, f)  # validation rows, standardised
        self.fit = None  # (weights [s, f], offset) of the train + validation refit
        self.test_error, self.test_baseline = zeros(s), zeros()

    @property
    def device(self) -> torch.device:
        return self.sum_y.device  # follows torch.load's map_location

    # ---------------------------------------------------------------- rows

    def add_sequence(self, sequence: int, features, positions) -> None:
        """One sequence's rows: `features[state]` [rows, features] at token `positions` [rows]."""
        self.add_batch(sequence, [torch.as_tensor(rows)[None] for rows in features], torch.as_tensor(positions)[None])

    @torch.no_grad()
    def add_batch(self, first: int, features, positions) -> None:
        """Sequences first, first + 1, ...: `features` [states, sequences, rows, features] (one tensor, or one
        [sequences, rows, features] per state) at token `positions` [sequences, rows]."""
        if first != self.next_sequence:
            raise ExtractionError(f"position probe: sequence {first} given where {self.next_sequence} was due")
        z = features if torch.is_tensor(features) else torch.stack([torch.as_tensor(f) for f in features])
        z = z.to(device=self.device, dtype=torch.float64)
        y = torch.as_tensor(positions).to(device=self.device, dtype=torch.float64)
        count = z.shape[1]
        if z.shape[0] != self.n_states or z.shape[-1] != self.n_features or y.shape != z.shape[1:3]:
            raise ExtractionError(
                f"position probe: features {tuple(z.shape)} and positions {tuple(y.shape)} "
                f"for {self.n_states} states of {self.n_features} features"
            )
        if first + count > self.n_sequences:
            raise ExtractionError(f"position probe: sequences up to {first + count} given, {self.n_sequences} expected")
        starts = (0, *self.cuts)
        ends = (*self.cuts, self.n_sequences)
        for phase in range(3):  # the part of the batch in each phase, in order
            lo, hi = max(first, starts[phase]), min(first + count, ends[phase])
            if lo < hi:
                self._advance(phase)
                rows = z[:, lo - first : hi - first].reshape(self.n_states, -1, self.n_features)
                self._add_rows(phase, rows, y[lo - first : hi - first].reshape(-1))
        self.next_sequence += count

    def _advance(self, phase: int) -> None:
        while self.phase < phase:  # the previous phase's rows are complete
            (self._close_training if self.phase == 0 else self._close_validation)()
            self.phase += 1

    def _add_rows(self, phase: int, z: torch.Tensor, y: torch.Tensor) -> None:
        """z [states, rows, features], y [rows], float64."""
        self.n[phase] += len(y)
        self.sum_y[phase] += y.sum()
        if phase == 0:
            self._add_training(z, y)
            return
        x = (z - self.mean[:, None]) / self.scale[:, None]
        (self._add_validation if phase == 1 else self._add_test)(x, y)

    def _add_training(self, z: torch.Tensor, y: torch.Tensor) -> None:
        if self.shift is None:
            self.shift = z[:, 0].clone()
        u = z - self.shift[:, None]
        self.sum_u += u.sum(1)
        self.sum_uu += u.square().sum(1)
        self.sum_uy += y @ u
        self.gram.baddbmm_(u.transpose(1, 2), u)

    def _add_validation(self, x: torch.Tensor, y: torch.Tensor) -> None:
        predictions = torch.bmm(x, self.weights) + self.sum_y[0] / self.n[0]  # [states, rows, penalties]
        self.errors += (predictions - y[:, None]).abs().sum(1)
        self.gram.baddbmm_(x.transpose(1, 2), x)
        self.sum_x += x.sum(1)
        self.sum_xy += y @ x

    def _add_test(self, x: torch.Tensor, y: torch.Tensor) -> None:
        weights, offset = self.fit
        predictions = torch.bmm(x, weights[..., None])[..., 0] + offset  # [states, rows]
        self.test_error += (predictions - y).abs().sum(1)
        self.test_baseline += (offset - y).abs().sum()

    # ---------------------------------------------------------------- fits

    def _close_training(self) -> None:
        """Standardise the training sums and solve the ridge for every penalty (w = (A + n p I)^-1 X^T (y - mean y))."""
        n = self.n[0]
        offset = self.sum_u / n  # mean - shift
        self.mean = self.shift + offset
        self.scale = (self.sum_uu / n - offset**2).clamp(min=0).sqrt() + 1e-8  # np.std + 1e-8
        # in place, no [states, f, f] temporaries: sum (z - m)(z - m)^T, then divided by scale_i scale_j
        self.gram.baddbmm_(offset[:, :, None], offset[:, None, :], alpha=-n)
        self.gram /= self.scale[:, :, None]
        self.gram /= self.scale[:, None, :]
        # sum x (y - mean y) = sum (u - offset) y / scale, since the standardised x sum to zero
        self.sum_xy_train = (self.sum_uy - offset * self.sum_y[0]) / self.scale
        diagonals = (self.penalties * n).expand(self.n_states, -1)
        self.weights = ridge_solve(self.gram, diagonals, self.sum_xy_train)  # [states, features, penalties]

    def _close_validation(self) -> None:
        """Refit on train + validation with the penalty of the least validation error (the first of equals)."""
        best = self.penalties[self.errors.argmin(1)]
        n = self.n[0] + self.n[1]
        offset = (self.sum_y[0] + self.sum_y[1]) / n
        # sum over train + val of x (y - offset): training x sum to zero
        target = self.sum_xy_train + self.sum_xy - offset * self.sum_x
        weights = ridge_solve(self.gram, best[:, None] * n, target)[..., 0]
        self.fit = (weights, offset)
        self.gram = None  # not needed any more: a restart state without it is smaller

    def results(self) -> list[dict]:
        if self.next_sequence != self.n_sequences:
            raise ExtractionError(f"position probe: {self.next_sequence} of {self.n_sequences} sequences given")
        n_test = self.n[2]
        errors = (self.test_error / n_test).tolist()
        baseline = float(self.test_baseline / n_test)
        return [
            {"mae": mae, "mae_baseline": baseline, "n_train": self.n[0] + self.n[1], "n_test": n_test} for mae in errors
        ]
