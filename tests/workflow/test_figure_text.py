"""Every figure family is readable: no clipped or overlapping text, no legend over data, integer ticks on layer
axes, and text of at least MIN_TEXT_PX pixels where the report shows the figure REPORT_WIDTH_PX wide.

The figures are drawn from the shared finished tiny run's tables through the production paths (the rules' job
modules, run by workflow.job.run_job, or figures.style.save_figure with the job's drawing), into PNGs under a temporary
folder; save_figure is wrapped so that each Figure is kept, with the seaborn plotting context and style that
save_figure drew it in (read back inside the drawing with seaborn's own getters): the checks lay the figure out
again in that context (figures.legibility), as it was when its PNG was written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import seaborn as sns
from matplotlib.figure import Figure

import causalpos.figures.render as render
import causalpos.figures.style as style
from causalpos.catalogue.claims import PAGES
from causalpos.figures.activations import LAYERS_PER_PAGE
from causalpos.figures.convergence import plot_convergence
from causalpos.figures.legibility import (
    MIN_TEXT_PX,
    clipped_texts,
    displayed_text_px,
    drawn,
    drawn_tick_labels,
    legends_over_data,
    overlapping_texts,
    texts_over_axes,
)
from causalpos.figures.ledger import plot_ledger
from causalpos.figures.ablation import fig_pattern_ablation
from causalpos.catalogue.figures import (
    ABLATION_FIGURE,
    ALL_LAYERS_FIGURE,
    CLAIMS_FIGURE,
    CONVERGENCE_FIGURE,
    FIGURES,
    LENGTH_SEEDS_FIGURE,
    MASK_CONTROLS_FIGURE,
    RENDERED,
)
from causalpos.io import PartTable, read_table
from causalpos.analysis.controls_table import condition_frame, mask_controls_frame
from causalpos.catalogue.models import CONTROL_CONDITIONS, DOCUMENTS
from causalpos.figures.mask_controls import plot_mask_controls
from causalpos.catalogue import paths
from causalpos.workflow.config import load_config
from causalpos.workflow.job import Job, run_job
from causalpos.workflow.settings import extracted_models, figure_inputs, figure_options, plot_options

FIGURE_IDS = [figure for figure in RENDERED if figure != ALL_LAYERS_FIGURE]  # rule figure's
KINDS = ("raw", "diagnorm")
FAMILIES = [
    *FIGURE_IDS,
    *(f"{ALL_LAYERS_FIGURE}/{kind}" for kind in KINDS),
    CLAIMS_FIGURE,
    CONVERGENCE_FIGURE,
    LENGTH_SEEDS_FIGURE,
    ABLATION_FIGURE,
    MASK_CONTROLS_FIGURE,
]
DEEP_LAYERS = 18  # a model with this many layers or more has several all-layers pages (Gemma-3-270M: 18)
DEEP_MODEL = "llm_18_layers"  # a made-up model of DEEP_LAYERS layers, where the run has none (a name no run has)


@dataclass
class Drawn:
    """A figure as save_figure wrote it: the Figure and the seaborn context and style it was drawn in."""

    name: str
    fig: Figure
    context: dict
    style: dict

    def check(self, measure):
        with sns.plotting_context(self.context), sns.axes_style(self.style):
            return measure(self.fig)


# ---------------------------------------------------------------- drawing every family


class Recorder:
    """Wraps save_figure: every figure it writes is kept, under the family being drawn, named by its file
    (relative to `out`, the folder every figure is written to)."""

    def __init__(self, real, out: Path):
        self.real, self.out, self.family, self.drawn = real, out, None, {}

    def __call__(self, draw, options, outputs, label="figure", title=None):
        def recorded():
            fig = draw()
            # the context save_figure opened, as seaborn reports it (not its constants copied here)
            name = Path(list(outputs)[0]).relative_to(self.out)
            self.drawn.setdefault(self.family, []).append(
                Drawn(str(name), fig, sns.plotting_context(), sns.axes_style())
            )
            return fig

        self.real(recorded, options, outputs, label, title)


def deepest(scores: pd.DataFrame) -> int:
    return int(scores.groupby("model")["layer"].nunique().max())


def with_deep_model(scores: pd.DataFrame) -> pd.DataFrame:
    """The extracted scores, plus an 18-layer model (layers of the deepest model repeated) if none has that
    many: its pages (6, 6, 6), as Gemma-3-270M's."""
    if deepest(scores) >= DEEP_LAYERS:
        return scores
    source = scores[scores["model"] == scores.groupby("model")["layer"].nunique().idxmax()]
    layers = sorted(source["layer"].unique())
    copies = [source[source["layer"] == layers[k % len(layers)]].assign(layer=k) for k in range(DEEP_LAYERS)]
    return pd.concat([scores, pd.concat(copies).assign(model=DEEP_MODEL)], ignore_index=True)


