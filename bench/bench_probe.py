"""The position probe's own cost: the numpy probe it replaced ("before") against causalpos.models.probe.

Both sides fit the same probe (ridge from a hidden state to its position, causalpos.models.probe)
on the same random float32 rows, given as the extraction gives them: batches of `--batch`
sequences of `--rows` positions, every hidden state's rows on `--device`.

- before: the numpy code of causalpos.models.probe before it moved to torch, copied below: per
  state and sequence the rows copied to the host (`.cpu().numpy()`, as extract.py did) and a
  float64 `u.T @ u`; per state one `np.linalg.eigh` when the training rows are complete and one
  `np.linalg.solve` for the refit;
- after: `StreamingProbe(..., device=...)`: float64 sums on the device, one batched Gram product
  per batch (`add_batch`), a Cholesky factorisation per penalty for all states (`ridge_solve`).

"add" is the seconds per sequence of the batches that close no phase; "close" the seconds of the
two batches that do (the first validation and the first test sequence, given as a batch of their
own) less their sequences' add time: the ridge solves. The before side's per-state costs add up,
so `--before-states` runs it on the first states only and scales its times to all states (its
MAE is then compared on those states). "solve" times the two ways to solve the ridge for all
penalties on the device: one batched `torch.linalg.eigh` against seven Cholesky factorisations.

    python bench/bench_probe.py                                     # CPU: 576 features x 31 states, 2,048 x 2
    OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 python bench/bench_probe.py --features 576 4096 --states 31 33 \
        --device cuda --before-states 2 --json out.json                   # a GPU machine with 16 cores

Threads: one unless OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS say otherwise. Both
sides run in one process, where numpy's OpenBLAS threads and torch's OpenMP threads compete; on a
2-core machine busy with other work a two-thread eigh took 10-30 times longer than on one thread.
causalpos must be importable (the project installed, or PYTHONPATH=src).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # before numpy and torch start their thread pools (see above)

import numpy as np  # after the threads are set
import torch

from causalpos.models.probe import PENALTIES, StreamingProbe, ridge_solve
from causalpos.models.probe_split import split_points

# ---------------------------------------------------------------- before: the numpy probe (our own earlier code)

class StateProbeBefore:
    """One hidden state's probe: the phase (train, validation, test) follows the sequence number."""

    def __init__(self, n_features: int, penalties):
        self.penalties = np.asarray(penalties, dtype=np.float64)
        f = n_features
        self.n = np.zeros(3)
        self.shift = None
        self.sum_y, self.sum_u, self.sum_uu, self.sum_uy = np.zeros(3), np.zeros(f), np.zeros(f), np.zeros(f)
        self.gram = np.zeros((f, f))
        self.mean = self.scale = self.weights = self.sum_xy_train = None
        self.errors = np.zeros(len(self.penalties))
        self.sum_x, self.sum_xy = np.zeros(f), np.zeros(f)
        self.fit = None
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
        n = self.n[0]
        offset = self.sum_u / n
        self.mean = self.shift + offset
        self.scale = np.sqrt(np.maximum(self.sum_uu / n - offset ** 2, 0)) + 1e-8
        centred = self.gram - n * np.outer(offset, offset)
        self.gram = centred / np.outer(self.scale, self.scale)
        self.sum_xy_train = (self.sum_uy - offset * self.sum_y[0]) / self.scale
        values, vectors = np.linalg.eigh(self.gram)
        projected = vectors.T @ self.sum_xy_train
        self.weights = np.stack([vectors @ (projected / (values + p * n)) for p in self.penalties], axis=1)

    def close_validation(self) -> None:
        best = self.penalties[int(np.argmin(self.errors))]
        n = self.n[0] + self.n[1]
        offset = (self.sum_y[0] + self.sum_y[1]) / n
        target = self.sum_xy_train + self.sum_xy - offset * self.sum_x
        weights = np.linalg.solve(self.gram + best * n * np.eye(len(self.gram)), target)
        self.fit = (weights, offset)

    def result(self) -> dict:
        n_test = self.n[2]
        return {"mae": float(self.test_error / n_test), "mae_baseline": float(self.test_baseline / n_test),
                "n_train": int(self.n[0] + self.n[1]), "n_test": int(n_test)}


class StreamingProbeBefore:
    def __init__(self, n_states: int, n_features: int, n_sequences: int, penalties=PENALTIES):
        self.cuts = split_points(n_sequences)
        self.n_sequences = n_sequences
        self.states = [StateProbeBefore(n_features, penalties) for _ in range(n_states)]
        self.phase = 0
        self.next_sequence = 0

    def add_sequence(self, sequence: int, features: list, positions: np.ndarray) -> None:
        phase = 0 if sequence < self.cuts[0] else 1 if sequence < self.cuts[1] else 2
        while self.phase < phase:
            for state in self.states:
                (state.close_training if self.phase == 0 else state.close_validation)()
            self.phase += 1
        for state, rows in zip(self.states, features):
            state.add(phase, np.asarray(rows), np.asarray(positions))
        self.next_sequence += 1

    def results(self) -> list[dict]:
        return [state.result() for state in self.states]


# ---------------------------------------------------------------- the runs

