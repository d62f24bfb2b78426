"""causalpos.results: the tables the stages write come back as [layer, (head,) query, key] arrays and a ledger.

Every test writes its own small tables (the real column lists) under a results folder of its own, from a known
array whose entries encode their own (layer, head, query, key): a transposed or shifted axis would not match.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalpos import results
from causalpos.catalogue.claims import LEDGER_COLUMNS
from causalpos.io import DamagedFileError
from causalpos.matrices import visible_pairs
from causalpos.catalogue.tables import HEAD_SCORE_COLUMNS, RECURSION_COLUMNS, SCORE_COLUMNS, SIMULATION_COLUMNS
from causalpos.catalogue import paths

LAYERS, HEADS, S = 3, 2, 6


def known(*lead: int) -> np.ndarray:
    """[*lead, S, S] whose entry [l, (h,) q, k] is 1000 l + (100 h +) 10 q + k + 0.5: no two alike, not symmetric."""
    grids = np.meshgrid(*(np.arange(n) for n in (*lead, S, S)), indexing="ij")
    weights = {3: (1000, 10, 1), 4: (1000, 100, 10, 1)}[len(grids)]
    return sum(w * g for w, g in zip(weights, grids)) + 0.5


def long_rows(array: np.ndarray, visible: np.ndarray, lead=("layer",)) -> pd.DataFrame:
    """The visible entries of `array` [*lead, S, S] as long rows, shuffled (the reader must not rely on order)."""
    index = np.nonzero(np.broadcast_to(visible, array.shape))
    frame = pd.DataFrame({name: i for name, i in zip([*lead, "query_pos", "key_pos"], index)})
    frame["value"] = array[index]
    return frame.sample(frac=1.0, random_state=0).reset_index(drop=True)


def write(frame: pd.DataFrame, path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path, index=False)


def simulation_table(variant: str, array: np.ndarray, mask: str = "causal", window=None) -> pd.DataFrame:
    rows = long_rows(array, visible_pairs(S, mask, window))
    table = pd.DataFrame(
        {
            "variant": variant,
            "layer": rows["layer"],
            "query_pos": rows["query_pos"],
            "key_pos": rows["key_pos"],
            "score_mean": rows["value"],
            "score_sem": 0.01,
            "score_diagnorm": -rows["value"],
            "prob_mean": rows["value"] / 1e4,
            "prob_sem": 0.0,
        }
    )
    assert list(table.columns) == SIMULATION_COLUMNS
    # then the Variant fields, as the stage writes them
    return table.assign(
        norm="l2",
        scale="none",
        alpha=0.0,
        pe="none",
        rope_theta=10000.0,
        mask=mask,
        residual=True,
        d=64,
        seq_len=S,
        n_layers=LAYERS,
        n_samples=100,
        seed=0,
        sampler="gaussian",
        window=pd.array([window] * len(table), dtype="Int64"),
    )


def score_table(model: str, rows: pd.DataFrame) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "model": model,
            "kind": "pretrained",
            "layer": rows["layer"],
            "query_pos": rows["query_pos"],
            "key_pos": rows["key_pos"],
            "score_mean": rows["value"],
            "score_sem": 0.01,
            "score_diagnorm": -rows["value"],
            "n_sequences": 8,
            "seq_len": S,
        }
    )
    assert list(table.columns) == SCORE_COLUMNS
    return table.assign(table="scores")


def head_score_table(model: str, rows: pd.DataFrame) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "model": model,
            "kind": "pretrained",
            "layer": rows["layer"],
            "head": rows["head"],
            "query_pos": rows["query_pos"],
            "key_pos": rows["key_pos"],
            "score_mean": rows["value"],
            "n_sequences": 8,
            "seq_len": S,
        }
    )
    assert list(table.columns) == HEAD_SCORE_COLUMNS
    return table.assign(table="head_scores")


def lower(array: np.ndarray) -> np.ndarray:
    """`array` with NaN above the diagonal of its last two axes."""
    return np.where(visible_pairs(S, "causal"), array, np.nan)


@pytest.fixture
def res(tmp_path) -> str:
    return str(tmp_path / "results")


# ---------------------------------------------------------------- simulation


def test_a_simulation_variant_is_layer_query_key_with_nan_above_the_diagonal(res):
    array = known(LAYERS)
    write(simulation_table("v", array), paths.simulation_table("v", res))
    maps = results.simulation("v", res)
    assert maps.shape == (LAYERS, S, S) and maps.dtype == np.float64
    np.testing.assert_array_equal(maps, lower(array))
    assert maps[2, 4, 1] == 2041.5  # [layer, query, key], 0-based
    assert np.isnan(maps[0, 1, 4]) and np.isnan(np.triu(maps[1], 1)[np.triu_indices(S, 1)]).all()
    np.testing.assert_array_equal(results.simulation("v", res, value="prob_mean"), lower(array) / 1e4)


def test_a_sliding_window_hides_its_keys_and_no_mask_hides_none(res):
    array = known(LAYERS)
    write(simulation_table("w", array, window=2), paths.simulation_table("w", res))
    write(simulation_table("open", array, mask="none"), paths.simulation_table("open", res))
    windowed = results.simulation("w", res)
    seen = visible_pairs(S, "causal", 2)  # key q - 1 and q
    np.testing.assert_array_equal(windowed, np.where(seen, array, np.nan))
    assert windowed[1, 5, 4] == 1054.5 and np.isnan(windowed[1, 5, 3]) and np.isnan(windowed[1, 4, 5])
    np.testing.assert_array_equal(results.simulation("open", res), array)


def test_the_arrays_are_the_figures_matrices(res):
    """The figures draw a layer with figures.simulation.layer_matrix: the same [query, key] matrix."""
    from causalpos.figures.simulation import layer_matrix

    table = simulation_table("w", known(LAYERS), window=3)
    write(table, paths.simulation_table("w", res))
    maps = results.simulation("w", res, value="score_diagnorm")
    for layer in range(LAYERS):
        np.testing.assert_array_equal(maps[layer], layer_matrix(table, "w", layer, "score_diagnorm"))


def test_an_unknown_variant_names_the_variants_there_and_the_rule(res):
    write(simulation_table("alpha", known(LAYERS)), paths.simulation_table("alpha", res))
    write(simulation_table("beta", known(LAYERS)), paths.simulation_table("beta", res))
    with pytest.raises(results.MissingResultError) as err:
        results.simulation("gamma", res)
    message = str(err.value)
    assert isinstance(err.value, FileNotFoundError)
    assert "'gamma'" in message and "alpha, beta" in message and paths.simulation_table("gamma", res) in message
    assert f"`snakemake --cores 2 {paths.simulation_table('gamma', res)}` makes it" in message


def test_an_empty_folder_says_so(res):
    with pytest.raises(
        results.MissingResultError, match=r"holds none; .* `snakemake --cores 2 .*/simulation/v\.parquet`"
    ):
        results.simulation("v", res)


def test_a_damaged_file_raises_damaged_file_error(res):
    path = Path(paths.simulation_table("v", res))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"PAR1 not a table")
    with pytest.raises(DamagedFileError, match=re.escape(str(path))):
        results.simulation("v", res)


def test_a_wrong_value_and_repeated_rows_are_errors(res):
    table = simulation_table("v", known(LAYERS))
    write(pd.concat([table, table.head(1)]), paths.simulation_table("v", res))
    with pytest.raises(ValueError, match="score_mean, score_sem"):
        results.simulation("v", res, value="score")
    with pytest.raises(ValueError, match="several rows"):
        results.simulation("v", res)


# ---------------------------------------------------------------- model scores


def test_a_models_scores_are_layer_query_key(res):
    array = known(LAYERS)
    write(score_table("m", long_rows(array, visible_pairs(S, "causal"))), paths.activation_table("m", "scores", res))
    np.testing.assert_array_equal(results.scores("m", res), lower(array))
    np.testing.assert_array_equal(results.scores("m", res, value="score_diagnorm"), -lower(array))


def test_per_head_maps_are_layer_head_query_key(res):
    """per_head reads head_scores.parquet, the head average scores.parquet: two files, two arrays."""
    visible = visible_pairs(S, "causal")
    mean, heads = known(LAYERS), known(LAYERS, HEADS)
    write(score_table("m", long_rows(mean, visible)), paths.activation_table("m", "scores", res))
    write(
        head_score_table("m", long_rows(heads, visible, lead=("layer", "head"))),
        paths.activation_table("m", "head_scores", res),
    )
    maps = results.scores("m", res, per_head=True)
    assert maps.shape == (LAYERS, HEADS, S, S) and maps.dtype == np.float64
    np.testing.assert_array_equal(maps, lower(heads))
    assert maps[2, 1, 5, 3] == 2153.5  # [layer, head, query, key]
    np.testing.assert_array_equal(results.scores("m", res), lower(mean))
    with pytest.raises(ValueError, match="score_mean"):  # the per-head table has means only
        results.scores("m", res, per_head=True, value="score_sem")


def test_per_head_without_per_head_maps_names_the_setting(res):
    """With extraction.per_head off the extraction writes head_scores.parquet with no rows."""
    write(
        score_table("m", long_rows(known(LAYERS), visible_pairs(S, "causal"))),
        paths.activation_table("m", "scores", res),
    )
    path = paths.activation_table("m", "head_scores", res)
    write(
        head_score_table("m", long_rows(known(LAYERS, HEADS), visible_pairs(S, "causal"), lead=("layer", "head"))).head(
            0
        ),
        path,
    )
    with pytest.raises(ValueError, match=r"extraction\.per_head: false") as err:
        results.scores("m", res, per_head=True)
    assert path in str(err.value) and f"`snakemake --cores 2 {path}`" in str(err.value)
    folder = paths.paper_llms_dir(res)
    write(
        head_score_table(
            "big", long_rows(known(LAYERS, HEADS), visible_pairs(S, "causal"), lead=("layer", "head"))
        ).head(0),
        paths.activation_table("big", "head_scores", folder),
    )
    with pytest.raises(
        ValueError, match=r"extraction\.paper_llms\.per_head: false.*snakemake --cores 2 .*/paper_llms/"
    ):
        results.scores("big", res, per_head=True, paper_llms=True)
    with pytest.raises(results.MissingResultError, match=r"head_scores\.parquet does not exist"):
        results.scores("other", res, per_head=True)


def test_an_unknown_model_names_the_models_there_and_the_command_that_makes_it(res):
    for model in ("nope", "smollm2_135m"):
        write(
            score_table(model, long_rows(known(LAYERS), visible_pairs(S, "causal"))),
            paths.activation_table(model, "scores", res),
        )
    with pytest.raises(results.MissingResultError) as err:
        results.scores("llama", res)
    message = str(err.value)
    command = f"`snakemake --cores 2 {paths.activation_table('llama', 'scores', res)}` makes it"
    assert "'llama'" in message and "nope, smollm2_135m" in message and command in message


def test_paper_llms_reads_that_targets_folder(res):
    array = known(LAYERS)
    folder = paths.paper_llms_dir(res)
    write(
        score_table("big", long_rows(array, visible_pairs(S, "causal"))),
        paths.activation_table("big", "scores", folder),
    )
    np.testing.assert_array_equal(results.scores("big", res, paper_llms=True), lower(array))
    with pytest.raises(results.MissingResultError, match="'big'"):
        results.scores("big", res)
    with pytest.raises(results.MissingResultError, match=r"snakemake --cores 2 .*paper_llms/activations/other/"):
        results.scores("other", res, paper_llms=True)


# ---------------------------------------------------------------- recursion


def recursion_table() -> tuple[pd.DataFrame, np.ndarray]:
    array, frames = known(LAYERS), []
    for variant, corrected in (("l2", True), ("rope", False)):
        rows = long_rows(array, visible_pairs(S, "causal"))
        frames.append(
            pd.DataFrame(
                {
                    "variant": variant,
                    "layer": rows["layer"],
                    "query_pos": rows["query_pos"],
                    "key_pos": rows["key_pos"],
                    "score": rows["value"],
                    "score_diagnorm": 0.0,
                    "prob": 0.1,
                    "concentrates": True,
                    "corrected": corrected,
                    "score_corrected": rows["value"] + 0.25 if corrected else np.nan,
                    "score_diagnorm_corrected": np.nan,
                    "prob_corrected": np.nan,
                }
            ).assign(seq_len=S)
        )
    table = pd.concat(frames, ignore_index=True)
    assert list(table.columns[:-1]) == RECURSION_COLUMNS
    return table, array


def test_recursion_is_layer_query_key_and_corrected_on_request(res):
    table, array = recursion_table()
    write(table, paths.recursion_table(res))
    np.testing.assert_array_equal(results.recursion("l2", res), lower(array))
    np.testing.assert_array_equal(results.recursion("l2", res, corrected=True), lower(array) + 0.25)
    np.testing.assert_array_equal(results.recursion("rope", res), lower(array))
    with pytest.raises(ValueError, match="no O\\(1/d\\) correction"):
        results.recursion("rope", res, corrected=True)
    with pytest.raises(ValueError, match=r"no variant 'zeta'.*l2, rope.*add it there and run `snakemake"):
        results.recursion("zeta", res)


def test_a_missing_recursion_table_names_its_rule(res):
    with pytest.raises(
        results.MissingResultError,
        match=r"recursion\.parquet does not exist; `snakemake --cores 2 .*recursion\.parquet` makes it",
    ):
        results.recursion("l2", res)


# ---------------------------------------------------------------- ledger


def test_the_ledger_is_a_dataframe_with_the_ledger_columns(res):
    rows = pd.DataFrame([{c: f"{c}{i}" for c in LEDGER_COLUMNS} | {"value": 0.5 * i, "model": "m"} for i in range(3)])
    write(rows, paths.summary_file("claims.parquet", res))
    ledger = results.ledger(res)
    assert isinstance(ledger, pd.DataFrame) and list(ledger.columns[: len(LEDGER_COLUMNS)]) == LEDGER_COLUMNS
    pd.testing.assert_frame_equal(ledger, rows, check_dtype=False)
    with pytest.raises(results.MissingResultError, match=r"snakemake --cores 2 .*paper_llms/summary/claims\.parquet"):
        results.ledger(res, paper_llms=True)
    write(rows.drop(columns="verdict"), paths.summary_file("claims.parquet", paths.paper_llms_dir(res)))
    with pytest.raises(ValueError, match="verdict"):
        results.ledger(res, paper_llms=True)


def test_a_missing_ledger_names_the_command_that_makes_it(res):
    with pytest.raises(results.MissingResultError, match=r"claims\.parquet does not exist; `snakemake --cores 2 "):
        results.ledger(res)


# ---------------------------------------------------------------- layering


def test_no_other_module_of_the_package_imports_the_results_api():
    """The API sits on top: the stages, figures and workflow never import it (nor enter its code digest)."""
    src = Path(results.__file__).parent
    users = [
        str(p.relative_to(src))
        for p in src.rglob("*.py")
        if p != Path(results.__file__)
        and re.search(r"causalpos\.results\b|from causalpos import .*\bresults\b", p.read_text())
    ]
    assert users == []


def test_importing_it_loads_neither_torch_nor_matplotlib():
    code = "import sys, causalpos.results; print(sorted({'torch', 'matplotlib'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"
