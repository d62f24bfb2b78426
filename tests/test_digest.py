"""The code digest of each stage: its module set is the real import closure, and an edit reruns exactly its users."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys

import pytest

from causalpos.workflow.dag import STAGE_LIST
from causalpos.workflow.digest import code_digest, module_file, runner_modules, runner_source
from helpers import ROOT


# In a fresh interpreter, every causalpos import that runs while the modules of the stages below are imported,
# as importer -> imported module (what `import a.b`, `from a import b` and relative imports name, and the
# packages above them): which modules importing a stage's roots loads is what these edges reach from them.
IMPORT_GRAPH = """
import builtins, importlib, importlib.util, json, sys
edges, real = set(), builtins.__import__

def module_names(name, globals, fromlist, level):
    target = importlib.util.resolve_name("." * level + name, (globals or {}).get("__package__")) if level else name
    names = {target} | {f"{target}.{item}" for item in fromlist or () if f"{target}.{item}" in sys.modules}
    parts = [n.split(".") for n in names]
    return {".".join(p[:i]) for p in parts for i in range(1, len(p) + 1)}

def recording(name, globals=None, locals=None, fromlist=(), level=0):
    module = real(name, globals, locals, fromlist, level)
    importer = (globals or {}).get("__name__", "")
    if importer.split(".")[0] == "causalpos":
        edges.update((importer, target) for target in module_names(name, globals, fromlist, level)
                     if target.split(".")[0] == "causalpos" and target in sys.modules)
    return module

builtins.__import__ = recording
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        pass  # `from pkg import name` where name is not a module
print(json.dumps(sorted(edges)))
"""
RUNNERS = ["run_simulation", "run_extract", "run_train", "run_figure", "run_claims"]
EVERY_RUNNER = sorted({stage.runner for stage in STAGE_LIST})


@pytest.fixture(scope="module")
def import_edges() -> dict[str, set[str]]:
    roots = sorted({name for stage in RUNNERS for name in runner_source(stage)[1]})
    proc = subprocess.run([sys.executable, "-c", IMPORT_GRAPH, json.dumps(roots)], capture_output=True, text=True,
                          timeout=300, check=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    edges = {}
    for importer, imported in json.loads(proc.stdout):
        edges.setdefault(importer, set()).add(imported)
    return edges


@pytest.mark.parametrize("stage", RUNNERS)
def test_modules_loaded_by_the_runner_are_in_its_closure(stage, import_edges):
    """What importing the runner's imports loads (their packages, and what runs while they import) is in the set."""
    _, imports = runner_source(stage)
    loaded, todo = set(), [".".join(n.split(".")[:i]) for n in imports for i in range(1, n.count(".") + 2)]
    while todo:
        module = todo.pop()
        if module not in loaded and module_file(module) is not None:
            loaded.add(module)
            todo.extend(import_edges.get(module, ()))
    assert loaded - set(runner_modules(stage)) == set()


def test_closure_follows_lazy_imports_and_packages():
    modules = runner_modules("run_extract")
    assert {"causalpos.models.extract", "causalpos.models.pretrained", "causalpos.corpus.tokens",
            "causalpos.models", "causalpos"} <= set(modules)  # run_extract imports these inside its body
    assert "causalpos.simulation.engine" not in modules
    assert "causalpos.figures.ledger" in runner_modules("run_claims")  # the ledger draws its figure


@pytest.fixture
def source_copy(tmp_path):
    shutil.copytree(ROOT / "src" / "causalpos", tmp_path / "causalpos",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "causalpos"


def edit(root, relative: str) -> None:
    path = root / relative
    path.write_text(path.read_text() + "\n# an edit\n")


@pytest.mark.parametrize("relative, changed", [
    # the pattern ablation reads the held-out blocks as training does
    ("models/train.py", {"run_train", "run_length_eval", "run_emergence", "run_pattern_ablation",
                         "run_pattern_ablation_pretrained"}),
    ("models/extract.py", {"run_extract", "run_emergence"}),
    ("models/snapshots.py", {"run_train", "run_length_eval", "run_emergence", "run_pattern_ablation",
                             "run_pattern_ablation_pretrained"}),
    ("models/intervention.py", {"run_pattern_ablation", "run_pattern_ablation_pretrained"}),
    # what is subtracted, and the table's columns: its stages, and claim 11 in the ledger (convergence builds it)
    ("pattern_ablation.py", {"run_pattern_ablation", "run_pattern_ablation_pretrained", "run_pattern_ablation_summary",
                             "run_claims", "run_convergence"}),
    ("models/emergence.py", {"run_emergence"}),
    ("simulation/engine.py", {"run_simulation"}),
    ("simulation/recursion.py", {"run_recursion", "run_window_test"}),  # the window test runs it on LLM stacks
    ("analysis/windows.py", {"run_window_test"}),
    ("simulation/theory.py", {"run_theory", "run_figure", "run_all_layers"}),
    ("analysis/triangles.py", {"run_summary", "run_figure", "run_all_layers", "run_claims", "run_emergence_summary", "run_convergence",
                                "run_window_test", "run_heads"}),
    ("analysis/heads.py", {"run_heads", "run_figure", "run_all_layers"}),  # figures.render draws figH1_heads
    ("analysis/emergence.py", {"run_emergence_summary"}),
    ("analysis/lengths.py", {"run_length_seeds", "run_claims", "run_convergence"}),  # claim 11's t
    ("analysis/multiplicity.py", {"run_length_seeds", "run_claims", "run_convergence", "run_emergence_summary"}),
    ("analysis/claims/convergence.py", {"run_claims", "run_convergence"}),
    ("figures/style.py", {"run_figure", "run_all_layers", "run_claims", "run_length_seeds", "run_convergence",
                          "run_pattern_ablation_summary"}),
])
def test_an_edit_changes_the_digest_of_the_stages_that_run_it_only(source_copy, relative, changed):
    before = {stage: code_digest(stage, source_copy) for stage in EVERY_RUNNER}
    assert before == {stage: code_digest(stage) for stage in EVERY_RUNNER}  # the copy digests like the original
    edit(source_copy, relative)
    after = {stage: code_digest(stage, source_copy) for stage in EVERY_RUNNER}
    assert {stage for stage in EVERY_RUNNER if before[stage] != after[stage]} == changed


def test_editing_one_runner_changes_only_its_stage(source_copy):
    before = {stage: code_digest(stage, source_copy) for stage in EVERY_RUNNER}
    path = source_copy / "workflow" / "runners.py"
    text = path.read_text()
    path.write_text(text.replace('log.info("theory:', 'log.info("closed forms:'))
    after = {stage: code_digest(stage, source_copy) for stage in EVERY_RUNNER}
    assert {stage for stage in EVERY_RUNNER if before[stage] != after[stage]} == {"run_theory"}


def test_closure_of_every_module_is_what_a_full_walk_of_its_syntax_tree_finds():
    """digest visits only statements (an import is one); a walk of every node of every tree finds the same."""
    from causalpos.workflow.digest import import_closure, module_file

    package = ROOT / "src" / "causalpos"

    def name(path):
        parts = path.relative_to(package.parent).with_suffix("").parts
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

    modules = [name(path) for path in sorted(package.rglob("*.py"))]
    assert len(modules) > 40
    for module in modules:
        assert import_closure([module]) == closure(module), module
