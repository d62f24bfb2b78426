"""Summary numbers on synthetic score matrices whose answers are known in advance."""

import numpy as np
import pandas as pd
import pytest

from causalpos.analysis import triangles
from causalpos.io import read_metadata
from causalpos.analysis.summary import (
    INCREASING_COLUMNS,
    NONRELATIVENESS_COLUMNS,
    PROBE_SUMMARY_COLUMNS,
    increasing_fraction,
    nonrelativeness,
    probe_summary,
    write_summaries,
)

N = 10


def diagnorm_by_loops(matrix: np.ndarray) -> np.ndarray:
    """Each lower-triangle entry minus the mean of its band i - j, written out with plain loops."""
    n = matrix.shape[0]
    out = np.full((n, n), np.nan)
    for offset in range(n):
        band = [(i, i - offset) for i in range(offset, n)]
        mean = sum(matrix[i, j] for i, j in band) / len(band)
        for i, j in band:
            out[i, j] = matrix[i, j] - mean
    return out


def long_table(layers, model="toy", kind="trained", sem=0.01, n_sequences=100) -> pd.DataFrame:
    """Long scores table (lower triangle incl. diagonal) of a list of [query, key] matrices."""
    rows = []
    for layer, matrix in enumerate(layers):
        n = matrix.shape[0]
        norm = diagnorm_by_loops(matrix)
        for i in range(n):
            for j in range(i + 1):
                rows.append(
                    {
                        "model": model,
                        "kind": kind,
                        "layer": layer,
                        "query_pos": i,
                        "key_pos": j,
                        "score_mean": matrix[i, j],
                        "score_sem": sem,
                        "score_diagnorm": norm[i, j],
                        "n_sequences": n_sequences,
                        "seq_len": n,
                    }
                )
    return pd.DataFrame(rows)


def toeplitz(n=N, seed=0) -> np.ndarray:
    f = np.random.default_rng(seed).normal(size=n)
    i, j = np.indices((n, n))
    return f[i - j]


def keys(n=N):
    return np.indices((n, n))[1].astype(float)


def one(frame, **where):
    rows = frame
    for column, value in where.items():
        rows = rows[rows[column] == value]
    assert len(rows) == 1
    return rows.iloc[0]


# ---------------------------------------------------------------- non-relativeness


def test_relative_matrix_has_zero_index_and_deficit():
    row = one(nonrelativeness(long_table([toeplitz()])))
    for column in ("index", "index_no_sink", "deficit", "deficit_no_sink"):
        assert row[column] == pytest.approx(0.0, abs=1e-12), column
    assert row["score_std"] > 0.1  # the matrix is not constant, only relative
    assert row["pattern_std"] == pytest.approx(0.0, abs=1e-12)
    assert row["left_keys"] == 3 and row["seq_len"] == N and row["n_pairs"] == N * (N - 1) // 2


def test_absolute_key_term_gives_positive_index_and_negative_deficit():
    matrix = toeplitz() - 2.0 / (1.0 + keys())  # the first keys score lower, whatever the distance
    table = long_table([matrix])
    row = one(nonrelativeness(table))
    assert 0.05 < row["index"] <= 1.0
    assert 0.0 < row["index_no_sink"] <= 1.0
    assert row["index"] > 10 * row["index_noise"]
    assert row["deficit"] < -0.1 and row["deficit_no_sink"] < -0.01
    # with every key, the index is Var(score_diagnorm) / Var(score_mean) of the table's own columns
    off = table[table["key_pos"] < table["query_pos"]]
    assert row["index"] == pytest.approx(off["score_diagnorm"].var(ddof=0) / off["score_mean"].var(ddof=0))
    assert row["pattern_std"] == pytest.approx(off["score_diagnorm"].std(ddof=0))
    left = off[off["key_pos"] < 3]
    assert row["deficit"] == pytest.approx(left["score_diagnorm"].mean())
    assert row["score_q01"] == pytest.approx(off["score_mean"].quantile(0.01))


def test_brighter_left_region_gives_positive_deficit():
    row = one(nonrelativeness(long_table([toeplitz() + 2.0 / (1.0 + keys())])))
    assert row["deficit"] > 0.1 and row["deficit_no_sink"] > 0.01


