"""Every figure id, with its report section, its caption and the tables it is drawn from.

The one list of figures: the config check, the rules, the CLI and figures.render all read it.
Plain data (no plotting import), so the workflow can read it while Snakemake builds the DAG.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_LAYERS_FIGURE = "fig_all_layers"  # Figures 11-16: drawn for every extracted model by rule model_figure
CLAIMS_FIGURE = "figL1_claims"  # drawn by rule claims, beside the ledger
LENGTH_SEEDS_FIGURE = "figT3_length_seeds"  # drawn by rule length_seeds (its own target), beside its table
CONVERGENCE_FIGURE = "figL2_convergence"  # drawn by rule convergence, beside results/summary/convergence.parquet


@dataclass(frozen=True)
class FigureSpec:
    """section: the report's category; caption: what it shows; tables: what it reads, from
    "simulation" (the variants listed under figures.<id>.variants), "theory", "metrics", "blocks",
    "length_eval" (the trained models), "emergence" (results/summary/emergence.parquet) and the extraction
    tables "scores", "intermediates", "probe";
    models: whose extraction tables ("model": options["model"], "trained": nope and rope,
    "pretrained": every pretrained model, "all": every extracted model, "one": one per rule job)."""

    section: str
    caption: str
    tables: tuple[str, ...] = ()
    models: str | None = None

    @property
    def uses_variants(self) -> bool:
        return "simulation" in self.tables


FIGURES = {
    "fig01_mechanism": FigureSpec(
        "Simulation", "Figure 1: how the causal mask makes h(i) decrease and the layer-2 score g(i)/(h(i)h(j)) "
        "grow with the key position (closed form).", ("theory",)),
    "fig02_l2norm": FigureSpec(
        "Simulation", "Figure 2: attention scores of the parameter-free l2-normalised model, layers 1-4, "
        "alpha = 0 and 0.2 (Monte Carlo).", ("simulation",)),
    "fig04_rope": FigureSpec(
        "Simulation", "Figure 4: RoPE with the causal mask: scores minus their diagonal mean; the non-relative "
        "pattern from layer 2 on.", ("simulation",)),
    "fig06_alpha": FigureSpec(
        "Simulation", "Figure 6: larger alpha: the pattern appears faster and saturates.", ("simulation",)),
    "fig07_layernorm": FigureSpec(
        "Simulation", "Figure 7 (Appendix B): LayerNorm with sqrt(d) and d scaling against l2.", ("simulation",)),
    "fig09_rope_alpha": FigureSpec(
        "Simulation", "Figure 9: RoPE with the causal mask, alpha = 0.5.", ("simulation",)),
    "fig10_rope_nomask": FigureSpec(
        "Simulation", "Figure 10: RoPE without the causal mask: no non-relative pattern.", ("simulation",)),
    "figS1_mc_vs_closed_form": FigureSpec(
        "Simulation", "Monte Carlo against the closed form Eq. 4 as d grows.", ("simulation", "theory")),
    "figT1_training_loss": FigureSpec(
        "Trained models", "Training and held-out loss of the NoPE model and its RoPE twin.", ("metrics", "blocks")),
    "figT2_length_generalization": FigureSpec(
        "Trained models", "Held-out loss at 1x, 2x and 4x the training length.", ("length_eval",)),
    "figE1_emergence": FigureSpec(
        "Trained models", "Over training: claim 7's key-order concordance at Figure 3's (f) and (i), the nearer-key "
        "advantage of (i) against the alpha = 0 simulation, the non-relative amplitude of every layer and the "
        "held-out loss, at each snapshot, NoPE and RoPE side by side; dashed: the alpha = 0 simulation.",
        ("emergence",)),
    "fig03_intermediates": FigureSpec(
        "Trained models", "Figure 3: Gram matrices of the intermediates (a)-(i) of the trained NoPE model's "
        "first two layers.", ("intermediates",), "model"),
    "fig08_model_layers": FigureSpec(
        "Trained models", "Figure 8: attention scores of every layer of the trained model.", ("scores",), "model"),
    "figC1_nope_vs_rope": FigureSpec(
        "Trained models", "The NoPE model against its RoPE twin, layer by layer.", ("scores",), "trained"),
    "fig05_llms": FigureSpec(
        "Pretrained LLMs", "Figure 5: diagonal-normalised attention scores of pretrained RoPE LLMs.", ("scores",),
        "pretrained"),
    "figM1_nonrelativeness": FigureSpec(
        "Measurements", "Non-relativeness index per model and layer, with its noise floor and without the sink "
        "column.", ("scores",), "all"),
    "figM2_increasing_fraction": FigureSpec(
        "Measurements", "Fraction of adjacent keys where the nearer key scores higher.", ("scores",), "all"),
    "figM3_position_probe": FigureSpec(
        "Measurements", "Absolute-position probe error per layer, against its baseline.", ("probe",), "all"),
    ALL_LAYERS_FIGURE: FigureSpec(
        "All layers", "Figures 11-16: diagonal-normalised scores of every layer of one model.", ("scores",), "one"),
    CLAIMS_FIGURE: FigureSpec(
        "Claims", "The claims ledger: each claim's metric with its uncertainty against its threshold."),
    CONVERGENCE_FIGURE: FigureSpec(
        "Claims", "The LLM claims (8a-8d) as the number of sequences grows: each value ± 2 bootstrap standard errors "
        "on the first groups of sequences, against the claim's threshold."),
    LENGTH_SEEDS_FIGURE: FigureSpec(
        "Trained models", "Length generalisation over training seeds: the held-out loss at 2x and 4x the training "
        "length minus that at 1x, each seed and the mean ± SD over seeds, NoPE and RoPE."),
}
# Figures a config lists under `figures:` (the other four are drawn by rules model_figure, claims, convergence,
# length_seeds)
CONFIGURABLE = tuple(f for f in FIGURES
                     if f not in (ALL_LAYERS_FIGURE, CLAIMS_FIGURE, CONVERGENCE_FIGURE, LENGTH_SEEDS_FIGURE))


def figure_spec(figure: str) -> FigureSpec:
    if figure not in FIGURES:
        raise ValueError(f"unknown figure {figure!r}; known: {sorted(FIGURES)}")
    return FIGURES[figure]
