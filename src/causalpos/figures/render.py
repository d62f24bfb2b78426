"""Draw a figure by its id: the drawing function of every figure of figures.registry, and the one entry point.

`render_figure(figure_id, tables, options, outputs)`: `tables` maps a table name ("simulation", "theory",
"recursion", "scores", ...) to a DataFrame; every path in `outputs` gets the figure in the format of its suffix.
`render_all_layers(tables, options, page_files)`: fig_all_layers, one file per kind, page and format.
"""

from __future__ import annotations

import pandas as pd

from causalpos.figures import activations, emergence, heads, measurements, simulation, training
from causalpos.catalogue.figures import ALL_LAYERS_FIGURE, figure_spec
from causalpos.figures.style import save_figure
from causalpos.io import PartTable

DRAW = {
    "fig01_mechanism": simulation.fig_mechanism,
    "fig02_l2norm": simulation.fig_layer_grid,
    "fig04_rope": simulation.fig_rope,
    "fig06_alpha": simulation.fig_layer_grid,
    "fig07_layernorm": simulation.fig_layer_grid,
    "fig09_rope_alpha": simulation.fig_rope,
    "fig10_rope_nomask": simulation.fig_rope,
    "figS1_mc_vs_closed_form": simulation.fig_mc_vs_closed_form,
    "figR1_recursion": simulation.fig_recursion,
    "figT1_training_loss": training.fig_training_loss,
    "figT2_length_generalization": training.fig_length_generalization,
    "figE1_emergence": emergence.fig_emergence,
    "fig03_intermediates": activations.fig_intermediates,
    "fig05_llms": activations.fig_llms,
    "fig08_model_layers": activations.fig_model_layers,
    ALL_LAYERS_FIGURE: activations.fig_all_layers,
    "figC1_nope_vs_rope": activations.fig_nope_vs_rope,
    "figM1_nonrelativeness": measurements.fig_nonrelativeness,
    "figM2_increasing_fraction": measurements.fig_increasing_fraction,
    "figM3_position_probe": measurements.fig_position_probe,
    "figH1_heads": heads.fig_heads,
}  # the claims figure is drawn by rule claims (figures.ledger.plot_ledger), figT3 by rule length_seeds
# (figures.training.fig_length_seeds)


def render_figure(figure_id: str, tables: dict[str, pd.DataFrame], options: dict, outputs) -> None:
    """Draw figure `figure_id` and write it to every path in outputs (format from the suffix)."""
    figure_spec(figure_id)  # an unknown id: ValueError listing the known ones
    if figure_id not in DRAW:
        raise ValueError(f"figure {figure_id!r} is not drawn by render_figure; drawn: {sorted(DRAW)}")
    save_figure(lambda: DRAW[figure_id](tables, options), options, outputs, figure_id)


def render_all_layers(tables: dict, options: dict, page_files) -> list:
    """Every page of fig_all_layers for options["model"] (activations.all_layers_pages);
    page_files(kind, first, last) -> the paths of one page (layers 1-based), one per format.
    Returns the paths written. tables["scores"] may be an io.PartTable: each page then reads its own
    layers' rows (a 40-layer model's scores at S = 1,024 are 21M rows)."""
    scores = tables["scores"]
    if isinstance(scores, PartTable):
        model = scores.select(model=options.get("model", "nope"))
        layers = [layer for (layer,) in model.keys(["layer"])]
        if not layers:
            raise ValueError(f"model {options.get('model', 'nope')!r} missing from the scores table")
        pages, options = activations.layer_pages(layers, options), {**options, "n_layers": len(layers)}

        def rows_of(run):
            return {"scores": pd.concat([model.read({"layer": layer}) for layer in run], ignore_index=True)}
    else:
        pages = activations.all_layers_pages(tables, options)

        def rows_of(run):
            return tables
    written = []
    for kind, run in pages:
        outputs = list(page_files(kind, run[0] + 1, run[-1] + 1))
        render_figure(ALL_LAYERS_FIGURE, rows_of(run), {**options, "kind": kind, "layers": run}, outputs)
        written += outputs
    return written
