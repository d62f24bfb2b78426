"""The code a stage runs, found from its imports, and a digest of it that reruns the stage when it changes.

Each rule passes `code_digest(runner)` of its stage's runner (workflow.dag) as a param: Snakemake reruns a
job whose params changed, so an edit of any module the stage runs reruns it, and an edit elsewhere does not.
The modules are not listed by hand: they are the import closure of the runner function in workflow.runners
(the `causalpos` imports in its body and at the top of that module), followed through every `causalpos`
import of every module reached, lazy imports inside functions included, with the packages' __init__
files. The files are read and parsed, never imported, so this is cheap while Snakemake builds the DAG.
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path

PACKAGE = "causalpos"
ROOT = Path(__file__).resolve().parents[1]  # src/causalpos
RUNNERS_MODULE = f"{PACKAGE}.workflow.runners"  # one function per stage (workflow.dag names it)


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


def _imported(node: ast.AST, module: str, is_package: bool) -> set[str]:
    """causalpos modules imported anywhere under `node` (absolute or relative imports)."""
    found = set()
    for item in _statements(node):
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


@lru_cache(maxsize=None)
def _module_imports(path: Path, mtime_ns: int, module: str) -> frozenset[str]:
    """A module's causalpos imports, walked once per version of its file: Snakemake asks for the closures of
    some 35 params while it parses the rules, and walking every tree each time doubled its start-up."""
    _, tree = _parse(path, mtime_ns)
    return frozenset(_imported(tree, module, path.name == "__init__.py"))


@lru_cache(maxsize=None)
def _parse(path: Path, mtime_ns: int) -> tuple[str, ast.Module]:  # parsed once per version of a file
    text = path.read_text(encoding="utf-8")
    return text, ast.parse(text)


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
        for name in _module_imports(path, path.stat().st_mtime_ns, module):
            todo.extend(_with_parents(name))
    return sorted(seen)


def runner_source(runner: str, root: Path = ROOT) -> tuple[str, list[str]]:
    """The runner function's source and the causalpos modules it imports (its body and runners' top level)."""
    path = module_file(RUNNERS_MODULE, root)
    runners = _runners(path, path.stat().st_mtime_ns)
    if runner not in runners:
        raise ValueError(f"unknown runner {runner!r}; known: {sorted(runners)}")
    return runners[runner]


@lru_cache(maxsize=None)
def _runners(path: Path, mtime_ns: int) -> dict[str, tuple[str, list[str]]]:
    """Every top-level function of workflow.runners -> its source and imports, from one parse of the file."""
    text, tree = _parse(path, mtime_ns)
    top_level = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            top_level |= _imported(node, RUNNERS_MODULE, False)
    return {node.name: (ast.get_source_segment(text, node), sorted(top_level | _imported(node, RUNNERS_MODULE, False)))
            for node in tree.body if isinstance(node, ast.FunctionDef)}


def runner_modules(runner: str, root: Path = ROOT) -> list[str]:
    """The modules whose source decides the runner's output (its import closure)."""
    return import_closure(runner_source(runner, root)[1], root)


def code_digest(runner: str, root: Path = ROOT) -> str:
    """SHA-256 over the runner's source and the source of every module it runs (content, not mtime)."""
    source, _ = runner_source(runner, root)
    digest = hashlib.sha256(source.encode())
    for module in runner_modules(runner, root):
        digest.update(b"\0" + module.encode() + b"\0" + module_file(module, root).read_bytes())
    return digest.hexdigest()[:16]
