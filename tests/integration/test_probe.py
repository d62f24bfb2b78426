"""The streaming position probe (causalpos.models.probe) against a ridge fit on the rows in memory.

The reference below is written here, independently of the probe: the rows materialised,
standardised with the training mean and standard deviation (+ 1e-8), the ridge solved for
every penalty, the penalty of the least validation error refit on train + validation.
"""

import io

import numpy as np
import pytest
import torch

from causalpos.models.errors import ExtractionError
from causalpos.models.probe import PENALTIES, StreamingProbe, ridge_solve
from causalpos.models.probe_split import split_points

ROWS = 6  # positions per sequence
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))]


def reference_probe(features: np.ndarray, positions: np.ndarray, penalties=PENALTIES) -> dict:
    """features [sequences, rows, f], positions [sequences, rows]: the probe's numbers from all rows at once."""
    n_sequences, _, f = features.shape
    cut_val, cut_test = split_points(n_sequences)
    x, y = features.reshape(-1, f).astype(np.float64), positions.reshape(-1).astype(np.float64)
    phase = np.repeat(np.searchsorted([cut_val, cut_test], np.arange(n_sequences), side="right"), ROWS)
    train, val, test = (x[phase == k] for k in range(3))
    y_train, y_val, y_test = (y[phase == k] for k in range(3))
    mean, std = train.mean(0), train.std(0) + 1e-8
    train, val, test = (train - mean) / std, (val - mean) / std, (test - mean) / std

    def ridge(a, b, p):
        return np.linalg.solve(a.T @ a + len(a) * p * np.eye(f), a.T @ (b - b.mean()))

    errors = [np.abs(val @ ridge(train, y_train, p) + y_train.mean() - y_val).mean() for p in penalties]
    both, y_both = np.r_[train, val], np.r_[y_train, y_val]
    weights = ridge(both, y_both, penalties[int(np.argmin(errors))])
    return {
        "mae": np.abs(test @ weights + y_both.mean() - y_test).mean(),
        "mae_baseline": np.abs(y_both.mean() - y_test).mean(),
        "n_train": len(both),
        "n_test": len(test),
    }


def data(n_sequences: int, f: int, n_states: int = 2, seed: int = 0):
    """[states, sequences, rows, f] float32 features, some of them informative of the position, and positions."""
    rng = np.random.default_rng(seed)
    positions = np.sort(rng.choice(64, size=(n_sequences, ROWS)), axis=1)
    features = rng.normal(size=(n_states, n_sequences, ROWS, f)) * rng.uniform(0.1, 10, f) + rng.normal(0, 5, f)
    noise = rng.normal(0, 1, size=features.shape[:3]) * np.arange(1, n_states + 1)[:, None, None]
    features[..., 0] = positions + noise
    features[..., 1] = 3 * np.sqrt(positions) - noise  # with feature 0, nearly noise-free: small penalties win
    return features.astype(np.float32), positions


def streamed(features: np.ndarray, positions: np.ndarray, batch: int, probe=None, device="cpu") -> StreamingProbe:
    """The probe given the sequences `batch` at a time, the features as float32 tensors on its device."""
    n_states, n_sequences, _, f = features.shape
    probe = probe or StreamingProbe(n_states, f, n_sequences, device=device)
    for first in range(probe.next_sequence, n_sequences, batch):
        rows = torch.from_numpy(features[:, first : first + batch]).to(probe.device)
        probe.add_batch(first, rows, positions[first : first + batch])
    return probe


def assert_close(results: list, expected: list, rtol: float = 1e-9) -> None:
    for got, want in zip(results, expected, strict=True):
        assert got["n_train"] == want["n_train"] and got["n_test"] == want["n_test"]
        np.testing.assert_allclose([got["mae"], got["mae_baseline"]], [want["mae"], want["mae_baseline"]], rtol=rtol)