def shallower(scores: pd.DataFrame) -> pd.DataFrame:
    """Each model deeper than DEEP_LAYERS cut to its first 2 * LAYERS_PER_PAGE - 1 layers: a full page and one a
    panel short, the two page shapes SmolLM2-135M's 30 layers make (8, 8, 7, 7), in half the drawing."""
    layers = scores.groupby("model")["layer"].transform("nunique")
    return scores[(layers <= DEEP_LAYERS) | (scores["layer"] < 2 * LAYERS_PER_PAGE - 1)]


def draw_rule_figures(run: Path, config: dict, out: Path, recorder: Recorder) -> None:
    results = str(run / "results")
    for figure in FIGURE_IDS:
        recorder.family = figure
        run_job(
            Job(
                "figure",
                wildcards={"figure": figure},
                input=figure_inputs(config, figure, results),
                output={"png": str(out / f"{figure}.png")},
                params={"options": figure_options(config, figure)},
            )
        )


def draw_all_layers(run: Path, config: dict, out: Path, recorder: Recorder) -> None:
    results = str(run / "results")
    scores = pd.concat(
        [read_table(paths.activation_table(m, "scores", results)) for m in extracted_models(config)], ignore_index=True
    )
    scores = shallower(with_deep_model(scores))
    table = out / "scores.parquet"
    scores.to_parquet(table)
    for model in scores["model"].unique():
        recorder.family = ALL_LAYERS_FIGURE
        options = plot_options(config, model=str(model))
        run_job(
            Job(
                "model_figure",
                input={"scores": str(table)},
                output={"folder": str(out / f"{ALL_LAYERS_FIGURE}_{model}")},
                params={"options": {**options, "formats": ["png"]}},
            )
        )
    for page in recorder.drawn.pop(ALL_LAYERS_FIGURE):  # by kind, from the page's file name (raw_layers01-08.png)
        kind = Path(page.name).name.split("_")[0]
        recorder.drawn.setdefault(f"{ALL_LAYERS_FIGURE}/{kind}", []).append(page)


def draw_claims(run: Path, config: dict, out: Path, recorder: Recorder) -> None:
    options = plot_options(config)  # rule claims's
    ledger = read_table(run / paths.summary_file("claims.parquet"))
    recorder.family = CLAIMS_FIGURE
    for page in PAGES:
        recorder(lambda page=page: plot_ledger(ledger, page, options), options, [out / f"claims{page}.png"])
    convergence = read_table(run / paths.summary_file("convergence.parquet"))
    # and an 18-layer LLM (the first 18 layers' rows of the deepest): its layer axis is where 2.5, 7.5 showed
    deep = convergence[convergence["model"] == convergence.groupby("model")["layer"].nunique().idxmax()]
    convergence = pd.concat(
        [convergence, deep[deep["layer"].isna() | (deep["layer"] < DEEP_LAYERS)].assign(model=DEEP_MODEL)],
        ignore_index=True,
    )
    recorder.family = CONVERGENCE_FIGURE
    recorder(lambda: plot_convergence(convergence, options), options, [out / f"{CONVERGENCE_FIGURE}.png"])


