"""The position probe (Haviv et al., 2022): ridge regression from a hidden state to its token position.

The sequences are split by sequence: the first 60% train, the next 20% choose the
penalty, the last 20% give the held-out mean absolute error; `mae_baseline` always
predicts the mean training position (what a state without positional information
can do). Features are standardised with the training rows' mean and standard
deviation; the fit on train + validation with the chosen penalty gives the error.

`StreamingProbe` fits the same probe without keeping the rows: sequences arrive in
order, so the training rows are all seen before the first validation row, and those
before the first test row. Per hidden state it keeps sums and one features x
features matrix (float64), whatever the number of sequences.
"""

from __future__ import annotations

import numpy as np

from causalpos.models.errors import ExtractionError

PENALTIES = (1e-3, 1e-2, 1e-1, 1, 10, 100, 1000)
MIN_SEQUENCES = 5


def split_points(n_sequences: int) -> tuple[int, int]:
    """First validation and first test sequence (0-based) of `n_sequences` probe sequences."""
    if n_sequences < MIN_SEQUENCES:
        raise ExtractionError(f"the position probe needs at least {MIN_SEQUENCES} sequences, got {n_sequences}")
    return int(0.6 * n_sequences), int(0.8 * n_sequences)


class _StateProbe:
    """One hidden state's probe: the phase (train, validation, test) follows the sequence number."""

    def __init__(self, n_features: int, penalties):
        self.penalties = np.asarray(penalties, dtype=np.float64)
        f = n_features
        self.n = np.zeros(3)  # rows per phase
        # training sums of u = z - shift, shift = the first training row: no cancellation in the variances
        self.shift = None
        self.sum_y, self.sum_u, self.sum_uu, self.sum_uy = np.zeros(3), np.zeros(f), np.zeros(f), np.zeros(f)
        self.gram = np.zeros((f, f))  # training: sum u u^T; then sum x x^T (standardised) of train + val
        self.mean = self.scale = self.weights = self.sum_xy_train = None  # set when the training rows are complete
        self.errors = np.zeros(len(self.penalties))  # validation |error| sums per penalty
        self.sum_x, self.sum_xy = np.zeros(f), np.zeros(f)  # validation rows, standardised
        self.fit = None  # (weights, offset) of the train + validation refit
        self.test_error = self.test_baseline = 0.0

    def add(self, phase: int, z: np.ndarray, y: np.ndarray) -> None:
        z, y = z.astype(np.float64), y.astype(np.float64)
        self.n[phase] += len(y)
        self.sum_y[phase] += y.sum()
        if phase == 0:
            if self.shift is None:
                self.shift = z[0].copy()
            u = z - self.shift
            self.sum_u += u.sum(0)
            self.sum_uu += np.square(u).sum(0)
            self.sum_uy += u.T @ y
            self.gram += u.T @ u
            return
        x = (z - self.mean) / self.scale
        if phase == 1:
            predictions = x @ self.weights + self.sum_y[0] / self.n[0]
            self.errors += np.abs(predictions - y[:, None]).sum(0)
            self.gram += x.T @ x
            self.sum_x += x.sum(0)
            self.sum_xy += x.T @ y
            return
        weights, offset = self.fit
        self.test_error += float(np.abs(x @ weights + offset - y).sum())
        self.test_baseline += float(np.abs(offset - y).sum())

    def close_training(self) -> None:
        """Standardise the training sums and solve the ridge for every penalty (w = (A + n p I)^-1 X^T (y - mean y))."""
        n = self.n[0]
        offset = self.sum_u / n  # mean - shift
        self.mean = self.shift + offset
        self.scale = np.sqrt(np.maximum(self.sum_uu / n - offset ** 2, 0)) + 1e-8  # np.std + 1e-8
        centred = self.gram - n * np.outer(offset, offset)  # sum (z - m)(z - m)^T
        self.gram = centred / np.outer(self.scale, self.scale)
        # sum x (y - mean y) = sum (u - offset) y / scale, since the standardised x sum to zero
        self.sum_xy_train = (self.sum_uy - offset * self.sum_y[0]) / self.scale
        values, vectors = np.linalg.eigh(self.gram)
        projected = vectors.T @ self.sum_xy_train
        self.weights = np.stack([vectors @ (projected / (values + p * n)) for p in self.penalties], axis=1)

    def close_validation(self) -> None:
        """Refit on train + validation with the penalty of the least validation error."""
        best = self.penalties[int(np.argmin(self.errors))]
        n = self.n[0] + self.n[1]
        offset = (self.sum_y[0] + self.sum_y[1]) / n
        # sum over train + val of x (y - offset): training x sum to zero
        target = self.sum_xy_train + self.sum_xy - offset * self.sum_x
        weights = np.linalg.solve(self.gram + best * n * np.eye(len(self.gram)), target)
        self.fit = (weights, offset)

    def result(self) -> dict:
        n_test = self.n[2]
        return {"mae": float(self.test_error / n_test), "mae_baseline": float(self.test_baseline / n_test),
                "n_train": int(self.n[0] + self.n[1]), "n_test": int(n_test)}


class StreamingProbe:
    """Probes of several hidden states over `n_sequences` sequences given in order (0, 1, ...)."""

    def __init__(self, n_states: int, n_features: int, n_sequences: int, penalties=PENALTIES):
        self.cuts = split_points(n_sequences)
        self.n_sequences = n_sequences
        self.states = [_StateProbe(n_features, penalties) for _ in range(n_states)]
        self.phase = 0
        self.next_sequence = 0

    def add_sequence(self, sequence: int, features: list, positions: np.ndarray) -> None:
        """One sequence's rows: `features[state]` [rows, features] at token `positions`."""
        if sequence != self.next_sequence:
            raise ExtractionError(f"position probe: sequence {sequence} given where {self.next_sequence} was due")
        phase = 0 if sequence < self.cuts[0] else 1 if sequence < self.cuts[1] else 2
        while self.phase < phase:  # the previous phase's rows are complete
            for state in self.states:
                (state.close_training if self.phase == 0 else state.close_validation)()
            self.phase += 1
        for state, rows in zip(self.states, features):
            state.add(phase, np.asarray(rows), np.asarray(positions))
        self.next_sequence += 1

    def results(self) -> list[dict]:
        if self.next_sequence != self.n_sequences:
            raise ExtractionError(f"position probe: {self.next_sequence} of {self.n_sequences} sequences given")
        return [state.result() for state in self.states]
