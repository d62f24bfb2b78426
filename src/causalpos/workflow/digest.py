"""The code a rule's jobs run, and a digest of its meaning: edit a statement and the rule reruns; edit a docstring, a
comment or the layout and nothing does.

Each rule passes `code_digest(module)` of its job module (causalpos.jobs.<rule>) as a param: Snakemake reruns a job
whose params changed. The modules are not listed by hand: they are the import closure of the job module, followed
through every `causalpos` import of every module reached (imports inside functions included), with the packages'
__init__ files. Each file is parsed, never imported (cheap while Snakemake builds the DAG), and digested as its
syntax tree with the docstrings taken out: comments and formatting never reach the tree, and a docstring is a
string that decides no result.

Parsing and dumping some 110 trees took ~1 s of every `snakemake` start (every job's too), so each file's result
is kept on disk under the SHA-256 of its bytes (`DigestCache`): the same bytes give the same tree, so a cached entry
can never be out of date, and a changed file simply has a new key.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

PACKAGE = "causalpos"
ROOT = Path(__file__).resolve().parents[1]  # src/causalpos
JOBS = f"{PACKAGE}.jobs"  # one module per rule


def module_file(module: str, root: Path = ROOT) -> Path | None:
    """The source file of a causalpos module or package, or None if `module` names no file (an attribute)."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    base = root.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _statements(node: ast.AST):
    """`node` and every statement nested in it (function and class bodies, branches, handlers, cases).
    An import is a statement, so expressions, most of a tree's nodes, are never visited."""
    yield node
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, None) or ():
            yield from _statements(child)


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """causalpos modules imported anywhere in `tree` (absolute or relative imports), as named there."""
    found = set()
    for item in _statements(tree):
        if isinstance(item, ast.Import):
            found.update(alias.name for alias in item.names)
        elif isinstance(item, ast.ImportFrom):
            base = item.module or ""
            if item.level:
                parts = module.split(".")
                keep = len(parts) - item.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in item.names)  # `from pkg import submodule`
    return {name for name in found if name.split(".")[0] == PACKAGE}


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


class DigestCache:
    """Each parsed file's imports and meaning digest, one small file per key in `folder`. The key is the file's
    bytes, its module name, this module's own source and the Python version (ast.dump's text is Python's): any
    change of what the result depends on is a new key. A folder that cannot be written is only not used."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self.salt = hashlib.sha256(Path(__file__).read_bytes() + sys.version.encode()).digest()

    def key(self, source: bytes, module: str) -> str:
        return hashlib.sha256(self.salt + module.encode() + b"\0" + source).hexdigest()

    def get(self, key: str) -> tuple[frozenset[str], str] | None:
        if self.folder is None:
            return None
        try:
            digest, *imports = (self.folder / key).read_text().split("\n")
        except (OSError, UnicodeDecodeError):
            return None
        return (frozenset(imports), digest) if len(digest) == 64 else None

    def put(self, key: str, imports: frozenset[str], digest: str) -> None:
        if self.folder is None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.folder, delete=False, suffix=".tmp") as out:
                out.write("\n".join([digest, *sorted(imports)]))
            os.replace(out.name, self.folder / key)  # whole or absent: jobs start side by side
        except OSError:
            pass


def cache_folder() -> Path | None:
    """$CAUSALPOS_DIGEST_CACHE ("" turns the cache off), else the user's cache folder (XDG_CACHE_HOME)."""
    chosen = os.environ.get("CAUSALPOS_DIGEST_CACHE")
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / PACKAGE / "code-digests"


CACHE = DigestCache(cache_folder())


@lru_cache(maxsize=None)
def _parsed(path: Path, mtime_ns: int, module: str) -> tuple[frozenset[str], str]:
    """A module's causalpos imports and the digest of its meaning, once per version of its file: Snakemake asks
    for some 25 closures while it parses the rules. Parsed only when the on-disk cache lacks these bytes."""
    source = path.read_bytes()
    key = CACHE.key(source, module)
    cached = CACHE.get(key)
    if cached is not None:
        return cached
    tree = ast.parse(source.decode("utf-8"))
    imports = frozenset(imported_modules(tree, module, path.name == "__init__.py"))
    digest = meaning_digest(without_text(tree) if module in PROSE else tree)
    CACHE.put(key, imports, digest)
    return imports, digest


# Modules of prose for the docs only (dicts of one-line texts, no code: tests/unit/test_digest.py holds them to
# that): their words are left out of the digests, as docstrings are; an edit of a column's meaning reruns nothing.
PROSE = frozenset({"causalpos.catalogue.columns"})


def without_text(tree: ast.AST) -> ast.AST:
    """`tree` with every string constant emptied (in place)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return tree


def without_docstrings(tree: ast.AST) -> ast.AST:
    """`tree` with the docstring of the module and of every class and function left out (in place)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:]
    return tree


def meaning_digest(tree: ast.AST) -> str:
    """SHA-256 of a syntax tree without docstrings, positions left out: the same for any comment or layout."""
    text = ast.dump(without_docstrings(tree), annotate_fields=False, include_attributes=False)
    return hashlib.sha256(text.encode()).hexdigest()


def import_closure(roots, root: Path = ROOT) -> list[str]:
    """Every causalpos module reachable from the modules `roots` through imports, packages included."""
    seen, looked_at, todo = set(), set(), [m for r in roots for m in _with_parents(r)]
    while todo:
        module = todo.pop()
        if module in looked_at:
            continue
        looked_at.add(module)
        path = module_file(module, root)
        if path is None:  # an attribute (`from pkg import name`), not a module
            continue
        seen.add(module)
        imports, _ = _parsed(path, path.stat().st_mtime_ns, module)
        for name in imports:
            todo.extend(_with_parents(name))
    return sorted(seen)


def job_module(rule: str) -> str:
    """The module a rule's jobs run: causalpos.jobs.<rule>."""
    return f"{JOBS}.{rule}"


def code_digest(rule: str, root: Path = ROOT) -> str:
    """The digest of the meaning of the code rule `rule`'s jobs run: its job module and its import closure."""
    module = job_module(rule)
    if module_file(module, root) is None:
        raise ValueError(f"rule {rule}: no job module {module} (src/causalpos/jobs/{rule}.py)")
    digest = hashlib.sha256()
    for name in import_closure([module], root):
        path = module_file(name, root)
        digest.update(f"\0{name}\0{_parsed(path, path.stat().st_mtime_ns, name)[1]}".encode())
    return digest.hexdigest()[:16]