def draw_length_seeds(run: Path, config: dict, out: Path, recorder: Recorder) -> None:
    """figT3 over three seeds: the run's length evaluation of each model as seed 1, and two more seeds made
    from it (its loss shifted up with the length by 0.01 and 0.02 per doubling, NoPE less than RoPE)."""
    runs = []
    for model, slope in (("nope", 0.01), ("rope", 0.02)):
        table = read_table(run / paths.model_file(model, "length_eval.parquet"))
        for seed, scale in ((1, 0.0), (2, 1.0), (3, 2.0)):
            path = out / f"{model}_seed{seed}.parquet"
            table.assign(heldout_loss=table["heldout_loss"] + scale * slope * np.log2(table["factor"])).to_parquet(path)
            runs.append((model, seed, path))
    recorder.family = LENGTH_SEEDS_FIGURE
    run_job(
        Job(
            "length_seeds_table",
            input={"runs": [str(path) for _, _, path in runs]},
            output={"table": str(out / "length_seeds.parquet"), "figures": [str(out / f"{LENGTH_SEEDS_FIGURE}.png")]},
            params={"runs": [[model, seed] for model, seed, _ in runs], "options": config["plot"]},
        )
    )


def draw_ablation(run: Path, config: dict, out: Path, recorder: Recorder) -> None:
    """figT4 as the run drew it (one seed and the pretrained model), and over three seeds (the run's trained
    rows as seed 0, and two more with their effects shifted by +-0.001)."""
    table = read_table(run / paths.summary_file(paths.ABLATION_FILE))
    trained = table[table["kind"] == "trained"]
    seeds = pd.concat(
        [
            trained,
            *(trained.assign(seed=seed, effect=trained["effect"] + shift) for seed, shift in ((1, 0.001), (2, -0.001))),
        ],
        ignore_index=True,
    )
    options = plot_options(config)  # rule pattern_ablation_summary's
    recorder.family = ABLATION_FIGURE
    for name, frame in (("run", table), ("seeds", seeds)):
        recorder(
            lambda frame=frame: fig_pattern_ablation({"pattern_ablation": frame}, options),
            options,
            [out / f"{ABLATION_FIGURE}_{name}.png"],
        )


def draw_mask_controls(run: Path, config: dict, out: Path, recorder: Recorder) -> None:
    """figT5 as rule controls_table draws it: the run's documents rows (claim 8 on its tables, as the rule measures
    them), and each control made from them (the values scaled by 0.9, 0.7 and 0.5: the run has no controls)."""
    results, claims = str(run / "results"), config["claims"]
    parts = []
    for model in config["extraction"]["pretrained"]["models"]:
        tables = {t: paths.activation_table(model, t, results) for t in ("scores", "groups", "head_scores")}
        documents = condition_frame(
            DOCUMENTS,
            PartTable(tables["scores"], "scores"),
            PartTable(tables["groups"], "groups").select(quantity="scores"),
            None,
            claims["n_bootstrap"],
            claims["seed"],
        )
        parts.append(documents)
        for condition, scale in zip(CONTROL_CONDITIONS, (0.9, 0.7, 0.5)):
            parts.append(documents.assign(condition=condition, value=documents["value"] * scale))
    frame = mask_controls_frame(parts)
    options = plot_options(config)  # rule controls_table's
    recorder.family = MASK_CONTROLS_FIGURE
    recorder(lambda: plot_mask_controls(frame, options), options, [out / f"{MASK_CONTROLS_FIGURE}.png"])


