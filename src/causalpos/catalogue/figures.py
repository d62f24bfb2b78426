"""Every figure id, with its report section and the tables it is drawn from; the file names of figL1_claims's pages;
the trained models' names in figures.

The one list of figures: the config check, the rules, the CLI and figures.render all read it.
Plain data (no plotting import), so the workflow can read it while Snakemake builds the DAG.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_LAYERS_FIGURE = "fig_all_layers"  # Figures 11-16: drawn for every extracted model by rule model_figure
CLAIMS_FIGURE = "figL1_claims"  # drawn by rule claims, beside the ledger: a folder of pages (catalogue.PAGES)
ALL_LAYERS_PAGE = "{kind}_layers{layers}.{ext}"  # a page of ALL_LAYERS_FIGURE in its model's folder
CLAIMS_PAGE = "claims{claims}.{ext}"  # a page of CLAIMS_FIGURE in its folder, claims a key of catalogue.PAGES
LENGTH_SEEDS_FIGURE = "figT3_length_seeds"  # drawn by rule length_seeds_table (target length_seeds), beside its table
# drawn by rule pattern_ablation_summary beside results/summary/pattern_ablation.parquet (and by
# pattern_ablation_seeds under results/seeds for every seed)
ABLATION_FIGURE = "figT4_pattern_ablation"
CONVERGENCE_FIGURE = "figL2_convergence"  # drawn by rule convergence, beside results/summary/convergence.parquet
TRAINED_LABELS = {"nope": "NoPE", "rope": "RoPE"}  # the pretrained models' names: workflow.config.model_labels


@dataclass(frozen=True)
class FigureSpec:
    """section: the report's category; tables: what it reads, from
    "simulation" (the variants listed under figures.<id>.variants), "theory", "recursion" (the large-d recursion
    of every variant, results/theory/recursion.parquet), "metrics", "blocks",
    "length_eval" (the trained models), "emergence" (results/summary/emergence.parquet), "heads" (every
    extracted model's heads, results/summary/heads.parquet) and the extraction
    tables "scores", "intermediates", "probe";
    models: whose extraction tables ("model": options["model"], "trained": nope and rope,
    "pretrained": every pretrained model, "all": every extracted model, "one": one per rule job).
    The report's captions (what a figure shows and what to look for) are in report/: figure.rst for
    the figures of rule figure, all_layers.rst, claims.rst, convergence.rst, length_seeds.rst and
    pattern_ablation.rst for the others."""

    section: str
    tables: tuple[str, ...] = ()
    models: str | None = None

    @property
    def uses_variants(self) -> bool:
        return "simulation" in self.tables


FIGURES = {
    "fig01_mechanism": FigureSpec("Simulation", ("theory",)),
    "fig02_l2norm": FigureSpec("Simulation", ("simulation",)),
    "fig04_rope": FigureSpec("Simulation", ("simulation",)),
    "fig06_alpha": FigureSpec("Simulation", ("simulation",)),
    "fig07_layernorm": FigureSpec("Simulation", ("simulation",)),
    "fig09_rope_alpha": FigureSpec("Simulation", ("simulation",)),
    "fig10_rope_nomask": FigureSpec("Simulation", ("simulation",)),
    "figS1_mc_vs_closed_form": FigureSpec("Simulation", ("simulation", "theory")),
    "figR1_recursion": FigureSpec("Simulation", ("simulation", "recursion")),
    "figT1_training_loss": FigureSpec("Trained models", ("metrics", "blocks")),
    "figT2_length_generalization": FigureSpec("Trained models", ("length_eval",)),
    "figE1_emergence": FigureSpec("Trained models", ("emergence",)),
    "fig03_intermediates": FigureSpec("Trained models", ("intermediates",), "model"),
    "fig08_model_layers": FigureSpec("Trained models", ("scores",), "model"),
    "figC1_nope_vs_rope": FigureSpec("Trained models", ("scores",), "trained"),
    "fig05_llms": FigureSpec("Pretrained LLMs", ("scores",), "pretrained"),
    "figM1_nonrelativeness": FigureSpec("Measurements", ("scores",), "all"),
    "figM2_increasing_fraction": FigureSpec("Measurements", ("scores",), "all"),
    "figM3_position_probe": FigureSpec("Measurements", ("probe",), "all"),
    "figH1_heads": FigureSpec("Measurements", ("heads",)),  # every model of results/summary/heads.parquet
    ALL_LAYERS_FIGURE: FigureSpec("All layers", ("scores",), "one"),  # Figures 11-16
    CLAIMS_FIGURE: FigureSpec("Claims"),
    CONVERGENCE_FIGURE: FigureSpec("Claims"),
    LENGTH_SEEDS_FIGURE: FigureSpec("Trained models"),
    ABLATION_FIGURE: FigureSpec("Trained models"),
}
# Figures a config lists under `figures:` (the other five are drawn by rules model_figure, claims, convergence,
# length_seeds_table, pattern_ablation_summary)
CONFIGURABLE = tuple(f for f in FIGURES
                     if f not in (ALL_LAYERS_FIGURE, CLAIMS_FIGURE, CONVERGENCE_FIGURE, LENGTH_SEEDS_FIGURE,
                                  ABLATION_FIGURE))


def all_layers_page(folder, kind: str, first: int, last: int, ext: str) -> str:
    """One page of ALL_LAYERS_FIGURE, e.g. <folder>/raw_layers01-08.png (layers 1-based, as in its titles);
    workflow.paths.all_layers_dir is the folder of a model's pages."""
    return f"{folder}/" + ALL_LAYERS_PAGE.format(kind=kind, layers=f"{first:02d}-{last:02d}", ext=ext)


def claims_page(folder, page: str, ext: str) -> str:
    """One page of CLAIMS_FIGURE, e.g. <folder>/claims2-3.png for page "2-3" (catalogue.claims.PAGES);
    workflow.paths.claims_dir is the folder of a results folder's pages."""
    return f"{folder}/" + CLAIMS_PAGE.format(claims=page, ext=ext)


def claims_pages(folder, pages, formats) -> dict[str, list[str]]:
    """Each page of CLAIMS_FIGURE in `pages` (catalogue.ledger_pages) with its file in every format."""
    return {page: [claims_page(folder, page, fmt) for fmt in formats] for page in pages}


def figure_spec(figure: str) -> FigureSpec:
    if figure not in FIGURES:
        raise ValueError(f"unknown figure {figure!r}; known: {sorted(FIGURES)}")
    return FIGURES[figure]
