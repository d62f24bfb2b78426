"""Every figure as one record: its id, its report section, the tables it is drawn from, how it is drawn, and its
caption; the file names of the pages of figL1_claims and fig_all_layers.

The one list of figures: the config check, the rules, the CLI, the docs (scripts/generate-docs.py) and
figures.render read it. Plain data (no plotting import), so the workflow can read it while Snakemake builds the DAG:
a figure's drawing function is named by its dotted path, which figures.render imports.

Captions are reST (Jinja-templated where they depend on the job: fig_all_layers's pages); the report's caption
files under report/ are written from them by scripts/generate-docs.py (Snakemake renders a caption file with the
job's wildcards, params and config, so a file can choose among the captions but cannot read this module).
"""

from __future__ import annotations

import re

from dataclasses import dataclass

from causalpos.catalogue import paths
from causalpos.catalogue.models import TRAINED, TRAINED_LABELS  # noqa: F401  (TRAINED_LABELS: its old place)
from causalpos.catalogue.tables import table

ALL_LAYERS_FIGURE = "fig_all_layers"  # Figures 11-16: drawn for every extracted model by rule model_figure
CLAIMS_FIGURE = "figL1_claims"  # drawn by rule claims, beside the ledger: a folder of pages (catalogue.claims.PAGES)
ALL_LAYERS_PAGE = "{kind}_layers{layers}.{ext}"  # a page of ALL_LAYERS_FIGURE in its model's folder
CLAIMS_PAGE = "claims{claims}.{ext}"  # a page of CLAIMS_FIGURE in its folder, claims a key of catalogue.claims.PAGES
LENGTH_SEEDS_FIGURE = "figT3_length_seeds"  # drawn by rule length_seeds_table (target length_seeds), beside its table
# drawn by rule pattern_ablation_summary beside results/summary/pattern_ablation.parquet (and by
# pattern_ablation_seeds under results/seeds for every seed)
ABLATION_FIGURE = "figT4_pattern_ablation"
CONVERGENCE_FIGURE = "figL2_convergence"  # drawn by rule convergence, beside results/summary/convergence.parquet
# drawn by rule controls_table (target mask_controls), beside results/summary/mask_controls.parquet
MASK_CONTROLS_FIGURE = "figT5_mask_controls"
FIGURE_CAPTIONS = "report/figure.rst"  # the caption file of every figure of rule figure, by its id

MODEL_SETS = {  # FigureSpec.models: whose extraction tables a figure reads
    "model": "one model, the figure's `model` setting (default nope)",
    "trained": "the trained models, nope and rope",
    "pretrained": "every pretrained model (fig05_llms: its `models` setting)",
    "all": "every extracted model",
    "one": "one model per rule job (its {model})",
}


@dataclass(frozen=True)
class FigureSpec:
    """One figure.

    id: its file stem; section: the report's category; tables: the names of the tables it is drawn from
    (catalogue.tables.TABLES; "simulation" the variants listed under figures.<id>.variants); models: the models
    it shows, whose per-model tables ({model} in the path) it reads (MODEL_SETS; None: a per-model table is read
    for the trained models, as metrics and length_eval; a summary table holds every model of its folder);
    figure_inputs lists the files; draw: the dotted name of the function that
    draws it, `f(tables, options) -> Figure` (for a figure drawn `beside` its table the writing rule's own call);
    beside: drawn by the rule that writes its one table, from the frame it wrote (its `tables` are then no input
    file of a figure job); caption: its report caption (reST); caption_file: the report file that shows it."""

    id: str
    section: str
    tables: tuple[str, ...] = ()
    models: str | None = None
    beside: bool = False
    draw: str = ""
    caption: str = ""
    caption_file: str = FIGURE_CAPTIONS

    @property
    def uses_variants(self) -> bool:
        return "simulation" in self.tables


