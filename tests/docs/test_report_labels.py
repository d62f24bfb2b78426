"""The labels of `snakemake --report` (rules/common.smk: report_formats, format_label, all_layers_labels) as
Snakemake 9's report lays them out, without a browser: its tables' row order, their toggle, and which file a
row opens first.

The report's JavaScript (snakemake/report/html_reporter/template/components/abstract_results.js) decides, for
each table (a category's subcategory):
- the columns: the labels, in the order they first appear in the results' label dicts;
- the toggle: among the labels but the first, one with exactly two values, each on half of the table's
  results; none if two labels qualify;
- the rows: one per combination of the other labels, sorted by them as strings (String.localeCompare, first
  label first: "13-18" sorts before "7-12");
- what a row opens first: the toggle starts on the first of its two values in JavaScript's default sort
  ("yes" if that is the second).
`report_tables` below does the same in Python; test_the_model_follows_snakemakes_report checks that the
installed Snakemake still has the code it models. scripts/check-report.py checks the same in the report itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import snakemake
from helpers import ROOT

from causalpos.catalogue.claims import PAGES
from causalpos.catalogue.figures import ALL_LAYERS_FIGURE, CLAIMS_FIGURE, all_layers_page, claims_page

# Layer counts of fake extracted models: the default run's trained twins (4 layers), Gemma-3-270M (18) and
# SmolLM2-135M (30); and a model deeper than 99 layers, whose numbers take three digits.
LAYERS = {"nope": 4, "gemma3_270m": 18, "smollm2_135m": 30, "deep": 120}
PER_PAGE = 8  # figures.activations.LAYERS_PER_PAGE: the pages' runs of layers below are those of all_layers_pages

# Loads the workflow (default config) with Snakemake's API, as `snakemake --report` does, and prints every
# result the report would list: its path, category, subcategory and labels, each evaluated for the job's
# wildcards as snakemake.report.auto_report does (a callable called with the wildcards, a string formatted).
LOAD = r"""
import json, os, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.io import apply_wildcards, glob_wildcards
from snakemake.iocontainers import Wildcards
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

root, models = Path(sys.argv[1]), sys.argv[2].split(",")


def value(item, wildcards):
    item = item(wildcards) if callable(item) else item
    return apply_wildcards(item, wildcards) if isinstance(item, str) else item


found, seen = [], set()
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(snakefile=root / "Snakefile", workdir=Path.cwd(), resource_settings=ResourceSettings(),
                            config_settings=ConfigSettings(configfiles=[root / "config.yaml"]))._workflow
    figures = workflow.globals["FIGURES"]
    for rule in workflow.rules:
        for output in rule.output:
            flag = output.flags.get("report")
            if not flag:
                continue
            names = output.get_wildcard_names()
            base = {"results": "results"} if "results" in names else {}  # the default run's folder
            jobs = [base]
            if "figure" in names:
                jobs = [{**base, "figure": f} for f in figures]
            elif "model" in names:
                jobs = [{**base, "model": m} for m in models]
            for job in jobs:
                path = apply_wildcards(str(output), Wildcards(fromdict=job))
                files = [(path, job)]
                if flag.patterns:
                    files = []
                    for pattern in flag.patterns:
                        pattern = os.path.join(path, pattern)
                        matches = glob_wildcards(pattern)._asdict()
                        for values in zip(*matches.values()):
                            wildcards = {**dict(zip(matches, values)), **job}
                            files.append((apply_wildcards(pattern, Wildcards(fromdict=wildcards)), wildcards))
                for file, wildcards in files:
                    if file in seen:
                        continue
                    seen.add(file)
                    wildcards = Wildcards(fromdict=wildcards)
                    labels = value(flag.labels, wildcards)
                    found.append({"rule": rule.name, "path": file, "category": value(flag.category, wildcards),
                                  "subcategory": value(flag.subcategory, wildcards),
                                  "labels": labels and {k: value(v, wildcards) for k, v in labels.items()}})
