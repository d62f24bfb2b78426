"""The code a stage runs, found from its imports, and a digest of it that reruns the stage when it changes.

Each rule passes `code_digest(stage)` as a param: Snakemake reruns a job whose params changed, so an
edit of any module the stage runs reruns it, and an edit elsewhere does not. The modules are not
listed by hand: they are the import closure of the stage's runner function in workflow.stages (the
`causalpos` imports in its body and at the top of that module), followed through every `causalpos`
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
STAGES_MODULE = f"{PACKAGE}.workflow.stages"
# rule (stage) -> its runner function in workflow.stages
STAGE_RUNNERS = {"sample": "run_sample", "tokenizer": "run_tokenizer", "theory": "run_theory",
                 "simulate": "run_simulation", "plot": "run_figure", "train": "run_train",
                 "length_eval": "run_length_eval", "pretrained": "run_pretrained", "extract": "run_extract",
                 "summary": "run_summary", "runtimes": "run_runtimes",
                 "config_record": "run_config_record", "claims": "run_claims", "emergence": "run_emergence",
                 "emergence_summary": "run_emergence_summary", "length_seeds": "run_length_seeds",
                 "convergence": "run_convergence"}


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


def _imported(node: ast.AST, module: str, is_package: bool) -> set[str]:
    """causalpos modules imported anywhere under `node` (absolute or relative imports)."""
    found = set()
    for item in ast.walk(node):
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


def _parsed(path: Path) -> tuple[str, ast.Module]:
    return _parse(path, path.stat().st_mtime_ns)


@lru_cache(maxsize=None)
def _parse(path: Path, mtime_ns: int) -> tuple[str, ast.Module]:  # parsed once per version of a file
    text = path.read_text(encoding="utf-8")
    return text, ast.parse(text)


def import_closure(roots, root: Path = ROOT) -> list[str]:
    """Every causalpos module reachable from the modules `roots` through imports, packages included."""
    seen, todo = set(), [m for r in roots for m in _with_parents(r)]
    while todo:
        module = todo.pop()
        path = module_file(module, root)
        if module in seen or path is None:
            continue
        seen.add(module)
        _, tree = _parsed(path)
        for name in _imported(tree, module, path.name == "__init__.py"):
            todo.extend(_with_parents(name))
    return sorted(seen)


def runner_source(stage: str, root: Path = ROOT) -> tuple[str, list[str]]:
    """The runner function's source and the causalpos modules it imports (its body and stages' top level)."""
    if stage not in STAGE_RUNNERS:
        raise ValueError(f"unknown stage {stage!r}; known: {sorted(STAGE_RUNNERS)}")
    path = module_file(STAGES_MODULE, root)
    text, tree = _parsed(path)
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == STAGE_RUNNERS[stage])
    top_level = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    imports = set(_imported(function, STAGES_MODULE, False))
    for node in top_level:
        imports |= _imported(node, STAGES_MODULE, False)
    return ast.get_source_segment(text, function), sorted(imports)


def stage_modules(stage: str, root: Path = ROOT) -> list[str]:
    """The modules whose source decides the stage's output (the runner's import closure)."""
    return import_closure(runner_source(stage, root)[1], root)


def code_digest(stage: str, root: Path = ROOT) -> str:
    """SHA-256 over the runner's source and the source of every module it runs (content, not mtime)."""
    source, _ = runner_source(stage, root)
    digest = hashlib.sha256(source.encode())
    for module in stage_modules(stage, root):
        digest.update(b"\0" + module.encode() + b"\0" + module_file(module, root).read_bytes())
    return digest.hexdigest()[:16]