FIGURES = {
    figure.id: figure
    for figure in (
        FigureSpec(
            "fig01_mechanism",
            "Simulation",
            ("theory",),
            draw="causalpos.figures.simulation.fig_mechanism",
            caption="**Figure 1**: the mechanism on three tokens, from the closed form (alpha = 0; "
            "positions 0-based as in every figure): (a) layer-1 scores (1 on the diagonal, alpha "
            "elsewhere), (b) the layer-1 output x^(1)_i as weights of the inputs x_j (attention "
            "weights plus the residual), (c) the same after l2 normalisation, y^(2)_i, and (d) "
            "the layer-2 scores <y^(2)_i, y^(2)_j> = g(i)/(h(i)h(j)) (Eq. 4), as the paper's "
            "panels (a)-(d). **Look for**: the causal mask alone makes later positions mix more "
            "inputs, so their own weight in (c) falls and the layer-2 score in (d) grows with the "
            "key position j, for every query, with no positional encoding.",
        ),
        FigureSpec(
            "fig02_l2norm",
            "Simulation",
            ("simulation",),
            draw="causalpos.figures.simulation.fig_layer_grid",
            caption="**Figure 2**: attention scores of the parameter-free l2-normalised causal model, "
            "layers 1-4, alpha = 0 and 0.2 (Monte Carlo), on the paper's fixed colour scale 0-1 "
            "(the diagonal is 1). **Look for**: from layer 2 on, the rows rise toward the keys "
            "near the query (a non-relative pattern; at layers 3-4, alpha = 0, not every row: claim 2c "
            "finds some falling before the diagonal); at alpha = 0 it is the paper's 'faint "
            "pattern' at layer 2 (dark on this scale: off-diagonal scores between 0.02 and 0.15) "
            "and clearer at layers 3-4; with alpha > 0 it saturates and barely depends on the "
            "query.",
        ),
        FigureSpec(
            "fig04_rope",
            "Simulation",
            ("simulation",),
            draw="causalpos.figures.simulation.fig_rope",
            caption="**Figure 4**: RoPE with the causal mask, alpha = 0: raw scores on the paper's fixed "
            "scale 0-1, and scores minus the mean of their diagonal, each panel on its own range. "
            "**Look for**: layer 1 is relative (its normalised panel is noise); from layer 2 on "
            "the normalised panels show the non-relative pattern: the left region (the first keys) "
            "brighter than its diagonals at layer 2 and darker at layer 4 (claim 6b): the mask "
            "distorts RoPE's relative scores.",
        ),
        FigureSpec(
            "fig06_alpha",
            "Simulation",
            ("simulation",),
            draw="causalpos.figures.simulation.fig_layer_grid",
            caption="**Figure 6**: the l2 model with larger alpha (0.4, 0.6, 0.8), on the paper's fixed "
            "colour scale 0-1. **Look for**: the stronger the correlation of the inputs, the "
            "faster the pattern appears and saturates over the layers: at alpha = 0.8 every score "
            "is near 1 by layer 3.",
        ),
        FigureSpec(
            "fig07_layernorm",
            "Simulation",
            ("simulation",),
            draw="causalpos.figures.simulation.fig_layer_grid",
            caption="**Figure 7** (Appendix B): LayerNorm with sqrt(d) and d scaling of the scores, on "
            "the paper's fixed colour scales: 0 to sqrt(d) (the diagonal, 8 for d = 64) with "
            "sqrt(d) scaling, 0-1 with d scaling. **Look for**: with sqrt(d) the off-diagonal "
            "pattern is too weak to see on that scale (the paper's choice, kept; "
            "`plot.colour_limits: panel` scales each panel to its own range); with d it is "
            "l2-like: the mechanism does not need l2 normalisation.",
        ),
        FigureSpec(
            "fig09_rope_alpha",
            "Simulation",
            ("simulation",),
            draw="causalpos.figures.simulation.fig_rope",
            caption="**Figure 9**: RoPE with the causal mask, alpha = 0.5: raw scores on the paper's "
            "fixed scale 0-1, normalised scores on their own range. **Look for**: the same "
            "non-relative pattern as Figure 4, sooner.",
        ),
        FigureSpec(
            "fig10_rope_nomask",
            "Simulation",
            ("simulation",),
            draw="causalpos.figures.simulation.fig_rope",
            caption="**Figure 10**: RoPE without the causal mask (an encoder): raw scores on 0-1, "
            "normalised scores on their own range. **Look for**: every diagonal-normalised panel "
            "is noise: without the mask there is no non-relative pattern, so the pattern of "
            "Figures 4 and 9 comes from the mask.",
        ),
        FigureSpec(
            "figS1_mc_vs_closed_form",
            "Simulation",
            ("simulation", "theory"),
            draw="causalpos.figures.simulation.fig_mc_vs_closed_form",
            caption="**Monte Carlo against the closed form** (not in the paper): layer-2 scores of the "
            "last query for d = 16 ... 256 with standard-error bars against Eq. 4, and the "
            "largest gap over all pairs. **Look for**: the gap falls as 1/d: Eq. 4 is exact only "
            "as d grows.",
        ),
        FigureSpec(
            "figR1_recursion",
            "Simulation",
            ("simulation", "recursion"),
            draw="causalpos.figures.simulation.fig_recursion",
            caption="**Monte Carlo against the large-d recursion** (not in the paper): for each variant "
            "of figures.figR1_recursion.variants, every layer's Monte Carlo mean scores, the "
            "scores of the recursion in the limit d -> infinity "
            "(results/theory/recursion.parquet), both on the paper's fixed colour range, and "
            "Monte Carlo minus recursion on a diverging scale centred at 0, one range for all the "
            "variant's layers. **Look for**: the recursion draws the same pattern at every layer; "
            "the difference is a small, mostly negative shift that grows with depth: the O(1/d) "
            "bias of a finite d, which the table's corrected columns remove (RoPE: not computed).",
        ),
        FigureSpec(
            "figT1_training_loss",
            "Trained models",
            ("metrics", "blocks"),
            draw="causalpos.figures.training.fig_training_loss",
            caption="**Training** (not in the paper): training and held-out loss of the NoPE model and "
            "its RoPE twin against the unigram entropy. **Look for**: both learn well below the "
            "unigram entropy, so their attention is worth reading.",
        ),
        FigureSpec(
            "figT2_length_generalization",
            "Trained models",
            ("length_eval",),
            draw="causalpos.figures.training.fig_length_generalization",
            caption="**Length generalisation** (not in the paper): held-out loss at 1x, 2x and 4x the "
            "training length. **Look for**: how much each model's loss rises beyond the length it "
            "was trained on.",
        ),
        FigureSpec(
            "figE1_emergence",
            "Trained models",
            ("emergence",),
            draw="causalpos.figures.emergence.fig_emergence",
            caption="**Emergence over training** (not in the paper): claim 7's metrics at every snapshot, "
            "NoPE (red) and RoPE (blue) in one panel per metric: key-order concordance at Figure "
            "3's (f) and (i), the nearer-key advantage of (i) against the alpha = 0 simulation, "
            "the non-relative amplitude of every layer and the held-out loss (one amplitude panel "
            "per model); dashed: the alpha = 0 simulation. **Look for**: whether the pattern "
            "grows as the model learns, or is absent.",
        ),
        FigureSpec(
            "fig03_intermediates",
            "Trained models",
            ("intermediates",),
            models="model",
            draw="causalpos.figures.activations.fig_intermediates",
            caption="**Figure 3**: Gram matrices of the attention intermediates (a)-(i) of the trained "
            "NoPE model, layer 1 into layer 2, each panel on its own range as in the paper. "
            "**Look for**: whether the layer-1 output's norms and inner products depend on "
            "position as the simulation predicts, and whether (i), the layer-2 scores, rise "
            "toward the nearer keys. Claim 7 of the claims ledger measures each stage; in the "
            "small default model the learned parameters dominate (the paper: the patterns are "
            "'strongly influenced by the learned parameters'): read the ledger's verdicts of (f) "
            "and (i) before the picture.",
        ),
        FigureSpec(
            "fig08_model_layers",
            "Trained models",
            ("scores",),
            models="model",
            draw="causalpos.figures.activations.fig_model_layers",
            caption="**Figure 8**: attention scores of every layer of the trained NoPE model, raw (each "
            "panel on its own range, as in the paper) and then minus their diagonal's mean. "
            "**Look for**: a non-relative pattern in a model with no positional encoding: "
            "position comes from the mask.",
        ),
        FigureSpec(
            "figC1_nope_vs_rope",
            "Trained models",
            ("scores",),
            models="trained",
            draw="causalpos.figures.activations.fig_nope_vs_rope",
            caption="**NoPE against its RoPE twin** (not in the paper): diagonal-normalised scores of "
            "each (one colour scale per layer, shared by the two, so a panel with a smaller range "
            "than its twin looks flat) and their difference in a diverging map centred on 0, one "
            "column per layer; the raw scores are in the all-layers pages. **Look for**: the RoPE "
            "model shows a non-relative pattern too: the mask's positional information adds to "
            "RoPE's.",
        ),
        FigureSpec(
            "fig05_llms",
            "Pretrained LLMs",
            ("scores",),
            models="pretrained",
            draw="causalpos.figures.activations.fig_llms",
            caption="**Figure 5**: diagonal-normalised attention scores of the first layers of the "
            "pretrained RoPE LLMs, averaged over heads and over the sequences and tokens the "
            "title states, each panel's colour scale from its 1% to its 99% quantile as the "
            "paper's caption says (the attention sink of key 0 is off the scale). **Look for**: "
            "the non-relative pattern of the simulations in real RoPE models: scores minus their "
            "diagonal's mean are not constant along the diagonals.",
        ),
        FigureSpec(
            "figM1_nonrelativeness",
            "Measurements",
            ("nonrelativeness",),
            models="all",
            draw="causalpos.figures.measurements.fig_nonrelativeness",
            caption="**Non-relativeness** (not in the paper): per model and layer, the variance of the "
            "diagonal-normalised scores over that of the raw scores (0: relative), its noise "
            "floor, with and without the sink column. **Look for**: values above the noise floor "
            "in the NoPE model and in the RoPE models.",
        ),
        FigureSpec(
            "figM2_increasing_fraction",
            "Measurements",
            ("increasing_fraction",),
            models="all",
            draw="causalpos.figures.measurements.fig_increasing_fraction",
            caption="**Increasing fraction** (not in the paper): the fraction of adjacent keys where the "
            "nearer key scores higher, per model and layer. **Look for**: above 1/2 where the "
            "mask's pattern (scores rising toward the query) dominates.",
        ),
        FigureSpec(
            "figM3_position_probe",
            "Measurements",
            ("position_probe",),
            models="all",
            draw="causalpos.figures.measurements.fig_position_probe",
            caption="**Position probe** (not in the paper): error of a linear probe of the absolute "
            "position per layer, against the baseline of predicting the mean. **Look for**: "
            "errors well below the baseline: the hidden states know their position, also without "
            "positional encoding.",
        ),
        FigureSpec(
            "figH1_heads",
            "Measurements",
            ("heads",),
            draw="causalpos.figures.heads.fig_heads",
            caption="**Every head** (not in the paper; `extraction.per_head`): per model, a heads x "
            "layers grid of each head's non-relative amplitude (keys >= 1, as claim 8a's per "
            "layer, without its bias correction) and of its emphasis on keys 1-4 (claim 8d's, in "
            "score SDs); layers and heads 1-based. **Look for**: whether a layer's pattern is "
            "spread over its heads or carried by a few, and heads whose first keys stand out "
            "(red) where the layer's do.",
        ),
        FigureSpec(
            ALL_LAYERS_FIGURE,
            "All layers",
            ("scores",),
            models="one",
            draw="causalpos.figures.activations.fig_all_layers",
            caption_file="report/all_layers.rst",
            caption="{%- set model = snakemake.wildcards.model -%}\n"
            "{%- set name = snakemake.params.options.model_labels.get(model, model) -%}\n"
            "{%- if model in trained_models -%}\n"
            "**All layers of the trained {{ name }} model** (ours; the paper's Figure 8 shows its "
            "NoPE model's layers):\n"
            "{%- else -%}\n"
            "**Figures 11-16** (Appendix E; the paper's LLMs there, {{ name }} here):\n"
            "{%- endif %} the attention scores of every layer, one page per run of layers (here "
            "layers\n"
            '{{ snakemake.wildcards.layers }}), {% if snakemake.wildcards.kind == "raw" -%}\n'
            "raw scores, averaged over heads and sequences.\n"
            "{%- else -%}\n"
            "scores minus the mean of their diagonal (a relative pattern would be blank).\n"
            "{%- endif %} Each panel has its own colour scale, at the 1% and 99% quantiles of its "
            "values.\n"
            "**Look for**: in the diagonal-normalised pages, structure across each diagonal (keys "
            "near the query\n"
            "higher than far ones, beyond the attention sink at key 0): the mask's non-relative "
            "pattern in every\n"
            "layer, not only the first ones of Figure 5.",
        ),
        FigureSpec(
            CLAIMS_FIGURE,
            "Claims",
            ("claims",),
            beside=True,
            draw="causalpos.figures.ledger.plot_ledger",
            caption_file="report/claims.rst",
            caption="The claims ledger: each claim of the paper as a metric with its uncertainty (Monte "
            "Carlo\n"
            "standard errors for the simulations, a bootstrap over sequences for the trained and\n"
            "pretrained models), its threshold and the verdict the data give. The full table is\n"
            "``results/summary/claims.parquet``; ``results/summary/claims.md`` is its Markdown "
            "copy.\n"
            "The figure has one page per part of the paper (``catalogue.claims.PAGES``); its\n"
            "title and its label ``claims`` say which claims it shows. Each panel is one claim: "
            "each\n"
            "setting's value with ±z standard errors (the verdict's margin; the legend gives z) "
            "against\n"
            "the claim's threshold (dashed line), coloured by verdict.",
        ),
        FigureSpec(
            MASK_CONTROLS_FIGURE,
            "Claims",
            ("mask_controls",),
            beside=True,
            draw="causalpos.figures.mask_controls.plot_mask_controls",
            caption_file="report/mask_controls.rst",
            caption="The pretrained LLMs' pattern under the content controls (issue 43, target "
            "``mask_controls``):\n"
            "each layer's non-relative amplitude (claim 8a's metric) and first keys' emphasis (8d's), on "
            "the default\n"
            "run's documents and on three controls that keep BOS and the mask but take the documents' "
            "content away\n"
            "(windows inside documents, uniform random tokens, each document's tokens permuted), with "
            "±1 bootstrap\n"
            "standard error over each condition's groups of sequences. Claim 12 (ours, registered before "
            "these numbers)\n"
            "compares each control with the documents over layers 2+; its ledger is "
            "``results/controls/summary/claims.md``.",
        ),
        FigureSpec(
            CONVERGENCE_FIGURE,
            "Claims",
            ("convergence",),
            beside=True,
            draw="causalpos.figures.convergence.plot_convergence",
            caption_file="report/convergence.rst",
            caption="The LLM claims (8a-8d) as the number of sequences N grows: each claim measured again "
            "on the\n"
            "first groups of sequences of the extraction (a random subset: the sequences are "
            "shuffled), with\n"
            "its bootstrap uncertainty over those groups. The last point of each curve is the "
            "ledger's value;\n"
            "a verdict that changes with N is noted in the ledger. The table is\n"
            "``results/summary/convergence.parquet`` "
            "(``results/paper_llms/summary/convergence.parquet`` for\n"
            "the paper-size run, target ``paper_llms``).",
        ),
        FigureSpec(
            LENGTH_SEEDS_FIGURE,
            "Trained models",
            ("length_seeds",),
            beside=True,
            draw="causalpos.figures.training.fig_length_seeds",
            caption_file="report/length_seeds.rst",
            caption="**Length generalisation over training seeds** (not in the paper). Left: the held-out "
            "loss at 2x and 4x the\n"
            "training length minus that at 1x, for each training seed (dots) with the mean ± SD "
            "over seeds, NoPE and\n"
            "RoPE. Right: NoPE's gap minus RoPE's, paired by seed (dots), with the mean and its "
            "95% t interval, and under\n"
            "each length the one-sided exact sign-flip p and the seeds below 0. **Look for**: "
            "whether every seed is below\n"
            "0 and the interval excludes 0; with n seeds the exact p cannot go below 1/2^n (the "
            "table's\n"
            "``exact_p_adjusted`` also adjusts over the lengths).",
        ),
        FigureSpec(
            ABLATION_FIGURE,
            "Trained models",
            ("pattern_ablation_summary",),
            beside=True,
            draw="causalpos.figures.ablation.fig_pattern_ablation",
            caption_file="report/pattern_ablation.rst",
            caption="**The pattern ablation** (issue 27; not in the paper, a test of its conjecture in "
            "Section 5.2 that the\n"
            'causal-mask pattern "may potentially negatively affect length generalization"). Each '
            "trained model is run with\n"
            "the non-relative part of every layer's mean score map subtracted from its attention "
            "logits (estimated on other\n"
            "held-out sequences of the same length; key 0, the attention sink, left alone), "
            "against controls: the same\n"
            "values shuffled within each band, the relative part removed, and the pattern removed "
            "with key 0 too. Left\n"
            "panels, one per trained model: under each condition, its loss gap (the loss at 2x and 4x the "
            "training length,\n"
            "in tokens on the axis, minus at 1x) minus the control's gap; the mean over training seeds ± "
            "its SE over seeds,\n"
            "dots: the seeds (target ``length_seeds``); with one seed, as in the default run, ± the SE over "
            "held-out sequences.\n"
            "Last panel: the pretrained LLMs' loss change at their sequence length. "
            "**Look for**: whether the\n"
            "\"pattern removed\" gap lies below the control's at 2x and 4x (the ledger's claim "
            "11: over seeds with target\n"
            "``length_seeds``); how far the LLMs' loss moves next to their control.",
        ),
    )
}
# Figures a config lists under `figures:`: those of rule figure (the other five are drawn by rules model_figure,
# claims, convergence, length_seeds_table, pattern_ablation_summary)
CONFIGURABLE = tuple(f for f, spec in FIGURES.items() if spec.caption_file == FIGURE_CAPTIONS)
# Figures figures.render draws from their input tables (all but those drawn beside their table)
RENDERED = tuple(f for f, spec in FIGURES.items() if not spec.beside)


