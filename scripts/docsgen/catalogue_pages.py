"""The sections made from the catalogues (causalpos.catalogue): each table's columns in docs/results.md, the
figure list of docs/figures.md, the thresholds in docs/configuration.md and in the config schema, where each
claim is measured in docs/claims.md.
"""

from __future__ import annotations

import json

from causalpos.catalogue.claims import CLAIMS
from causalpos.catalogue.figures import FIGURES, MODEL_SETS
from causalpos.catalogue.tables import TABLES
from causalpos.catalogue.thresholds import THRESHOLD_RECORDS
from docsgen import row, section, table

RESULTS_PAGE = "docs/results.md"
SCHEMA_PAGE = "src/causalpos/schemas/config.schema.yaml"
SCHEMA_INDENT = 6  # the thresholds' keys under $defs.thresholds.properties


def code_link(dotted: str) -> str:
    """A function's dotted name in backticks, linked to its module's file (relative to a page under docs/)."""
    module = dotted.rpartition(".")[0]
    return f"[`{dotted}`](../src/{module.replace('.', '/')}.py)"


def columns_section(name: str) -> str:
    """One table's path, what it is, and each column with its meaning."""
    record = TABLES[name]
    lines = [f"`results/{record.path}` (table `{name}`): {record.meaning}.", ""]
    rows = [row([f"`{column}`", record.column_meanings[column]]) for column in record.file_columns]
    return "\n".join(lines + table(["column", "meaning"], rows))


def _register_columns(name: str) -> None:
    section(f"columns-{name}", RESULTS_PAGE)(lambda: columns_section(name))


for _name in TABLES:
    _register_columns(_name)


def reads(figure) -> str:
    """What a figure reads, in words: its tables (and whose), or the table it is drawn beside."""
    names = ", ".join(f"`{t}`" for t in figure.tables)
    if figure.beside:
        return f"{names} (drawn beside it by the rule that writes it)"
    if figure.uses_variants:
        names += f" (the variants of `figures.{figure.id}.variants`)"
    return names + (f": {MODEL_SETS[figure.models]}" if figure.models else "")


@section("figures", "docs/figures.md")
def figure_list() -> str:
    rows = [row([f"`{f.id}`", f.section, reads(f), code_link(f.draw)]) for f in FIGURES.values()]
    return "\n".join(table(["figure", "report section", "reads", "drawn by"], rows))


@section("thresholds", "docs/configuration.md")
def threshold_table() -> str:
    """Each threshold: its default, the values a config may give, the claims that use it and why it is what it
    is (catalogue.thresholds)."""
    users = {key: [c.id for c in CLAIMS.values() if c.threshold == key] for key in THRESHOLD_RECORDS}
    rows = [
        row(
            [
                f"`{t.key}`",
                f"`{t.default!r}`",
                f"`{t.bounds}`: {t.meaning}",
                ", ".join(users[t.key]) or "every verdict",
                t.why,
            ]
        )
        for t in THRESHOLD_RECORDS.values()
    ]
    return "\n".join(table(["key", "if left out", "allowed", "claims", "why"], rows))


@section("thresholds-schema", SCHEMA_PAGE)
def threshold_schema() -> str:
    """The bounds of every threshold as the config schema's properties of $defs.thresholds (no defaults: those
    are the catalogue's, filled in by the claims stage)."""
    lines = []
    for t in THRESHOLD_RECORDS.values():
        bounds = ", ".join(f"{key}: {value}" for key, value in t.schema().items())
        head = " " * SCHEMA_INDENT + f"{t.key}: {{{bounds},"
        lines += [
            head,
            " " * (SCHEMA_INDENT + len(t.key) + 3) + f"description: {json.dumps(t.meaning, ensure_ascii=False)}}}",
        ]
    return "\n".join(lines)


@section("claims-code", "docs/claims.md")
def claims_code() -> str:
    """Each claim's threshold and the builder that measures it (catalogue.claims.CLAIMS)."""
    rows = [row([c.id, c.title, f"{c.direction} `{c.threshold}`", code_link(c.measured_by)]) for c in CLAIMS.values()]
    return "\n".join(table(["claim", "title", "threshold", "measured by"], rows))


@section("preregistered", "docs/claims.md")
def preregistered_claims() -> str:
    """The claims registered before their numbers (catalogue.preregistered): what each states, measures, must pass,
    what we expect, its Holm family, its rows and what its uncertainty covers."""
    from causalpos.catalogue.preregistered import REGISTRATIONS, REPLACES

    lines = []
    for r in REGISTRATIONS.values():
        c, t = r.claim, r.threshold
        lines += [
            f"**{c.id}: {c.title}.** {c.statement}.",
            "",
            f"- metric: {c.metric} ({c.unit}); rows: {r.rows}",
            f"- passes when the metric is {c.direction} `{t.key}` = {t.default!r} ({t.why})",
            f"- expected: {r.expected}",
            f"- Holm family: {r.family}; uncertainty: {r.uncertainty}",
        ]
        if c.id in REPLACES:
            lines.append(f"- replaces today's {c.id} when it lands: {REPLACES[c.id]}")
        lines.append("")
    return "\n".join(lines).rstrip()