def test_sink_column_alone_vanishes_without_key_zero():
    matrix = toeplitz() + 5.0 * (keys() == 0)
    row = one(nonrelativeness(long_table([matrix])))
    assert row["index"] > 0.05 and row["deficit"] > 0.1  # key 0 is brighter than its diagonals
    assert row["index_no_sink"] == pytest.approx(0.0, abs=1e-12)
    assert row["deficit_no_sink"] == pytest.approx(0.0, abs=1e-12)
    darker = one(nonrelativeness(long_table([toeplitz() - 5.0 * (keys() == 0)])))
    assert darker["deficit"] < -0.1 and darker["deficit_no_sink"] == pytest.approx(0.0, abs=1e-12)


def test_noise_floor_and_constant_matrix():
    row = one(nonrelativeness(long_table([toeplitz()], sem=0.1)))
    off_var = np.var([toeplitz()[i, j] for i in range(N) for j in range(i)])
    assert row["index_noise"] == pytest.approx(0.01 / off_var)
    flat = one(nonrelativeness(long_table([np.ones((N, N))])))
    assert np.isnan(flat["index"]) and flat["score_std"] == 0.0


def test_groups_are_separate_and_row_order_does_not_matter():
    relative = long_table([toeplitz(), toeplitz(seed=1)], model="rel")
    absolute = long_table([toeplitz() - 2.0 / (1.0 + keys())], model="abs", kind="pretrained")
    table = pd.concat([absolute, relative]).sample(frac=1.0, random_state=0)
    out = nonrelativeness(table)
    assert list(out.columns) == NONRELATIVENESS_COLUMNS
    assert list(zip(out["model"], out["layer"])) == [("abs", 0), ("rel", 0), ("rel", 1)]
    assert (out.loc[out["model"] == "rel", "index"].abs() < 1e-12).all()
    assert one(out, model="abs")["index"] > 0.05 and one(out, model="abs")["kind"] == "pretrained"


def test_left_region_width_follows_seq_len():
    assert one(nonrelativeness(long_table([toeplitz(n=20)])))["left_keys"] == 5
    assert one(nonrelativeness(long_table([toeplitz(n=4)])))["left_keys"] == 2
    assert one(nonrelativeness(long_table([toeplitz(n=20)]), left_fraction=0.5))["left_keys"] == 10


def test_missing_column_is_named():
    with pytest.raises(ValueError, match="score_sem"):
        nonrelativeness(long_table([toeplitz()]).drop(columns="score_sem"))


# ---------------------------------------------------------------- increasing fraction


def test_increasing_and_decreasing_rows():
    up = one(increasing_fraction(long_table([keys() + 0.1 * toeplitz()[:, :1]])))  # row offsets do not matter
    assert up["fraction"] == 1.0 and up["fraction_no_sink"] == 1.0 and up["fraction_with_diagonal"] == 1.0
    assert up["n_pairs"] == (N - 1) * (N - 2) // 2  # steps (i, j) -> (i, j + 1) with j + 1 < i
    assert up["n_pairs_no_sink"] == (N - 2) * (N - 3) // 2
    assert up["n_pairs_with_diagonal"] == N * (N - 1) // 2
    assert up["fraction_sem"] == pytest.approx(0.0, abs=1e-12)  # steps of 1 against sem 0.01
    assert up["mean_step"] == pytest.approx(1.0) and up["unresolved"] == 0.0
    down = one(increasing_fraction(long_table([-keys()])))
    assert down["fraction"] == 0.0 and down["fraction_no_sink"] == 0.0 and down["fraction_with_diagonal"] == 0.0


def test_sink_column_changes_the_fraction():
    row = one(increasing_fraction(long_table([keys() + 100.0 * (keys() == 0)])))
    steps_from_0 = N - 2  # rows i >= 2 have an off-diagonal step 0 -> 1, now going down
    assert row["fraction"] == pytest.approx(1.0 - steps_from_0 / row["n_pairs"])
    assert row["fraction_no_sink"] == 1.0