def make_rows(n_states: int, n_sequences: int, rows: int, features: int, device, seed: int = 0):
    """[states, sequences, rows, features] float32 on the device, a few features informative of the position."""
    generator = torch.Generator().manual_seed(seed)
    positions = torch.sort(torch.randint(0, 1024, (n_sequences, rows), generator=generator), dim=1).values
    z = torch.randn(n_states, n_sequences, rows, features, generator=generator)
    z *= torch.rand(features, generator=generator) * 10 + 0.1
    z[..., :4] += positions[..., None] / 100 * torch.randn(n_states, 1, 1, 4, generator=generator)
    return z.to(device), positions.numpy()


def batches(n_sequences: int, batch: int, cuts) -> list[range]:
    """Batches of `batch` sequences; the first sequence of each phase after the first in a batch of its own."""
    out, start = [], 0
    while start < n_sequences:
        stop = min(start + batch, n_sequences, *[c for c in cuts if c > start])
        if start in cuts:
            stop = start + 1
        out.append(range(start, stop))
        start = stop
    return out


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def timed_run(add, z, positions, n_sequences: int, batch: int, cuts, device) -> dict:
    """Seconds of every batch; those starting a phase hold the solves."""
    add_seconds, close_calls = [], []
    for sequences in batches(n_sequences, batch, cuts):
        sync(device)
        started = time.perf_counter()
        add(sequences, z, positions)
        sync(device)
        seconds = time.perf_counter() - started
        (close_calls if sequences.start in cuts else add_seconds).append((seconds, len(sequences)))
    per_sequence = sum(s for s, _ in add_seconds) / sum(n for _, n in add_seconds)
    return {"add_s_per_sequence": per_sequence,
            "close_s": sum(s for s, _ in close_calls) - per_sequence * sum(n for _, n in close_calls)}


def run_before(z, positions, n_states: int, batch: int, device) -> tuple[dict, list]:
    _, n_sequences, _, f = z.shape
    probe = StreamingProbeBefore(n_states, f, n_sequences)

    def add(sequences, z, positions):
        for row, sequence in enumerate(sequences):  # as extract.py did: one sequence at a time, on the host
            features = [z[state, sequence].cpu().numpy() for state in range(n_states)]
            probe.add_sequence(sequence, features, positions[sequence])

    times = timed_run(add, z, positions, n_sequences, batch, probe.cuts, device)
    return times, probe.results()


def run_after(z, positions, batch: int, device) -> tuple[dict, list]:
    n_states, n_sequences, _, f = z.shape
    probe = StreamingProbe(n_states, f, n_sequences, device=device)

    def add(sequences, z, positions):
        probe.add_batch(sequences.start, z[:, sequences.start:sequences.stop],
                        positions[sequences.start:sequences.stop])

    times = timed_run(add, z, positions, n_sequences, batch, probe.cuts, device)
    return times, probe.results()


def solve_times(n_states: int, features: int, device) -> dict:
    """All penalties' ridge weights for every state: batched eigh against a Cholesky per penalty."""
    x = torch.randn(n_states, features + 64, features, dtype=torch.float64, device=device)
    gram, rhs = x.transpose(1, 2) @ x, torch.randn(n_states, features, dtype=torch.float64, device=device)
    diagonals = (torch.tensor(PENALTIES, dtype=torch.float64, device=device) * (features + 64)).expand(n_states, -1)
    times = {}
    for name in ("eigh", "cholesky"):
        sync(device)
        started = time.perf_counter()
        if name == "eigh":  # what the before side did, batched on the device
            values, vectors = torch.linalg.eigh(gram)
            projected = (vectors.transpose(1, 2) @ rhs[..., None])[..., 0]
            weights = vectors @ (projected[..., None] / (values[..., None] + diagonals[:, None]))
        else:
            weights = ridge_solve(gram, diagonals, rhs)
        sync(device)
        times[f"solve_{name}_s"] = time.perf_counter() - started
        del weights
    return times


def bench(features: int, n_states: int, args) -> dict:
    torch.manual_seed(0)
    z, positions = make_rows(n_states, args.sequences, args.rows, features, args.device)
    sync(args.device)
    before_states = min(args.before_states or n_states, n_states)
    after, after_results = run_after(z, positions, args.batch, args.device)
    before, before_results = run_before(z[:before_states], positions, before_states, args.batch, args.device)
    scale = n_states / before_states  # the before side's costs are per state
    before = {key: value * scale for key, value in before.items()}
    differences = [abs(a["mae"] - b["mae"]) / b["mae"] for a, b in zip(after_results, before_results)]
    return {"features": features, "states": n_states, "sequences": args.sequences, "rows": args.rows,
            "batch": args.batch, "device": str(args.device), "before_states": before_states,
            "before": before, "after": after,
            "add_ratio": before["add_s_per_sequence"] / after["add_s_per_sequence"],
            "close_ratio": before["close_s"] / after["close_s"],
            "mae_max_relative_difference": max(differences),
            "mae_over_baseline": [r["mae"] / r["mae_baseline"] for r in after_results[:3]],
            **solve_times(n_states, features, args.device)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--features", type=int, nargs="+", default=[576, 2048])
    parser.add_argument("--states", type=int, nargs="+", default=[31, 2],
                        help="hidden states per --features entry (one value: for all)")
    parser.add_argument("--sequences", type=int, default=40)
    parser.add_argument("--rows", type=int, default=32, help="positions per sequence")
    parser.add_argument("--batch", type=int, default=8, help="sequences per batch")
    parser.add_argument("--before-states", type=int, default=None, help="run the before side on this many states")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    states = args.states * len(args.features) if len(args.states) == 1 else args.states
    results = [bench(f, s, args) for f, s in zip(args.features, states, strict=True)]
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