# over 20 s (~27 s, once per module): every figure family drawn from the shared run's tables
@pytest.fixture(scope="module")
def figures(finished_run, tmp_path_factory) -> dict[str, list[Drawn]]:
    """Every family's figures (family -> [Drawn]), drawn once from the finished run's tables."""
    out = tmp_path_factory.mktemp("figure_text")
    config = load_config(finished_run / "config.yaml", devices=False)
    recorder = Recorder(style.save_figure, out)
    with pytest.MonkeyPatch.context() as patch:  # the runners import save_figure from style when they run
        patch.setattr(style, "save_figure", recorder)
        patch.setattr(render, "save_figure", recorder)
        for draw in (
            draw_rule_figures,
            draw_all_layers,
            draw_claims,
            draw_length_seeds,
            draw_ablation,
            draw_mask_controls,
        ):
            draw(finished_run, config, out, recorder)
    return recorder.drawn


# ---------------------------------------------------------------- the checks


def where(text) -> str:
    """A text, and the panel it is in (its axes' title), for a failure message."""
    ax = text.axes
    title = next((ax.get_title(loc) for loc in ("center", "left", "right") if ax and ax.get_title(loc)), "")
    return f"{text.get_text()!r}" + (f" (panel {title!r})" if title else "")


# an axis of layers (or of hidden states, one per layer) is labelled so: "Layer", "layer (paper)", "Hidden state
# (0 = embeddings, ...)"; not "Layer-2 score", a score's axis
LAYER_AXIS = re.compile(r"(layer|hidden state)\b(?!-)", re.IGNORECASE)


def layer_tick_problems(fig: Figure) -> list[str]:
    """Tick labels of a layer axis that are not whole numbers."""
    problems = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if not LAYER_AXIS.match(axis.get_label_text()):
                continue
            shown, _ = drawn_tick_labels(axis)
            labels = [
                t
                for t in axis.get_ticklabels(minor=False) + axis.get_ticklabels(minor=True)
                if id(t) in shown and t.get_visible() and t.get_text().strip()
            ]
            bad = [t.get_text() for t in labels if not re.fullmatch(r"-?\d+", t.get_text().replace("\u2212", "-"))]
            if bad:
                problems.append(f"layer ticks: axis {axis.get_label_text()!r} has ticks {bad}")
    return problems


def problems_of(drawn_figure: Drawn) -> list[str]:
    """Every problem of one figure, as text (one layout for all the measurements)."""

    def measure(fig):
        with drawn(fig) as renderer:
            found = [f"clipped: {where(t)}" for t in clipped_texts(fig, renderer)]
            found += [f"overlap: {where(a)} and {where(b)}" for a, b in overlapping_texts(fig, renderer)]
            found += [
                f"over another panel: {where(text)} over the axes of {ax.get_title() or ax.get_ylabel()!r}"
                for text, ax in texts_over_axes(fig, renderer)
            ]
            found += [
                f"legend over data: legend {[t.get_text() for t in legend.get_texts()][:3]}... over panel "
                f"{ax.get_title() or ax.get_title(loc='left')!r}"
                for legend, ax in legends_over_data(fig, renderer)
            ]
            found += layer_tick_problems(fig)
        size = displayed_text_px(fig)
        if size < MIN_TEXT_PX:
            found.append(f"small text: the smallest is {size:.1f} px at the report's width (< {MIN_TEXT_PX:g})")
        return found

    return drawn_figure.check(measure)


def test_the_families_are_every_figure():
    assert set(FIGURE_IDS) | {
        ALL_LAYERS_FIGURE,
        CLAIMS_FIGURE,
        CONVERGENCE_FIGURE,
        LENGTH_SEEDS_FIGURE,
        ABLATION_FIGURE,
        MASK_CONTROLS_FIGURE,
    } == set(FIGURES)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_text_is_readable(figures, family):
    drawn = figures.get(family, [])
    assert drawn, f"{family}: no figure drawn"
    if family.startswith(ALL_LAYERS_FIGURE):  # a deep model's several pages are among them
        assert len(drawn) >= 3
    if family == CLAIMS_FIGURE:
        assert len(drawn) == len(PAGES)
    report = {d.name: problems for d in drawn if (problems := problems_of(d))}
    assert not report, "\n".join(f"{name}:\n  " + "\n  ".join(problems) for name, problems in report.items())


