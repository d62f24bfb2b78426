"""The sections of docs/workflow.md made from Snakemake's own reading of the rules (causalpos.workflow.introspect):
the rule graph of the targets all, length_seeds, paper_llms, mask_controls and window_control, and the table of rules (what each writes, the
module its jobs run, what it asks for), for the default config.
"""

from __future__ import annotations

import importlib
import re
from functools import lru_cache

import yaml

from causalpos.workflow.digest import job_module
from causalpos.workflow.introspect import ROOT, loaded_workflow, rule_edges
from docsgen import row, section, table

PAGE = "docs/workflow.md"
TARGETS = (
    "all",
    "length_seeds",
    "paper_llms",
    "mask_controls",
    "window_control",
)  # the targets users run (all_figures is all)


@lru_cache(maxsize=1)
def workflow_facts() -> tuple[list[tuple[str, list[str], bool]], set[tuple[str, str]]]:
    """[(rule, its outputs as written, whether it is a target)], in the Snakefile's order, and the rule graph."""
    with loaded_workflow([ROOT / "config.yaml"], targets=TARGETS) as workflow:
        rules = [
            (rule.name, [without_constraints(str(output)) for output in rule.output], not rule.output)
            for rule in workflow.rules
        ]
        return rules, rule_edges(workflow)


def without_constraints(pattern: str) -> str:
    """An output pattern as a reader writes it: {model}, not the {model,<regex>} Snakemake keeps."""
    return re.sub(r"\{(\w+),[^{}]*\}", r"{\1}", pattern)


@section("rule-graph", PAGE)
def rule_graph() -> str:
    """The rule graph as a Mermaid flowchart: an arrow from a rule to each rule that reads its output."""
    _, edges = workflow_facts()
    lines = ["```mermaid", "flowchart LR"]
    lines += [f"    {upstream} --> {rule}" for upstream, rule in sorted(edges)]
    return "\n".join(lines + ["```"])


def summary_line(rule: str) -> str:
    """The first sentence of the rule's job module's docstring, less its "Rule <name>: " opening."""
    doc = (importlib.import_module(job_module(rule)).__doc__ or "").strip()
    first = " ".join(doc.split("\n\n")[0].split())
    return first.split(": ", 1)[1] if first.startswith(f"Rule {rule}:") else first


def asks(rule: str, resources: dict) -> str:
    """What a rule's jobs ask for, from rules/resources.yaml."""
    entry = {**resources["default"], **resources.get(rule, {})}
    parts = [
        f"threads `{entry['threads']}`" if "threads" in entry else "",
        f"GPU unless `{entry['gpu']}: cpu`" if "gpu" in entry else "",
        f"{entry['mem_mb']} MB, {entry['runtime']} min",
    ]
    return "; ".join(part for part in parts if part)


@section("rules", PAGE)
def rule_table() -> str:
    """Every rule, in the Snakefile's order: what it writes (its output patterns), what its jobs run and ask for."""
    rules, _ = workflow_facts()
    resources = yaml.safe_load((ROOT / "rules" / "resources.yaml").read_text())
    rows = []
    for name, outputs, is_target in rules:
        if is_target:
            continue
        module = job_module(name)
        written = "<br>".join(f"`{output}`" for output in outputs)
        link = f"[`{module}`](../src/{module.replace('.', '/')}.py)"
        rows.append(row([f"`{name}`", summary_line(name), written, link, asks(name, resources)]))
    return "\n".join(table(["rule", "what it makes", "outputs (default config)", "code", "asks for"], rows))
