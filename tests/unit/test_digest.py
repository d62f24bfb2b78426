"""The code digest of each rule follows the meaning of the code its jobs run: a docstring, a comment or the layout
changes nothing; a statement changes the digest of exactly the rules whose job modules import it."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from causalpos.workflow.digest import code_digest, import_closure, job_module, module_file

SRC = Path(__file__).resolve().parents[2] / "src" / "causalpos"
RULES = sorted(p.stem for p in (SRC / "jobs").glob("*.py") if p.stem != "__init__")


@pytest.fixture
def source_copy(tmp_path):
    shutil.copytree(SRC, tmp_path / "causalpos", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "causalpos"


def digests(root: Path) -> dict[str, str]:
    return {rule: code_digest(rule, root) for rule in RULES}


def users_of(module: str, root: Path) -> set[str]:
    return {rule for rule in RULES if module in import_closure([job_module(rule)], root)}


def test_every_rule_of_the_workflow_has_a_job_module():
    rules = set()
    for smk in (SRC.parents[1] / "rules").glob("*.smk"):
        rules |= {line.split()[1].rstrip(":") for line in smk.read_text().splitlines() if line.startswith("rule ")}
    assert rules == set(RULES)


def test_the_copy_digests_as_the_original(source_copy):
    assert digests(source_copy) == digests(SRC)


def test_docstrings_comments_and_layout_change_no_digest(source_copy):
    before = digests(source_copy)
    io = source_copy / "io.py"
    text = io.read_text()
    tree = ast.parse(text)
    first = tree.body[0]
    assert isinstance(first, ast.Expr) and isinstance(first.value.value, str)  # io.py opens with its docstring
    edited = text.replace('"""', '"""An edited docstring. ', 1)  # the module's docstring
    edited = edited.replace("def write_parquet(", "# a new comment\n\n\ndef write_parquet(", 1)
    edited = edited.replace("def read_table(", "def  read_table (", 1)  # layout
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and ast.get_docstring(n))
    edited = edited.replace(ast.get_docstring(func, clean=False), "A function's docstring, rewritten.", 1)
    assert edited != text
    io.write_text(edited)
    assert digests(source_copy) == before


def test_a_statement_changes_exactly_the_rules_that_import_it(source_copy):
    before = digests(source_copy)
    io = source_copy / "io.py"
    io.write_text(io.read_text() + "\nEDITED = 1\n")
    after = digests(source_copy)
    changed = {rule for rule in RULES if before[rule] != after[rule]}
    assert changed == users_of("causalpos.io", source_copy)
    assert {"simulate", "train", "claims", "figure"} <= changed  # every rule that writes Parquet reads io


@pytest.mark.parametrize(
    "module, yes, no",
    [
        ("models/train.py", {"train", "emergence"}, {"length_eval", "theory", "simulate", "claims"}),
        ("models/blocks.py", {"train", "length_eval", "pattern_ablation", "emergence"}, {"theory", "claims"}),
        ("simulation/engine.py", {"simulate"}, {"train", "recursion", "theory"}),
        ("figures/style.py", {"figure", "model_figure", "claims"}, {"simulate", "train", "extract"}),
        ("analysis/claims/ledger.py", {"claims", "convergence"}, {"summary", "figure", "train"}),
    ],
)
def test_an_edit_reruns_its_users_and_not_the_others(source_copy, module, yes, no):
    before = digests(source_copy)
    path = source_copy / module
    path.write_text(path.read_text() + "\nEDITED = 1\n")
    changed = {rule for rule in RULES if before[rule] != digests(source_copy)[rule]}
    assert yes <= changed and not (no & changed)


def test_a_string_that_is_not_a_docstring_counts(source_copy):
    before = digests(source_copy)
    jobs = source_copy / "jobs" / "theory.py"
    text = jobs.read_text()
    assert '"stage": "theory"' in text
    jobs.write_text(text.replace('"stage": "theory"', '"stage": "closed forms"'))
    after = digests(source_copy)
    assert {rule for rule in RULES if before[rule] != after[rule]} == {"theory"}


def test_closure_of_every_module_is_what_a_full_walk_of_its_syntax_tree_finds():
    """digest visits only statements (an import is one); a walk of every node of every tree finds the same."""

    def name(path):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    def imports(module):
        path = module_file(module)
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = module.split(".")
                    keep = len(parts) - node.level + (path.name == "__init__.py")
                    base = ".".join(parts[:keep] + ([base] if base else []))
                found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
        return {n for n in found if n.split(".")[0] == "causalpos"}

    def closure(root):
        seen, todo = set(), [root]
        while todo:
            module = todo.pop()
            parents = [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 2)]
            for candidate in parents:
                if candidate not in seen and module_file(candidate) is not None:
                    seen.add(candidate)
                    todo.extend(imports(candidate))
        return sorted(seen)

    modules = [name(path) for path in sorted(SRC.rglob("*.py"))]
    assert len(modules) > 40
    for module in modules:
        assert import_closure([module]) == closure(module), module


def test_the_workflow_layer_is_in_no_rule_digest():
    """Running a job (its log, its signals) and reading the config decide no result: editing them reruns nothing."""
    for rule in RULES:
        assert not [m for m in import_closure([job_module(rule)]) if m.startswith("causalpos.workflow")], rule


def test_a_prose_module_reaches_only_the_docs_and_its_words_change_no_digest(source_copy):
    """catalogue/columns.py holds the column meanings of docs/results.md: tables.py gives them to each Table as
    `column_meanings`, which only the docs generator reads, so leaving its words out of the digests hides nothing a
    job computes. Editing a meaning changes no rule's digest; a new statement still does."""
    from causalpos.workflow.digest import PROSE

    assert PROSE == {"causalpos.catalogue.columns"}
    readers = set()
    for path in [*SRC.rglob("*.py"), *(SRC.parents[1] / "scripts").rglob("*.py")]:
        text = path.read_text()
        if (
            "column_meanings" in text
            or "catalogue.columns" in text
            or "from causalpos.catalogue import columns" in text
        ):
            readers.add(path.relative_to(SRC.parents[1]).as_posix())
    docs = {"scripts/docsgen/catalogue_pages.py", "scripts/docsgen/config_page.py"}
    assert readers == {"src/causalpos/catalogue/tables.py", "src/causalpos/workflow/digest.py", *docs}
    columns = source_copy / "catalogue" / "columns.py"
    before = digests(source_copy)
    text = columns.read_text()
    columns.write_text(text.replace('"the measured value"', '"the value measured, in other words"', 1))
    assert digests(source_copy) == before
    columns.write_text(text + "\nEDITED_BY_A_TEST = len(COMMON)\n")
    assert digests(source_copy) != before


