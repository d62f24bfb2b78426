"""Rule claims: the claims ledger from the other rules' Parquet results (analysis.claims): a table, its Markdown and
its figure's pages.

The inputs may hold "convergence" (results/summary/convergence.parquet): a claim whose verdict changes with the
number of sequences says so in its note. params.claim: only that claim's rows (8 for paper_llms's ledger, whose
tables are the pretrained models' alone; 11 for length_seeds's, every training seed; 12 for mask_controls's, whose
inputs control_scores and control_groups hold each condition's files, conditions in params.conditions order). The
pages
(catalogue.claims.ledger_pages(claim), in every format of options["formats"]) go into the output folder; pages of an
earlier run that this one did not write are removed (Snakemake empties the folder first, a job run by hand does
not)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from causalpos import __version__
from causalpos.analysis.claims.convergence import note_flips
from causalpos.analysis.claims.ledger import build_ledger, ledger_markdown
from causalpos.catalogue.claims import ledger_pages
from causalpos.catalogue.figures import CLAIMS_FIGURE, CLAIMS_PAGE, claims_pages, figure_title
from causalpos.figures.ledger import plot_ledger
from causalpos.figures.style import save_figure
from causalpos.io import PartTable, atomic_path, read_tables, write_parquet

log = logging.getLogger("causalpos")
PART_TABLES = ("scores", "groups")  # read a part at a time (io.PartTable): their memory would grow with depth


def control_inputs(scores: list, groups: list, conditions: list) -> dict | None:
    """Claim 12's tables: condition -> (scores, groups) as PartTables, the files of each condition (one per
    pretrained model) in `conditions` order; None without them."""
    if not scores:
        return None
    if len(scores) != len(groups) or not conditions or len(scores) % len(conditions):
        raise ValueError(f"claims: {len(scores)} scores and {len(groups)} groups files for conditions {conditions}")
    per = len(scores) // len(conditions)
    return {
        condition: (
            PartTable(scores[i * per : (i + 1) * per], "scores"),
            PartTable(groups[i * per : (i + 1) * per], "groups"),
        )
        for i, condition in enumerate(conditions)
    }


def run(job) -> None:
    p = job.params
    settings, options, claim = p.settings, p.options, p.claim
    start = time.perf_counter()
    inputs = {name: list(paths) for name, paths in job.input.items()}
    controls = control_inputs(
        inputs.pop("control_scores", []), inputs.pop("control_groups", []), getattr(p, "conditions", None)
    )
    tables = {
        name: (PartTable(paths, name) if name in PART_TABLES else read_tables(paths)) if paths else None
        for name, paths in inputs.items()
    }
    ledger = build_ledger(
        tables.get("simulations"),
        tables.get("theory"),
        tables.get("scores"),
        tables.get("intermediates"),
        tables.get("groups"),
        thresholds=settings.get("thresholds") or None,
        n_bootstrap=settings["n_bootstrap"],
        seed=settings["seed"],
        simulation_groups=tables.get("simulation_groups"),
        recursion=tables.get("recursion"),
        window_test=tables.get("window_test"),
        pattern_ablation=tables.get("pattern_ablation"),
        controls=controls,
    )
    if claim is not None:
        ledger = ledger[ledger["claim"] == claim].reset_index(drop=True)
    ledger = note_flips(ledger, tables.get("convergence"))
    write_parquet(ledger, job.output.table, {"stage": "claims", "settings": settings, "version": __version__})
    with atomic_path(job.output.markdown) as tmp:
        tmp.write_text(ledger_markdown(ledger, options.get("model_labels")))
    folder = Path(job.output.figures)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for page, files in claims_pages(folder, ledger_pages(claim), options.get("formats") or ["pdf", "png"]).items():
        save_figure(
            lambda page=page: plot_ledger(ledger, page, options),
            options,
            files,
            label=f"{CLAIMS_FIGURE} page {page}",
            title=f"{figure_title(CLAIMS_FIGURE)}, claims {page}",
        )
        written += [Path(f) for f in files]
    for stale in set(folder.glob(CLAIMS_PAGE.format(claims="*", ext="*"))) - set(written):
        stale.unlink()
    counts = ledger["verdict"].value_counts().to_dict()
    log.info(
        "claims: %d rows (%s) in %.1f s -> %s, %s, %d page files in %s",
        len(ledger),
        counts,
        time.perf_counter() - start,
        job.output.table,
        job.output.markdown,
        len(written),
        folder,
    )
