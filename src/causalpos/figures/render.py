"""Draw a figure by its id: the one entry point, drawing with the function its record names.

`render_figure(figure_id, tables, options, outputs)`: `tables` maps a table name (catalogue.tables: "simulation",
"theory", "scores", "nonrelativeness", ...) to a DataFrame; every path in `outputs` gets the figure in the format of
its suffix. `render_all_layers(tables, options, page_files)`: fig_all_layers, one file per kind, page and format.
`drawer(figure_id)`: the drawing function of any figure (catalogue.figures.FigureSpec.draw, imported).
"""

from __future__ import annotations

import importlib

import pandas as pd

from causalpos.catalogue.figures import ALL_LAYERS_FIGURE, figure_spec, figure_title
from causalpos.figures import activations
from causalpos.catalogue.models import NOPE
from causalpos.figures.style import save_figure
from causalpos.io import PartTable
from causalpos.models.progress import Steps


def drawer(figure_id: str):
    """The function that draws `figure_id`: its record's dotted name, imported (ValueError for an unknown id)."""
    module, _, name = figure_spec(figure_id).draw.rpartition(".")
    return getattr(importlib.import_module(module), name)


def render_figure(figure_id: str, tables: dict[str, pd.DataFrame], options: dict, outputs) -> None:
    """Draw figure `figure_id` and write it to every path in outputs (format from the suffix)."""
    if figure_spec(figure_id).beside:  # an unknown id: ValueError listing the known ones
        raise ValueError(
            f"figure {figure_id!r} is drawn by the rule that writes its table "
            f"{figure_spec(figure_id).tables[0]!r}, not by render_figure"
        )
    draw = drawer(figure_id)
    save_figure(lambda: draw(tables, options), options, outputs, figure_id, figure_title(figure_id))


def render_all_layers(tables: dict, options: dict, page_files) -> list:
    """Every page of fig_all_layers for options["model"] (activations.all_layers_pages);
    page_files(kind, first, last) -> the paths of one page (layers 1-based), one per format.
    Returns the paths written. tables["scores"] may be an io.PartTable: each page then reads its own
    layers' rows (a 40-layer model's scores at S = 1,024 are 21M rows)."""
    scores = tables["scores"]
    if isinstance(scores, PartTable):
        model = scores.select(model=options.get("model", NOPE))
        layers = [layer for (layer,) in model.keys(["layer"])]
        if not layers:
            raise ValueError(f"model {options.get('model', NOPE)!r} missing from the scores table")
        pages, options = activations.layer_pages(layers, options), {**options, "n_layers": len(layers)}

        def rows_of(run):
            return {"scores": pd.concat([model.read({"layer": layer}) for layer in run], ignore_index=True)}
    else:
        pages = activations.all_layers_pages(tables, options)

        def rows_of(run):
            return tables

    written = []
    steps = Steps(f"{ALL_LAYERS_FIGURE} {options.get('model', NOPE)}", len(pages))  # ~5 s a page for an LLM
    for kind, run in pages:
        outputs = list(page_files(kind, run[0] + 1, run[-1] + 1))
        render_figure(ALL_LAYERS_FIGURE, rows_of(run), {**options, "kind": kind, "layers": run}, outputs)
        written += outputs
        steps.done(f"{kind} layers {run[0] + 1}-{run[-1] + 1}")
    return written