# ---------------------------------------------------------------- the on-disk cache of parsed files


@pytest.fixture
def fresh_parse(monkeypatch, tmp_path):
    """The digest module with its per-process memo emptied and its disk cache in `tmp_path` (returned)."""
    from causalpos.workflow import digest

    monkeypatch.setattr(digest, "CACHE", digest.DigestCache(tmp_path / "cache"))
    digest._parsed.cache_clear()
    yield digest
    digest._parsed.cache_clear()


def test_digests_from_the_disk_cache_are_those_parsed_without_it(fresh_parse, monkeypatch, source_copy):
    filled = digests(source_copy)  # parses every file and fills the cache
    entries = list(fresh_parse.CACHE.folder.iterdir())
    assert len(entries) >= len(import_closure([job_module(rule) for rule in RULES], source_copy))
    fresh_parse._parsed.cache_clear()
    parsed, parse = [], ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: parsed.append(1) or parse(*a, **k))
    assert digests(source_copy) == filled  # read back from the cache ...
    assert parsed == []  # ... without parsing a file
    monkeypatch.setattr(fresh_parse, "CACHE", fresh_parse.DigestCache(None))
    fresh_parse._parsed.cache_clear()
    assert digests(source_copy) == filled  # and the same as with no cache at all


def test_a_changed_file_is_parsed_again_and_a_damaged_entry_is_ignored(fresh_parse, source_copy):
    before = digests(source_copy)
    target = source_copy / "matrices.py"
    user = next(iter(users_of("causalpos.matrices", source_copy)))
    target.write_text(target.read_text() + "\nEXTRA_STATEMENT = 1\n")
    fresh_parse._parsed.cache_clear()
    assert code_digest(user, source_copy) != before[user]  # new bytes, new key: never the old entry
    for entry in fresh_parse.CACHE.folder.iterdir():
        entry.write_text("not a digest")
    fresh_parse._parsed.cache_clear()
    target.write_text(target.read_text().replace("\nEXTRA_STATEMENT = 1\n", ""))
    assert digests(source_copy) == before  # damaged entries are parsed anew