# ---------------------------------------------------------------- the checks can fail


def test_the_checks_find_clipped_and_overlapping_text_and_a_legend_over_data():
    fig = style.new_figure(4, 3)
    ax = fig.subplots()
    ax.plot([0, 1, 2], [0, 1, 0], label="data")
    ax.set_title("a title far too long to fit on a figure only four inches wide, cut at both edges")
    one = ax.text(0.5, 0.5, "overlapping", transform=ax.transAxes)
    two = ax.text(0.52, 0.51, "overlapping", transform=ax.transAxes)
    ax.legend(loc="center", bbox_to_anchor=(1.0, 1.0), bbox_transform=ax.transData)  # on the peak at (1, 1)
    ax.set_xlabel("Layer")
    ax.set_xlim(0, 2.2)
    assert [t.get_text() for t in clipped_texts(fig)] == [ax.get_title()]
    assert {frozenset(map(id, pair)) for pair in overlapping_texts(fig)} == {frozenset((id(one), id(two)))}
    assert [found_ax for _, found_ax in legends_over_data(fig)] == [ax]
    assert layer_tick_problems(fig)  # 0.0, 0.5, ...: not whole layers
    assert fig.canvas.__class__.__name__ == "FigureCanvasBase"  # the measurement gave the bare canvas back
    assert "small text" not in categories(problems_of(Drawn("bad", fig, {}, {})))
    ax.set_ylabel("tiny", fontsize=2)  # 2 pt on a 4-inch figure: 5.4 px at the report's width (780 px)
    assert categories(problems_of(Drawn("bad", fig, {}, {}))) == {
        "clipped",
        "overlap",
        "legend over data",
        "layer ticks",
        "small text",
    }


def test_a_title_over_the_colour_bar_of_the_next_panel_is_found():
    """Issue 41: Figure 1's titles (c) and (d) ran under the colour bar to their left; no other text was there, so
    the text-against-text check could not see it. The check against every axes' area does; a twin axes drawn over
    the same area is no other panel."""
    fig = style.new_figure(6, 3)
    left, right = fig.subplots(1, 2)
    image = left.imshow(np.eye(3))
    bar = fig.colorbar(image, ax=left)
    # lowered into the panels' height, as Figure 1's titles were beside its taller bars: over the bar and the panel
    right.set_title("a title long enough to run left over the colour bar of the panel beside it", y=0.85)
    right.twinx().set_ylabel("a twin's label")
    found = texts_over_axes(fig)
    assert {text.get_text() for text, _ in found} == {right.get_title()} and {ax for _, ax in found} == {left, bar.ax}
    right.set_title("short", y=0.85)
    assert texts_over_axes(fig) == []


def categories(problems: list[str]) -> set[str]:
    return {problem.split(":")[0] for problem in problems}


def test_touching_and_slanted_texts_are_no_overlap():
    """Two texts set edge to edge, and slanted labels whose upright boxes overlap but whose text does not."""
    fig = style.new_figure(6, 3)
    flat, slanted = fig.subplots(1, 2)
    left = flat.text(0.5, 0.5, "ends here", ha="right", transform=flat.transAxes)
    flat.text(0.5, 0.5, "starts here", ha="left", transform=flat.transAxes)
    slanted.set_xticks(range(8), [f"label number {k}" for k in range(8)], rotation=50, ha="right")
    assert overlapping_texts(fig) == []
    left.set_x(0.52)  # now they share a few pixels
    assert len(overlapping_texts(fig)) == 1
    slanted.set_xticks(range(8), [f"label number {k}" for k in range(8)], rotation=10, ha="right")
    assert len(overlapping_texts(fig)) > 1  # nearly flat: the labels run into each other
