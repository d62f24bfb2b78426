"""The README and the pages under docs/: they fit, their links and names resolve, and they do not drift.

Each page that lists something the code defines is checked against the code: what the catalogues and the config
schema hold (the tables' columns, the figures, the config keys and thresholds, the claims' code, the report's
captions) is written by scripts/generate-docs.py, whose --check must pass; the CLI is checked against its
parser, the rules against the Snakefiles. No workflow runs here.
"""

from __future__ import annotations

import ast
import json
import importlib.util
import re
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from causalpos.catalogue.tables import TABLES

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
README_MAX_BYTES = 10_000

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
PATH_PREFIXES = (
    ".ci/",
    ".test/",
    "bench/",
    "config/",
    "docs/",
    "envs/",
    "profiles/",
    "report/",
    "rules/",
    "scripts/",
    "src/",
    "tests/",
    "workflow_scripts/",
)


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def prose(path: Path) -> str:
    """The page without its fenced code blocks."""
    return FENCE.sub("", text(path))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", prose(path), re.M)}


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def load_script(name: str):
    path = ROOT / "scripts" / name
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- the README


def test_readme_fits_on_a_few_screens():
    size = len(README.read_bytes())
    assert size < README_MAX_BYTES, f"README.md is {size} bytes; move reference material to docs/"


def test_the_readmes_counts_are_the_committed_ledgers():
    """The README's counts by kind are analysis.claims.ledger.headline of the default run's ledger committed under
    docs/tables (scripts/update-docs-claims.py writes both); and the ledger in docs/claims.md says the same."""
    import pandas as pd

    from causalpos.analysis.claims.ledger import headline

    expected = headline(pd.read_parquet(ROOT / "docs" / "tables" / "default_run" / "claims.parquet"))
    block = re.search(r"<!-- headline:start -->\n(.*?)\n<!-- headline:end -->", text(README), re.S)
    assert block, "README.md lacks its headline markers"
    assert block.group(1) == expected, "out of date: python scripts/update-docs-claims.py"
    assert expected in text(DOCS / "claims.md")


def quick_start_lines() -> list[str]:
    return [line for line in text(README).splitlines() if line.startswith("pip install torch==")]


def test_readme_quick_start_command_2_is_what_ci_runs():
    """.ci/run runs the README's second command verbatim: its install-and-test line is a line of README.md."""
    ci = [line for line in text(ROOT / ".ci" / "run").splitlines() if line.startswith("pip install torch==")]
    assert len(ci) == 1, ci
    assert ci[0].endswith("&& pytest")
    assert ci[0] in text(README).splitlines()


def test_readme_quick_start_command_1_installs_what_command_2_installs():
    first, second = quick_start_lines()
    assert first.endswith("&& snakemake --cores 8 all_figures")
    assert second.endswith("&& pytest")
    assert (
        first.replace("pip install -e . ", 'pip install -e ".[test]" ').rsplit(" && ", 1)[0]
        == second.rsplit(" && ", 1)[0]
    )


def test_readme_links_every_docs_page():
    linked = {Path(target.split("#")[0]) for target in LINK.findall(prose(README))}
    missing = [p.relative_to(ROOT) for p in DOCS.glob("*.md") if p.relative_to(ROOT) not in linked]
    assert missing == [], f"README.md does not link {missing}"


def test_readme_shows_a_figure():
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", prose(README))
    assert images and all((ROOT / t).is_file() for t in images)


# ---------------------------------------------------------------- every page


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_relative_links_point_to_files_and_headings(page):
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        resolved = (page.parent / file).resolve() if file else page
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target} (no such heading)")
    assert broken == [], f"{page.name}: broken links {broken}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_repository_paths_exist(page):
    """Every `path` in backticks that names a file or folder of the repository (no pattern) exists."""
    missing = []
    for code in re.findall(r"`([^`\n]+)`", text(page)):
        path = code.split()[0] if code.split() else ""
        if not path.startswith(PATH_PREFIXES) or re.search(r"[{}*<>|\[]", path):
            continue
        if not (ROOT / path.rstrip(".,;:")).exists():
            missing.append(path)
    assert missing == [], f"{page.name}: no such file or folder {missing}"


