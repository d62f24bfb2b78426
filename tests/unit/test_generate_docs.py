"""scripts/generate-docs.py: sections registered by name, written between their markers, checked by --check; and
the report captions it writes render, with Snakemake's caption templating, to the records' captions."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from causalpos.catalogue.figures import CONFIGURABLE, FIGURES
from causalpos.catalogue.tables import TABLES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    path = ROOT / "scripts" / "generate-docs.py"
    spec = importlib.util.spec_from_file_location("generate_docs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_table_figure_and_caption_has_a_section(script):
    names = set(script.SECTIONS)
    assert {f"columns-{name}" for name in TABLES} <= names
    assert {"config", "thresholds", "thresholds-schema", "figures", "claims-code", "figure-captions"} <= names
    assert {f"caption-{f}" for f in FIGURES if f not in CONFIGURABLE} <= names


def test_a_section_replaces_only_what_is_between_its_markers(script):
    docsgen = script.docsgen
    sec = docsgen.Section("demo", "docs/x.md", lambda: "| a |\n| b |")
    page = "# Title\n\nprose\n<!-- demo:start -->\nold\nlines\n<!-- demo:end -->\nmore prose\n"
    new = docsgen.replaced(page, sec)
    assert new == "# Title\n\nprose\n<!-- demo:start -->\n| a |\n| b |\n<!-- demo:end -->\nmore prose\n"
    assert docsgen.replaced(new, sec) == new  # written twice: the same
    yaml_sec = docsgen.Section("keys", "schema.yaml", lambda: "      a: 1")
    assert (
        docsgen.replaced("x:\n      # keys:start\n      # keys:end\n", yaml_sec)
        == "x:\n      # keys:start\n      a: 1\n      # keys:end\n"
    )
    rst = docsgen.Section("cap", "report/c.rst", lambda: "text")
    assert docsgen.replaced("{#- cap:start -#}\n{#- cap:end -#}\n", rst) == "{#- cap:start -#}\ntext\n{#- cap:end -#}\n"


@pytest.mark.parametrize(
    "page",
    [
        "no markers\n",
        "<!-- demo:start -->\n<!-- demo:start -->\n<!-- demo:end -->\n",
        "<!-- demo:end -->\n<!-- demo:start -->\n",
    ],
)
def test_missing_or_doubled_markers_are_named(script, page):
    sec = script.docsgen.Section("demo", "docs/x.md", lambda: "")
    with pytest.raises(ValueError, match="docs/x.md needs the markers <!-- demo:start --> ... <!-- demo:end -->"):
        script.docsgen.replaced(page, sec)


def test_a_section_is_registered_once_and_only_for_a_known_kind_of_page(script):
    with pytest.raises(ValueError, match="registered twice"):
        script.docsgen.section("figures", "docs/figures.md")(lambda: "")
    with pytest.raises(ValueError, match="no markers for notes.txt"):
        script.docsgen.section("new", "notes.txt")


def test_check_names_a_section_that_is_out_of_date(script, monkeypatch, capsys):
    """A record changed without running the generator: --check exits 1 and names the section and its page."""
    sec = script.SECTIONS["figures"]
    monkeypatch.setitem(
        script.SECTIONS, "figures", script.docsgen.Section(sec.name, sec.page, lambda: sec.render() + "\n| new |")
    )
    assert script.main(["--check", "figures"]) == 1
    assert "docs/figures.md: section figures is out of date" in capsys.readouterr().out
    assert script.main(["--check", "nothing"]) == 2


def test_each_tables_section_lists_its_columns_in_order(script):
    for name, record in TABLES.items():
        rows = [line for line in script.SECTIONS[f"columns-{name}"].render().splitlines() if line.startswith("| `")]
        assert [row.split("`")[1] for row in rows] == list(record.file_columns)


def render_caption(path: str, params=None, **wildcards) -> str:
    """A caption file as Snakemake's report renders it (Jinja with the job's `snakemake`), before docutils."""
    from jinja2 import Environment

    snakemake = SimpleNamespace(wildcards=wildcards, params=SimpleNamespace(**(params or {})), rule="?", config={})
    return Environment().from_string((ROOT / path).read_text()).render(snakemake=snakemake)


@pytest.mark.parametrize("figure_id", CONFIGURABLE)
def test_rule_figures_caption_file_shows_each_figures_record(figure_id):
    assert render_caption("report/figure.rst", figure=figure_id) == FIGURES[figure_id].caption


@pytest.mark.parametrize("figure_id", [f for f in FIGURES if f not in CONFIGURABLE and f != "fig_all_layers"])
def test_each_other_figures_caption_file_is_its_record(figure_id):
    assert render_caption(FIGURES[figure_id].caption_file) == FIGURES[figure_id].caption


def test_all_layers_caption_tells_trained_models_from_pretrained_ones():
    labels = {"options": {"model_labels": {"nope": "NoPE", "smol": "SmolLM2-135M"}}}
    trained = render_caption("report/all_layers.rst", labels, model="nope", kind="raw", layers="01-04")
    pretrained = render_caption("report/all_layers.rst", labels, model="smol", kind="diagnorm", layers="01-08")
    assert trained.startswith("**All layers of the trained NoPE model**") and "raw scores" in trained
    assert pretrained.startswith("**Figures 11-16**") and "SmolLM2-135M" in pretrained and "01-08" in pretrained
