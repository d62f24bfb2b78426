"""The tables' records and the paths built from them: one record per table, one place for each file's name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from causalpos.catalogue import paths
from causalpos.catalogue import figures as figure_paths
from causalpos.catalogue.models import seed_run
from causalpos.catalogue.columns import COMMON
from causalpos.catalogue.tables import ACTIVATION_TABLES, EMERGENCE_TABLES, SUMMARY_FILES, SUMMARY_TABLES, TABLES, table

SRC = Path(__file__).resolve().parents[2] / "src" / "causalpos"


@pytest.mark.parametrize("name", TABLES)
def test_a_record_names_each_column_once_with_its_meaning(name):
    record = TABLES[name]
    assert record.name == name and record.meaning and not record.meaning.endswith(".")
    assert len(set(record.file_columns)) == len(record.file_columns)
    assert list(record.column_meanings) == list(record.file_columns)
    assert all(record.column_meanings[c].strip() for c in record.file_columns)
    assert set(record.wildcards) <= {"variant", "model"}
    assert record.path.endswith((".parquet", ".json")) and not record.path.startswith("/")


def test_every_table_has_its_own_file():
    files = [record.path for record in TABLES.values()]
    assert len(files) == len(set(files))


@pytest.mark.parametrize("name", TABLES)
def test_paths_build_each_file_from_its_record(name):
    record = TABLES[name]
    assert paths.table_file(name, "r") == f"r/{record.path}"  # a wildcard left out stays a pattern
    filled = paths.table_file(name, "r", **{w: f"<{w}>" for w in record.wildcards})
    assert "{" not in filled and all(f"<{w}>" in filled for w in record.wildcards)


def test_the_old_path_functions_are_the_records():
    assert paths.simulation_table("v") == "results/simulation/v.parquet" == paths.table_file("simulation", variant="v")
    assert paths.simulation_groups("v", "r") == "r/simulation_groups/v.parquet"
    assert paths.theory_table() == "results/theory/layer2_scores.parquet"
    assert paths.recursion_table("r") == "r/theory/recursion.parquet"
    assert paths.documents() == "results/data/documents.parquet"
    assert paths.activation_tables("m") == {t: f"results/activations/m/{t}.parquet" for t in ACTIVATION_TABLES}
    assert paths.emergence_tables("{model}") == {
        t: f"results/emergence/{{model}}/{t}.parquet" for t in EMERGENCE_TABLES
    }
    assert paths.pretrained_ablation("m") == "results/activations/m/pattern_ablation.parquet"
    assert paths.model_file("nope", paths.ABLATION_FILE) == paths.table_file("pattern_ablation", model="nope")
    assert paths.table_file("length_eval", model=seed_run("nope", 2)) == "results/models/nope_seed2/length_eval.parquet"
    assert paths.summary_tables("r") == [f"r/summary/{SUMMARY_FILES[t]}" for t in SUMMARY_TABLES]
    assert paths.table_file("claims", "r") == paths.summary_file("claims.parquet", "r")


def test_unknown_tables_and_wildcards_are_named():
    with pytest.raises(ValueError, match="unknown table 'claim'; known: .*'claims'"):
        table("claim")
    with pytest.raises(ValueError, match="no wildcard \\['variant'\\]"):
        paths.table_file("length_eval", variant="x")
    with pytest.raises(ValueError, match="unknown activation table"):
        paths.activation_table("m", "losses")


def test_common_meanings_are_used():
    used = {c for record in TABLES.values() for c in record.file_columns}
    assert set(COMMON) <= used


def code_strings(path: Path):
    """(line, text) of every string constant of a module's code: f-string parts included, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_a_tables_file_name_is_written_in_one_place():
    """ "length_eval.parquet" was written 8 times in 5 files: now each table's file name is in its record, and
    code builds it with catalogue.paths or Table.filename."""
    names = {record.filename for record in TABLES.values()}
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        if relative == Path("catalogue/tables.py"):
            continue
        found += [
            f"{relative}:{line}: {text!r}"
            for line, text in code_strings(path)
            if any(text.endswith(name) for name in names)
        ]
    workflow = SRC.parents[1]
    for path in [workflow / "Snakefile", *sorted((workflow / "rules").glob("*.smk"))]:  # the rules: Snakemake's syntax
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found += [
                f"{path.name}:{number}: {text!r}"
                for text in re.findall(r"[\"']([^\"']+)[\"']", line)
                if any(text.endswith(name) for name in names)
            ]
    assert found == []


# the catalogue is a low layer: plain data that every other layer reads
ALLOWED_IMPORTS = ("numpy", "pandas", "causalpos.errors", "causalpos.io", "causalpos.tril", "causalpos.catalogue")


def test_the_catalogue_imports_only_the_standard_library_numpy_pandas_and_base_modules():
    import sys

    found = []
    for path in sorted((SRC / "catalogue").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            )
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or any(
                    name == a or name.startswith(a + ".") for a in ALLOWED_IMPORTS
                ):
                    continue
                found.append(f"{path.name}: {name}")
    assert found == []


def test_a_figures_input_files_come_from_its_record():
    assert figure_paths.figure_inputs("figS1_mc_vs_closed_form", "r", variants=["a", "b"]) == {
        "simulation": ["r/simulation/a.parquet", "r/simulation/b.parquet"],
        "theory": ["r/theory/layer2_scores.parquet"],
    }
    assert figure_paths.figure_inputs("figT1_training_loss", "r") == {  # no models in the record: the trained ones
        "metrics": ["r/models/nope/metrics.parquet", "r/models/rope/metrics.parquet"],
        "blocks": ["r/tokens/blocks.json"],
    }
    assert figure_paths.figure_inputs("fig05_llms", "r", models=["smol"]) == {
        "scores": ["r/activations/smol/scores.parquet"]
    }
    # rule summary's table holds every model: one file, whatever the models
    assert figure_paths.figure_inputs("figM1_nonrelativeness", "r", models=["a", "b"]) == {
        "nonrelativeness": ["r/summary/nonrelativeness.parquet"]
    }
    with pytest.raises(ValueError, match="drawn by the rule that writes its table 'convergence'"):
        figure_paths.figure_inputs("figL2_convergence")