def module_file(module: str) -> Path | None:
    base = ROOT / "src" / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(text(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_module_names_exist(page):
    """Every dotted causalpos.x.y name is a module, or a module and a name defined at its top level."""
    stale = []
    for name in sorted(set(re.findall(r"(?<![/\w])causalpos(?:\.[A-Za-z_]\w*)+", text(page)))):  # not a path
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            path = module_file(".".join(parts[:cut]))
            if path is not None:
                break
        rest = parts[cut:]
        if path is None or (rest and rest[0] not in top_level_names(path)):
            stale.append(name)
    assert stale == [], f"{page.name}: no such module or name {stale}"


def test_no_mention_of_the_old_claims_script():
    assert not (ROOT / "scripts" / "update-readme-claims.py").exists()
    for page in PAGES:
        assert "update-readme-claims" not in text(page), page.name


# ---------------------------------------------------------------- docs/configuration.md


def schema_keys() -> tuple[list[str], list[str]]:
    """Dotted keys of every section and nested object of the schema; the fields of its $defs."""
    schema = yaml.safe_load(text(ROOT / "src" / "causalpos" / "schemas" / "config.schema.yaml"))
    dotted = []

    def walk(properties: dict, prefix: str):
        for name, node in properties.items():
            dotted.append(prefix + name)
            if "properties" in node:
                walk(node["properties"], f"{prefix}{name}.")

    walk(schema["properties"], "")
    fields_of_defs = [name for node in schema["$defs"].values() for name in node.get("properties", {})]
    return dotted, fields_of_defs


def test_configuration_page_names_every_key():
    from causalpos.simulation.variant import Variant

    page = text(DOCS / "configuration.md")
    dotted, def_fields = schema_keys()
    missing = [k for k in dotted if f"`{k}" not in page]  # `simulation.variants` as `simulation.variants.NAME`
    missing += [k for k in def_fields + [f.name for f in fields(Variant)] if f"`{k}`" not in page]
    assert missing == [], f"docs/configuration.md lacks {missing}"


def generator():
    return load_script("generate-docs.py")


def test_generated_sections_are_up_to_date():
    """scripts/generate-docs.py --check: every section it writes is what the catalogues and the schema give."""
    assert generator().main(["--check"]) == 0, "out of date: python scripts/generate-docs.py"


# ---------------------------------------------------------------- docs/results.md


@pytest.mark.parametrize("name", sorted(TABLES))
def test_results_page_shows_every_table_with_every_column(name):
    """Each table of the catalogue has its section on docs/results.md, and every column of its file is there."""
    shown = generator().docsgen.section_text(f"columns-{name}")
    assert f"`results/{TABLES[name].path}`" in shown
    assert [c for c in TABLES[name].file_columns if f"| `{c}` |" not in shown] == []


# ---------------------------------------------------------------- docs/cli.md


def test_cli_page_lists_every_subcommand_and_its_targets_are_results_of_a_rule(rule_outputs):
    """Every `causalpos` subcommand is on docs/cli.md, and every file its `snakemake` lines name is an output of a
    rule of the workflow (a result, not a path of the page's own making)."""
    import argparse

    from causalpos.workflow.cli import build_parser

    parser = build_parser()
    page = text(DOCS / "cli.md")
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    missing = [f"causalpos {name}" for name in sub.choices if f"causalpos {name}" not in page]
    assert missing == [], f"docs/cli.md lacks {missing}"
    from helpers import writers_for

    patterns = [regex for _, regex, _ in json.loads(writers_for(rule_outputs, "results"))]
    targets = re.findall(r"^snakemake [^#\n]*?\b(results/\S+)", page, re.M)
    assert len(targets) >= 10
    assert [t for t in targets if not any(re.fullmatch(regex, t) for regex in patterns)] == []


# ---------------------------------------------------------------- docs/claims.md


def test_claims_page_has_the_ledger_markers():
    page = text(DOCS / "claims.md")
    for marker in ("<!-- claims:start -->", "<!-- claims:end -->"):
        assert page.count(marker) == 1, marker
    assert page.index("<!-- claims:start -->") < page.index("<!-- claims:end -->")
    script = text(ROOT / "scripts" / "update-docs-claims.py")
    assert '"docs" / "claims.md"' in script


# ---------------------------------------------------------------- docs/workflow.md


def rules() -> dict[str, str]:
    """Rule name -> its text, from the Snakefile and rules/*.smk; a `use rule a as b with:` has a's text, then
    its own (what it changes)."""
    found, uses = {}, []
    for path in [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]:
        parts = re.split(r"^(?:rule (\w+)|use rule (\w+) as (\w+) with):", text(path), flags=re.M)
        for name, parent, child, body in zip(parts[1::4], parts[2::4], parts[3::4], parts[4::4]):
            if name:
                found[name] = body
            else:
                uses.append((parent, child, body))
    for parent, child, body in uses:  # in file order: a parent is defined before its children
        found[child] = found[parent] + body
    return found


def test_workflow_page_lists_every_rule():
    """The generated table and graph hold every rule (generate-docs.py --check holds them current)."""
    page = text(DOCS / "workflow.md")
    mermaid = re.search(r"```mermaid\n(.*?)```", page, re.S).group(1)
    table = [line for line in page.splitlines() if line.startswith("| `")]
    targets = [r for r, body in rules().items() if not re.search(r"^    output:", body, re.M)]  # make nothing
    missing = [r for r in rules() if r not in targets and not any(line.startswith(f"| `{r}`") for line in table)]
    repeating_all = ("all_figures", "verify")  # targets that ask for what `all` asks: the graph is drawn from all's
    missing += [f"{r} (DAG)" for r in rules() if r not in repeating_all and not re.search(rf"\b{r}\b", mermaid)]
    assert missing == [], f"docs/workflow.md lacks rules {missing}"


def test_workflow_page_names_every_cached_rule():
    section = text(DOCS / "workflow.md").split("## Between-workflow cache")[1].split("\n## ")[0]
    cached = [r for r, body in rules().items() if re.search(r"^\s+cache: True", body, re.M)]
    assert cached and [r for r in cached if f"`{r}`" not in section] == []


# ---------------------------------------------------------------- docs/figures.md


def test_figures_page_shows_every_figure():
    from causalpos.catalogue.figures import FIGURES

    page = text(DOCS / "figures.md")
    missing = [f for f in FIGURES if f"`{f}`" not in page]
    missing += [
        name
        for name in (p.relative_to(DOCS / "figures").as_posix() for p in (DOCS / "figures").rglob("*.png"))
        if f"(figures/{name})" not in page
    ]  # the claims figure's pages in their folder too
    assert missing == [], f"docs/figures.md lacks {missing}"


# ---------------------------------------------------------------- report/ captions


def render_caption(name: str, params: dict | None = None, **wildcards) -> str:
    """A report caption as `snakemake --report` renders it: Jinja with the job's wildcards and params, then
    docutils."""
    from types import SimpleNamespace

    from docutils.core import publish_parts
    from jinja2 import Environment

    rst = (
        Environment()
        .from_string(text(ROOT / "report" / name))
        .render(snakemake=SimpleNamespace(wildcards=wildcards, params=SimpleNamespace(**(params or {})), rule="?"))
    )
    return publish_parts(rst, writer="html", settings_overrides={"report_level": 1})["body"]


def test_report_captions_say_what_to_look_for_once():
    """Every figure's caption is in report/ (not a job parameter, which the report shows beside it)."""
    from causalpos.catalogue.figures import CONFIGURABLE

    listed = re.findall(r'^\s+"(\w+)": "', text(ROOT / "report" / "figure.rst"), re.M)
    assert sorted(listed) == sorted(CONFIGURABLE)
    pages = [render_caption("figure.rst", figure=f) for f in CONFIGURABLE]
    labels = {"options": {"model_labels": {"nope": "NoPE", "smol": "SmolLM2-135M"}}}  # rule params
    pages += [
        render_caption("all_layers.rst", labels, model=m, kind=k, layers="01-08")
        for k in ("raw", "diagnorm")
        for m in ("nope", "smol")
    ]
    # the paper's Figures 11-16 are its LLMs: a trained model's pages are ours, named as such
    assert "Figures 11-16" in pages[-1] and "SmolLM2-135M" in pages[-1] and "smol" not in pages[-1]
    assert "Figures 11-16" not in pages[-2] and "trained NoPE model" in pages[-2]
    pages += [render_caption("length_seeds.rst"), render_caption("pattern_ablation.rst")]
    for html in pages:
        assert "Look for" in html and "system-message" not in html
    assert len(set(pages)) == len(pages)
    for name, body in rules().items():
        params = re.search(r"^    params:\n((?:        .*\n)+)", body, re.M)
        assert not params or "caption" not in params.group(1), f"rule {name} passes a caption as a param"