def all_layers_page(folder, kind: str, first: int, last: int, ext: str) -> str:
    """One page of ALL_LAYERS_FIGURE, e.g. <folder>/raw_layers01-08.png (layers 1-based, as in its titles);
    all_layers_dir is the folder of a model's pages."""
    return f"{folder}/" + ALL_LAYERS_PAGE.format(kind=kind, layers=f"{first:02d}-{last:02d}", ext=ext)


def claims_page(folder, page: str, ext: str) -> str:
    """One page of CLAIMS_FIGURE, e.g. <folder>/claims2-3.png for page "2-3" (catalogue.claims.PAGES);
    claims_dir is the folder of a results folder's pages."""
    return f"{folder}/" + CLAIMS_PAGE.format(claims=page, ext=ext)


def claims_pages(folder, pages, formats) -> dict[str, list[str]]:
    """Each page of CLAIMS_FIGURE in `pages` (catalogue.claims.ledger_pages) with its file in every format."""
    return {page: [claims_page(folder, page, fmt) for fmt in formats] for page in pages}


def figure_title(figure: str) -> str:
    """A figure's title for its PDF: the first clause of its caption, e.g. "Figure 1: the mechanism on three tokens"."""
    caption = figure_spec(figure).caption.replace("**", "").replace("``", "")
    first = re.split(r"[,(.;]| \u2014 ", caption, maxsplit=1)[0].strip()
    return f"causalpos {figure}: {first}" if first else f"causalpos {figure}"