@pytest.mark.parametrize("f", [5, 100])  # 20 sequences: 72 training rows, fewer and more features than that
@pytest.mark.parametrize("batch", [1, 3, 7, 20])  # 3 and 7 straddle the cuts at sequences 12 and 16
@pytest.mark.parametrize("device", DEVICES)
def test_streaming_probe_equals_the_fit_on_all_rows(f, batch, device):
    features, positions = data(20, f)
    expected = [reference_probe(features[state], positions) for state in range(len(features))]
    assert_close(streamed(features, positions, batch, device=device).results(), expected)


def test_batch_sizes_and_single_sequences_agree():
    features, positions = data(23, 30)
    whole = streamed(features, positions, 23).results()
    one = StreamingProbe(2, 30, 23)
    for sequence in range(23):  # add_sequence: one sequence's [rows, f] per state, numpy float64
        one.add_sequence(sequence, list(features[:, sequence].astype(np.float64)), positions[sequence])
    for batch in (2, 5, 8):
        assert_close(streamed(features, positions, batch).results(), whole, rtol=1e-12)
    assert_close(one.results(), whole, rtol=1e-12)


@pytest.mark.parametrize("stop", [4, 14, 18])  # during training, validation and test (cuts at 12 and 16)
@pytest.mark.parametrize("device", DEVICES)
def test_a_probe_saved_and_loaded_mid_run_gives_the_same_result(stop, device):
    """As the restart state keeps it (models/resume.py): torch.save of the object, torch.load with map_location;
    the same batches before and after, so the same numbers to the bit."""
    features, positions = data(20, 12)
    probe = streamed(features[:, :stop], positions[:stop], 2, StreamingProbe(2, 12, 20, device=device))
    buffer = io.BytesIO()
    torch.save({"probe": probe}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, map_location=device, weights_only=False)["probe"]
    assert loaded.device.type == device and loaded.next_sequence == stop
    whole = streamed(features, positions, 2, device=device).results()
    assert streamed(features, positions, 2, loaded).results() == whole


def test_a_constant_feature_gives_no_nan():
    features, positions = data(20, 6)
    features[:, :, :, 3] = 2.5  # zero variance: scale 1e-8, its standardised value exactly 0
    results = streamed(features, positions, 3).results()
    assert all(np.isfinite([r["mae"], r["mae_baseline"]]).all() for r in results)
    assert_close(results, [reference_probe(features[state], positions) for state in range(2)])


@pytest.mark.parametrize("shift", [0.0, -30.0])  # positive definite: Cholesky; indefinite: its LU fallback
def test_ridge_solve_solves_every_state_and_penalty(shift):
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(3, 40, 12))
    gram = rows.transpose(0, 2, 1) @ rows + shift * np.eye(12)
    diagonals, rhs = rng.uniform(0.1, 2, size=(3, 4)), rng.normal(size=(3, 12))
    weights = ridge_solve(torch.from_numpy(gram), torch.from_numpy(diagonals), torch.from_numpy(rhs)).numpy()
    for s, k in np.ndindex(3, 4):
        expected = np.linalg.solve(gram[s] + diagonals[s, k] * np.eye(12), rhs[s])
        np.testing.assert_allclose(weights[s, :, k], expected, rtol=1e-10, atol=1e-12)


def test_wrong_order_shapes_and_counts_are_refused():
    features, positions = data(10, 4)
    probe = StreamingProbe(2, 4, 10)
    with pytest.raises(ExtractionError, match="sequence 1 given where 0 was due"):
        probe.add_batch(1, torch.from_numpy(features[:, 1:3]), positions[1:3])
    with pytest.raises(ExtractionError, match="features"):
        probe.add_batch(0, torch.from_numpy(features[:1, :2]), positions[:2])
    with pytest.raises(ExtractionError, match="up to 11 given"):
        probe.add_batch(
            0, torch.from_numpy(np.concatenate([features, features[:, :1]], 1)), np.r_[positions, positions[:1]]
        )
    with pytest.raises(ExtractionError, match="0 of 10 sequences given"):
        probe.results()