print("RESULTS " + json.dumps(found))
"""


def pages(n_layers: int) -> list[tuple[str, int, int]]:
    """(kind, first, last) of every page of a model's fig_all_layers, 1-based, in the order a reader wants
    them: raw scores, then diagonal-normalised, each by layer (as figures.activations.all_layers_pages)."""
    n_pages = -(-n_layers // PER_PAGE)
    sizes = [n_layers // n_pages + (page < n_layers % n_pages) for page in range(n_pages)]
    runs, first = [], 1
    for size in sizes:
        runs.append((first, first + size - 1))
        first += size
    return [(kind, a, b) for kind in ("raw", "diagnorm") for a, b in runs]


@pytest.fixture(scope="module")
def report_results(tmp_path_factory) -> list[dict]:
    """Every result `snakemake --report` would list for the default config, with fig_all_layers pages on disk
    for models of LAYERS layers (the labels are made from the pages found) and the claims figure's pages."""
    workdir = tmp_path_factory.mktemp("report_labels")
    claims = workdir / "results" / "figures" / CLAIMS_FIGURE
    claims.mkdir(parents=True)
    for page in PAGES:
        for ext in ("pdf", "png"):
            Path(claims_page(claims, page, ext)).touch()
    for model, n_layers in LAYERS.items():
        folder = workdir / "results" / "figures" / f"{ALL_LAYERS_FIGURE}_{model}"
        folder.mkdir(parents=True)
        for kind, first, last in pages(n_layers):
            for ext in ("pdf", "png"):
                Path(all_layers_page(folder, kind, first, last, ext)).touch()
    out = subprocess.run(
        [sys.executable, "-c", LOAD, str(ROOT), ",".join(LAYERS)],
        cwd=workdir,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("RESULTS ")]
    return json.loads(line.removeprefix("RESULTS "))


# ---------------------------------------------------------------- the report's JavaScript, in Python


def locale_key(text: str) -> tuple:
    """String.localeCompare's order, near enough for labels (Chromium's ICU root collation): spaces, then
    punctuation, digits, letters; letters compared without case first."""

    def rank(c: str) -> int:
        return 0 if c.isspace() else 2 if c.isdigit() else 3 if c.isalpha() else 1

    return tuple((rank(c), c.casefold()) for c in text), text


def report_table(results: list[dict]) -> dict:
    """AbstractResults.getData and getInitToggleState of abstract_results.js, for one table's results (in the
    report's order, by file name): its columns, its toggle {label: [two values]}, the toggle's start value, and
    its rows (label values, {toggle value: path}) in the order shown."""
    first_index: dict[str, int] = {}
    labelled = all(r["labels"] for r in results)
    if labelled:
        for r in results:
            for i, key in enumerate(r["labels"]):
                first_index.setdefault(key, i)
    labels = sorted(first_index, key=first_index.get)  # a stable sort, as Array.prototype.sort
    toggles = {}
    for label in labels[1:]:
        values = [r["labels"][label] for r in results if label in r["labels"]]
        unique = list(dict.fromkeys(values))
        if len(unique) == 2 and all(values.count(v) * 2 == len(results) for v in unique):
            toggles[label] = sorted(unique)  # Array.prototype.sort: by UTF-16 code units
    if len(toggles) > 1:
        toggles = {}
    start = {label: (values[1] if values[1] == "yes" else values[0]) for label, values in toggles.items()}
    rows: dict[tuple, dict] = {}
    for r in results:
        key = (
            tuple(str(r["labels"].get(label, "")) for label in labels if label not in toggles)
            if labelled
            else (r["path"],)
        )
        rows.setdefault(key, {})[tuple(r["labels"][label] for label in toggles)] = r["path"]
    order = sorted(rows, key=lambda key: [locale_key(v) for v in key])
    return {
        "columns": [label for label in labels if label not in toggles] if labelled else ["File"],
        "toggles": toggles,
        "start": start,
        "rows": [(key, rows[key]) for key in order],
        "opens": [rows[key][tuple(start[label] for label in toggles)] for key in order],
    }


def report_tables(results: list[dict]) -> dict[tuple, dict]:
    """Every table of the report: {(category, subcategory): report_table}."""
    grouped = defaultdict(list)
    for r in sorted(results, key=lambda r: Path(r["path"]).name):  # auto_report sorts a table's results by name
        grouped[r["category"], r["subcategory"]].append(r)
    return {key: report_table(group) for key, group in grouped.items()}


def test_the_model_follows_snakemakes_report():
    """report_table models these lines of the installed Snakemake's report; a Snakemake that changes them
    needs report_table and the labels in rules/common.smk read again."""
    js = (
        Path(snakemake.__file__).parent / "report" / "html_reporter" / "template" / "components" / "abstract_results.js"
    ).read_text()
    for line in (
        'let initialValue = value[1] === "yes" ? value[1] : value[0];',
        "labels.slice(1).forEach(function (label) {",
        "uniqueValues.length == 2 &&",
        "uniqueValues.every(value => values.filter(v => v === value).length === results.length / 2)",
        "uniqueValues.sort();",
        "if (toggleLabels.size > 1) {",
        "let comparison = aLabels[i].localeCompare(bLabels[i]);",
    ):
        assert line in js, f"Snakemake's report no longer has: {line}"