def figure_spec(figure: str) -> FigureSpec:
    if figure not in FIGURES:
        raise ValueError(f"unknown figure {figure!r}; known: {sorted(FIGURES)}")
    return FIGURES[figure]


def all_layers_dir(model: str, results: str = paths.RESULTS) -> str:
    """The folder of one model's fig_all_layers pages (rule model_figure's directory() output)."""
    return f"{results}/figures/{ALL_LAYERS_FIGURE}_{model}"


def claims_dir(results: str = paths.RESULTS) -> str:
    """The folder of figL1_claims's pages (rule claims's outputs, one file per page and format: see
    claims_pages)."""
    return f"{results}/figures/{CLAIMS_FIGURE}"


def figure_inputs(figure: str, results: str = paths.RESULTS, models=None, variants=()) -> dict[str, list[str]]:
    """The files a figure is drawn from, by table name, from its record: a table of one file
    once, a per-variant table for each of `variants` (its figures.<id>.variants), a per-model table for each of
    `models` (the models its record's `models` stands for, which the config decides), or, where the record names
    no models, for the trained models (metrics, length_eval)."""
    spec = figure_spec(figure)
    if spec.beside:
        raise ValueError(f"figure {figure!r} is drawn by the rule that writes its table {spec.tables[0]!r}")
    files = {}
    for name in spec.tables:
        wildcards = table(name).wildcards
        if wildcards == ("variant",):
            files[name] = [paths.table_file(name, results, variant=v) for v in variants]
        elif wildcards == ("model",):
            files[name] = [paths.table_file(name, results, model=m) for m in (TRAINED if models is None else models)]
        else:
            files[name] = [paths.table_file(name, results)]
    return files