def test_diagonal_steps_only_in_the_with_diagonal_variant():
    row = one(increasing_fraction(long_table([keys() - 100.0 * np.eye(N)])))  # self-score very low
    assert row["fraction"] == 1.0
    assert row["fraction_with_diagonal"] == pytest.approx(1.0 - (N - 1) / (N * (N - 1) // 2))


def test_sem_of_unresolved_steps():
    row = one(increasing_fraction(long_table([np.zeros((N, N))], sem=0.5)))
    assert row["fraction"] == 0.0  # ties do not count as increasing
    assert row["unresolved"] == 1.0
    assert row["fraction_sem"] == pytest.approx(0.5 / np.sqrt(row["n_pairs"]))  # every p = 1/2
    assert list(increasing_fraction(long_table([keys()])).columns) == INCREASING_COLUMNS


# ---------------------------------------------------------------- the ledger's finer statistics (analysis.triangles)


def packed(matrix: np.ndarray, reps: int = 0, sem: float = 0.0, seed: int = 0) -> np.ndarray:
    """[P, 1 + reps]: the packed lower triangle plus noise of SD sem, then parametric replicates (as the
    ledger draws them from Monte Carlo standard errors)."""
    q, k = np.tril_indices(matrix.shape[0])
    rng = np.random.default_rng(seed)
    estimate = matrix[q, k] + (rng.normal(0, sem, q.size) if sem else 0.0)
    return np.column_stack([estimate, estimate[:, None] + sem * rng.standard_normal((q.size, reps))])


def with_diagonal(matrix: np.ndarray, value: float = 1.0) -> np.ndarray:
    out = np.array(matrix, dtype=float)
    np.fill_diagonal(out, value)
    return out


def band_pattern(matrix: np.ndarray, kmin: int = 0) -> dict:
    """{(i, j): score minus the mean of its band over keys >= kmin}, with plain loops."""
    bands = {}
    for i in range(N):
        for j in range(kmin, i):
            bands.setdefault(i - j, []).append(matrix[i, j])
    return {(i, j): matrix[i, j] - np.mean(bands[i - j]) for i in range(N) for j in range(kmin, i)}


def test_key_share_diagonal_concordance_and_off_to_diagonal_ratio():
    i = np.indices((N, N))[0]
    by_query, by_key = packed(with_diagonal(1.0 / (1.0 + i))), packed(with_diagonal(keys()))
    assert triangles.key_share(by_query, N)[0] == pytest.approx(0.0, abs=1e-12)  # a function of the query alone
    rows = [keys()[r, :r] for r in range(1, N)]  # within-row variance over the total
    within = sum(((r - r.mean()) ** 2).sum() for r in rows) / sum(len(r) for r in rows)
    assert triangles.key_share(by_key, N)[0] == pytest.approx(within / np.var(np.concatenate(rows)))
    assert triangles.diagonal_concordance(packed(np.diag(1.0 / (1.0 + np.arange(N)))), N)[0] == 1.0
    assert triangles.diagonal_concordance(packed(np.eye(N)), N)[0] == 0.5  # ties count one half
    assert np.isnan(triangles.diagonal_concordance(packed(np.full((N, N), np.nan)), N)[0])
    gram = np.where(np.eye(N, dtype=bool), 4.0, 0.4)
    assert triangles.off_to_diagonal_rms(packed(gram), N)[0] == pytest.approx(0.1)


def test_quantile_range_ratio_against_numpy():
    a = np.random.default_rng(0).normal(size=(997, 5))
    assert np.allclose(triangles.tail_quantiles(a, (0.01, 0.5, 0.99)), np.quantile(a, [0.01, 0.5, 0.99], axis=0))
    x = packed(toeplitz() + 0.3 * np.random.default_rng(4).normal(size=(N, N)))
    p, s = triangles.band_centred(x, N, 1), x[triangles.off_diagonal(N, 1)]
    expected = np.ptp(np.quantile(p, [0.01, 0.99])) / np.ptp(np.quantile(s, [0.01, 0.99]))
    assert triangles.pattern_range_ratio(x, N)[0] == pytest.approx(expected, rel=1e-6)
    assert triangles.band_statistics(x, N, extras=True)["range1"][0] == pytest.approx(expected, rel=1e-6)
    assert triangles.pattern_range_ratio(packed(toeplitz()), N)[0] == pytest.approx(0.0, abs=1e-6)


def test_left_regions_and_first_keys_by_loops():
    matrix = toeplitz() + np.random.default_rng(5).normal(0, 0.2, (N, N))
    x = packed(matrix)
    p, sd = band_pattern(matrix), np.std([matrix[i, j] for i in range(N) for j in range(i)])
    expected = {
        "key 0": [v for (i, j), v in p.items() if j == 0],
        "keys 0-1": [v for (i, j), v in p.items() if j <= 1],
        "first quarter of keys, queries past the first quarter": [v for (i, j), v in p.items() if j < 3 and i >= 3],
        "first quarter of keys, all queries": [v for (i, j), v in p.items() if j < 3],
    }
    regions = triangles.region_deficits(x, N)
    assert list(regions) == list(expected)
    for name, values in expected.items():
        assert regions[name][0] == pytest.approx(np.mean(values) / sd, rel=1e-10), name
    p1, sd1 = band_pattern(matrix, 1), np.std([matrix[i, j] for i in range(N) for j in range(1, i)])
    emphasis = triangles.first_keys_emphasis(x, N)  # keys 1-4, bands recentred without key 0; key 0 apart
    assert emphasis["first"][0] == pytest.approx(np.mean([v for (i, j), v in p1.items() if j <= 4]) / sd1)
    assert emphasis["sink"][0] == pytest.approx(np.mean(expected["key 0"]) / sd1, rel=1e-10)
    plain = triangles.band_statistics(x, N)  # the extras leave the summary's numbers alone
    extras = triangles.band_statistics(x, N, extras=True)
    assert all(np.array_equal(plain[k], extras[k]) for k in plain)


def windowed(matrix: np.ndarray, window: int) -> np.ndarray:
    """The matrix as a sliding-window layer records it: no score (NaN) for keys `window` or more back."""
    i, j = np.indices(matrix.shape)
    return np.where(i - j >= window, np.nan, matrix)


def test_visible_window_reads_the_bands_a_sliding_window_hides():
    matrix = toeplitz() + keys()
    assert triangles.visible_window(packed(matrix)[:, 0], N) is None
    assert triangles.visible_window(packed(windowed(matrix, 4))[:, 0], N) == 4
    scattered = matrix.copy()
    scattered[7, 2] = np.nan  # one pair, not a band
    with pytest.raises(ValueError, match="not the bands of a sliding window"):
        triangles.visible_window(packed(scattered)[:, 0], N)


def test_band_statistics_of_a_sliding_window_layer_by_loops():
    window = 4
    matrix = windowed(toeplitz() + 0.5 * keys() + np.random.default_rng(6).normal(0, 0.2, (N, N)), window)
    x = packed(matrix)
    stats = triangles.band_statistics(x, N, extras=True, window=window)
    for kmin in (0, 1):
        seen = [(i, j) for i in range(N) for j in range(kmin, i) if i - j < window]
        bands = {}
        for i, j in seen:
            bands.setdefault(i - j, []).append(matrix[i, j])
        s = np.array([matrix[i, j] for i, j in seen])
        p = np.array([matrix[i, j] - np.mean(bands[i - j]) for i, j in seen])
        assert stats[f"share{kmin}"][0] == pytest.approx(p.var() / s.var(), rel=1e-10)
        left = [v for (i, j), v in zip(seen, p) if j < 3]  # left_keys = max(2, ceil(0.25 * 10)) = 3
        assert stats[f"deficit{kmin}"][0] == pytest.approx(np.mean(left) / s.std(), rel=1e-10)
        if kmin == 1:
            first = [v for (i, j), v in zip(seen, p) if j <= triangles.FIRST_KEYS]
            assert stats["first1"][0] == pytest.approx(np.mean(first) / s.std(), rel=1e-10)
    assert all(np.isfinite(stats[name][0]) for name in ("share0", "share1", "range1", "first1", "sink0"))
    # a relative matrix stays relative when a window hides its far bands
    relative = triangles.band_statistics(packed(windowed(toeplitz(), window)), N, window=window)
    assert relative["share0"][0] == pytest.approx(0.0, abs=1e-12)


def test_summaries_of_a_sliding_window_layer_leave_out_what_the_window_hides():
    window = 4
    full, hidden = keys() + toeplitz(), windowed(keys() + toeplitz(), window)
    table = long_table([full, hidden])
    nonrel = nonrelativeness(table)
    row = one(nonrel, layer=1)
    visible = sum(1 for i in range(N) for j in range(i) if i - j < window)
    assert row["n_pairs"] == visible < one(nonrel, layer=0)["n_pairs"]
    expected = triangles.band_statistics(packed(hidden), N, window=window)["share0"][0]
    assert row["index"] == pytest.approx(expected) and row["index"] > 0
    rising = increasing_fraction(long_table([windowed(keys(), window)]))  # every visible row rises with the key
    step = one(rising, layer=0)
    assert step["fraction"] == 1.0 and step["fraction_no_sink"] == 1.0
    assert step["n_pairs"] == sum(1 for i in range(N) for j in range(i - 1) if i - j < window)


def test_unsaturated_share():
    assert triangles.unsaturated_share(packed(with_diagonal(keys())), N)[0] == pytest.approx(0.5)  # linear rise
    step = packed(with_diagonal(np.where(keys() >= 1, 1.0, 0.0)))  # constant after the first key
    assert triangles.unsaturated_share(step, N)[0] == pytest.approx((N - 2) / np.arange(2, N).sum())


def test_strict_increase_finds_a_slow_decline_and_tells_flat_from_rising():
    rising = triangles.strict_increase(packed(with_diagonal(keys()), 40, 1e-4), N)
    assert (rising["rising"], rising["violated"], rising["unresolved"]) == (N - 2, 0, 0)
    assert rising["z"] == pytest.approx(triangles.family_z(sum(q * (q - 1) // 2 for q in range(2, N)), 0.05))
    flat = triangles.strict_increase(packed(np.ones((N, N)), 40, 1e-4), N)
    assert (flat["rising"], flat["violated"], flat["unresolved"]) == (0, 0, N - 2)
    n, peak = 30, 5  # rows that rise to key 5, then fall by 1e-4 a key: each step within the noise of 1e-4 ...
    j = np.indices((n, n))[1]
    slow = triangles.strict_increase(
        packed(with_diagonal(0.1 + 0.05 * np.minimum(j, peak) - 1e-4 * np.maximum(j - peak, 0)), 40, 1e-4), n
    )
    assert slow["violated"] > 0 and all(a < b for _, a, b, _ in slow["violations"])  # ... the whole fall is not
    q, at, gap = slow["peaks"][-1]
    assert q == n - 1 and abs(at - peak) <= 2 and gap > 10


def test_noise_units_of_a_relative_and_a_non_relative_layer():
    def amplitude(values):  # claims.replicates.amplitude: the bias-corrected square root
        fixed = values - (values[1:].mean() - values[0])
        return np.sqrt(np.clip(fixed, 0, None))

    relative = triangles.noise_units_nonrelative(packed(with_diagonal(0.01 * toeplitz()), 200, 1e-3, 1), N)
    assert relative[0] == pytest.approx(1.0, abs=0.3)  # noise only: about 1 in noise units
    assert amplitude(relative)[0] < 1 - 2 * amplitude(relative)[1:].std()
    pattern = packed(with_diagonal(0.01 * toeplitz() + 0.01 * keys() / N), 200, 1e-3, 1)
    units = amplitude(triangles.noise_units_nonrelative(pattern, N))
    assert units[0] > 1 + 2 * units[1:].std()


# ---------------------------------------------------------------- probe and files


def probe_table():
    return pd.DataFrame(
        {
            "model": "nope",
            "kind": "trained",
            "layer": [1, 0],
            "mae": [2.0, 12.0],
            "mae_baseline": [12.5, 12.5],
            "n_train": 800,
            "n_test": 200,
            "seq_len": 50,
        }
    )


def test_probe_ratio():
    out = probe_summary(probe_table())
    assert list(out.columns) == PROBE_SUMMARY_COLUMNS and list(out["layer"]) == [0, 1]
    assert out["ratio"].tolist() == pytest.approx([12.0 / 12.5, 2.0 / 12.5])
    assert (out["ratio"] < 1).all()
    with pytest.raises(ValueError, match="mae_baseline"):
        probe_summary(probe_table().drop(columns="mae_baseline"))


def test_write_summaries(tmp_path):
    table = pd.concat([long_table([toeplitz(), keys()], model="nope"), long_table([toeplitz()], model="rope")])
    paths = write_summaries(table, probe_table(), tmp_path / "summary", metadata={"source": "test"})
    assert sorted(p.name for p in (tmp_path / "summary").iterdir()) == [
        "increasing_fraction.parquet",
        "nonrelativeness.parquet",
        "position_probe.parquet",
    ]
    back = pd.read_parquet(paths["nonrelativeness"])
    pd.testing.assert_frame_equal(back, nonrelativeness(table))
    assert read_metadata(paths["nonrelativeness"]) == {
        "source": "test",
        "table": "nonrelativeness",
        "left_fraction": 0.25,
    }
    assert len(pd.read_parquet(paths["increasing_fraction"])) == 3
    assert len(pd.read_parquet(paths["position_probe"])) == 2