def test_the_model_finds_the_old_faults():
    """What the report showed before: layers unpadded ("13-18" before "7-12"), kind a label of its own (two
    toggles, so none) and the format toggle starting on "pdf"."""
    old = [
        {
            "path": f"{kind}_layers{a:02d}-{b:02d}.{ext}",
            "labels": {"figure": "f", "kind": kind, "layers": f"{a}-{b}", "format": ext},
        }
        for kind, a, b in pages(18)
        for ext in ("pdf", "png")
    ]
    table = report_table(old)
    assert table["toggles"] == {}
    assert [key[2] for key, _ in table["rows"] if key[1] == "raw" and key[3] == "png"] == ["1-6", "13-18", "7-12"]
    formats_only = [{**r, "labels": {k: v for k, v in r["labels"].items() if k != "kind"}} for r in old]
    assert report_table(formats_only)["start"] == {"format": "pdf"}


# ---------------------------------------------------------------- the labels


@pytest.mark.parametrize("model", ["gemma3_270m", "smollm2_135m", "deep", "nope"])
def test_all_layers_pages_are_listed_by_layer(report_results, model):
    """A model's fig_all_layers pages, as the report lists them: together, raw scores first (as the paper's
    Figures 11-13 before 14-16), each kind by layer: 1-6, 7-12, 13-18 for 18 layers; 1-8, 9-16, 17-23, 24-30
    for 30; 1-8, ..., 113-120 for 120."""
    tables = report_tables(report_results)
    (key,) = [key for key, t in tables.items() if any(ALL_LAYERS_FIGURE in p for _, v in t["rows"] for p in v.values())]
    opened = [Path(path) for path in tables[key]["opens"] if Path(path).parent.name == f"{ALL_LAYERS_FIGURE}_{model}"]
    first = [i for i, path in enumerate(tables[key]["opens"]) if f"{ALL_LAYERS_FIGURE}_{model}/" in path]
    assert first == list(range(first[0], first[0] + len(first))), "a model's pages are not together"
    listed = [(p.stem.split("_layers")[0], *map(int, p.stem.split("_layers")[1].split("-"))) for p in opened]
    assert listed == pages(LAYERS[model])


def test_the_claims_pages_are_listed_in_claim_order(report_results):
    """The ledger's pages in the report's table, in the order of their claims (1, 2-3, ..., 10, 11; a string sort of
    unpadded numbers put 10 and 11 before 2)."""
    tables = report_tables(report_results)
    (key,) = [key for key, t in tables.items() if any(CLAIMS_FIGURE in p for _, v in t["rows"] for p in v.values())]
    shown = [Path(path).stem for path in tables[key]["opens"] if f"/{CLAIMS_FIGURE}/" in path]
    assert shown == [Path(claims_page(Path("."), page, "png")).stem for page in PAGES], shown


def test_every_figure_table_has_a_format_toggle_that_opens_the_png(report_results):
    """Every table of figures (each category and subcategory: simulation, trained models, pretrained LLMs,
    measurements, all layers, claims pages and convergence) has one toggle, the format, with a PDF and a PNG
    value, and each row opens its PNG before the toggle is touched."""
    tables = report_tables(report_results)
    figures = {
        key: t
        for key, t in tables.items()
        if any(p.endswith((".pdf", ".png")) for _, v in t["rows"] for p in v.values())
    }
    assert {key[1] for key in figures} >= {"All layers", "Claims"}  # and the figures' parts of the paper
    assert len(figures) >= 5
    for key, table in figures.items():
        assert list(table["toggles"]) == ["format"], key
        values = table["toggles"]["format"]
        assert sorted("pdf" if "pdf" in v else "png" if "png" in v else v for v in values) == ["pdf", "png"], key
        assert all(path.endswith(".png") for path in table["opens"]), (key, table["opens"])
        assert all(len(variants) == 2 for _, variants in table["rows"]), key  # each row: its PDF and its PNG


def test_the_format_labels_sort_png_first(report_results):
    """The format label of every PNG sorts before every other format's (JavaScript's default sort, by code
    unit): the toggle starts on it."""
    by_ext = defaultdict(set)
    for r in report_results:
        if r["labels"] and "format" in r["labels"]:
            by_ext[Path(r["path"]).suffix].add(r["labels"]["format"])
    (png,) = by_ext.pop(".png")
    assert by_ext and all(png < other for labels in by_ext.values() for other in labels)
