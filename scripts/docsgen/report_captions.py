"""The report's caption files, from the figures' records (catalogue.figures: FigureSpec.caption).

Snakemake renders a caption file as a Jinja template with the job's `snakemake` object (wildcards, params,
config, rule) and nothing of ours, so each file carries its figures' captions: report/figure.rst a mapping from
every id of rule figure to its caption (the file shows the one of its {figure} wildcard), and each other figure's
file its own caption (fig_all_layers's a template over its job's wildcards, given the trained models' names).
"""

from __future__ import annotations

import json

from causalpos.catalogue.figures import FIGURE_CAPTIONS, FIGURES
from causalpos.catalogue.models import TRAINED
from docsgen import section


@section("figure-captions", FIGURE_CAPTIONS)
def figure_captions() -> str:
    """The captions of rule figure's figures, as a Jinja mapping by id."""
    entries = [
        f"  {json.dumps(f.id)}: {json.dumps(f.caption, ensure_ascii=False)},"
        for f in FIGURES.values()
        if f.caption_file == FIGURE_CAPTIONS
    ]
    return "\n".join(["{%- set captions = {", *entries, "} -%}"])


def own_caption(figure_id: str) -> str:
    """A figure's caption file of its own: its caption, after the names of the trained models where it tells them
    from the pretrained ones (`trained_models`: fig_all_layers's template)."""
    caption = FIGURES[figure_id].caption
    if "trained_models" not in caption:
        return caption
    trained = "(" + ", ".join(json.dumps(m) for m in TRAINED) + ("," if len(TRAINED) == 1 else "") + ")"
    return "\n".join([f"{{%- set trained_models = {trained} -%}}", caption])


def _register(figure_id: str) -> None:
    section(f"caption-{figure_id}", FIGURES[figure_id].caption_file)(lambda: own_caption(figure_id))


for _figure in FIGURES.values():
    if _figure.caption_file != FIGURE_CAPTIONS:
        _register(_figure.id)
