"""Figures render from small real simulations; the pivot puts query/key where they belong."""

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from causalpos.catalogue.figures import FIGURES
from causalpos.figures.render import render_figure
from causalpos.figures.simulation import (
    BLOCK_HEIGHT,
    RECURSION_ROWS,
    blocks_per_line,
    fig_layer_grid,
    fig_recursion,
    fig_rope,
    layer_matrix,
    mechanism_panels,
    recursion_panels,
    self_score,
    variant_label,
)
from causalpos.figures.style import MAX_ASPECT, PANEL_SIZE
from causalpos.simulation import recursion as rec
from causalpos.simulation.engine import result_frame, simulate
from causalpos.simulation.variant import Variant
from causalpos.simulation import theory as closed_form
from causalpos.simulation.theory import theory_frame

SMALL = dict(n_samples=1024, seq_len=8, d=16, n_layers=3)
VARIANTS = {
    "l2_a0": {},
    "l2_a0.2": {"alpha": 0.2},
    "ln_sqrtd": {"norm": "layernorm", "scale": "sqrt_d"},
    "ln_d": {"norm": "layernorm", "scale": "d", "alpha": 0.2},
    "rope": {"pe": "rope"},
    "rope_nomask": {"pe": "rope", "mask": "none"},
    "l2_a0_d8": {"d": 8},
    "l2_a0_d32": {"d": 32},
    "l2_a0_w3": {"window": 3},
}
PLOT = dict(formats=["pdf", "png"], dpi=60, cmap="viridis", diverging_cmap="coolwarm", font_scale=1.0)
FIGURE_OPTIONS = {
    "fig01_mechanism": {"alpha": 0.2},
    "fig02_l2norm": {"variants": ["l2_a0", "l2_a0.2"]},
    "fig04_rope": {"variants": ["rope"]},
    "fig06_alpha": {"variants": ["l2_a0.2"]},
    "fig07_layernorm": {"variants": ["ln_sqrtd", "ln_d"]},
    "fig09_rope_alpha": {"variants": ["rope"]},
    "fig10_rope_nomask": {"variants": ["rope_nomask"]},
    "figS1_mc_vs_closed_form": {"variants": ["l2_a0_d8", "l2_a0", "l2_a0_d32"]},
    "figR1_recursion": {"variants": ["l2_a0", "l2_a0.2", "rope"]},
}


@pytest.fixture(scope="module")
def simulation():
    frames = [result_frame(simulate(Variant(**{**SMALL, **kw}), device="cpu"), name) for name, kw in VARIANTS.items()]
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def recursion():
    return rec.recursion_table({name: Variant(**{**SMALL, **kw}) for name, kw in VARIANTS.items()})


@pytest.fixture(scope="module")
def theory():
    return theory_frame(SMALL["seq_len"], [0.0, 0.2])


TRAINING_FIGURES = {
    "figT1_training_loss",
    "figT2_length_generalization",  # test_training_figures_render
    "figE1_emergence",  # test_emergence_and_seed_figures_render
    "figH1_heads",
}  # tests/integration/test_heads.py


def test_every_figure_has_options():
    """Every figure drawn from the simulation, theory and training tables is tested here."""
    ours = {figure for figure, spec in FIGURES.items() if spec.tables and not spec.models and not spec.beside}
    assert set(FIGURE_OPTIONS) | TRAINING_FIGURES == ours


@pytest.mark.parametrize("figure_id", sorted(FIGURE_OPTIONS))
def test_render_every_figure(figure_id, simulation, theory, recursion, tmp_path):
    options = {**PLOT, **FIGURE_OPTIONS[figure_id]}
    names = options.get("variants", [])
    table = simulation[simulation["variant"].isin(names)] if names else None
    outputs = [tmp_path / "figures" / f"{figure_id}.{fmt}" for fmt in options["formats"]]
    render_figure(figure_id, {"simulation": table, "theory": theory, "recursion": recursion}, options, outputs)
    for path in outputs:
        assert path.is_file() and path.stat().st_size > 1000
    assert outputs[0].read_bytes().startswith(b"%PDF")
    width, height = Image.open(outputs[1]).size
    assert 400 < width < 1500 and 150 < height < 1500 and height <= MAX_ASPECT * width + 2  # whole in the report
    if figure_id not in ("fig01_mechanism", "figS1_mc_vs_closed_form", "figR1_recursion"):
        # heatmap grids: one column per layer, one row per variant (two for RoPE)
        rows = 2 * len(names) if "rope" in figure_id else len(names)
        assert width == pytest.approx(PANEL_SIZE[0] * SMALL["n_layers"] * PLOT["dpi"], abs=2)
        assert height == pytest.approx(BLOCK_HEIGHT * rows * PLOT["dpi"], abs=2)
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == sorted(p.name for p in outputs)


def test_layer_matrix_places_query_and_key():
    table = pd.DataFrame(
        {
            "variant": "toy",
            "layer": 0,
            "seq_len": 3,
            "query_pos": [0, 1, 1, 2, 2, 2],
            "key_pos": [0, 0, 1, 0, 1, 2],
            "score_mean": [1.0, 10.0, 2.0, 20.0, 21.0, 3.0],
        }
    )
    matrix = layer_matrix(table, "toy", 0)
    assert matrix.shape == (3, 3)
    assert matrix[1, 0] == 10.0 and matrix[2, 0] == 20.0 and matrix[2, 1] == 21.0  # [query, key]
    np.testing.assert_array_equal(np.diag(matrix), [1.0, 2.0, 3.0])
    assert np.isnan(matrix[np.triu_indices(3, k=1)]).all()  # invisible keys stay NaN
    with pytest.raises(ValueError, match="layer 1"):
        layer_matrix(table, "toy", 1)


def test_layer_matrix_matches_simulation(simulation):
    result = simulate(Variant(**SMALL), device="cpu")
    matrix = layer_matrix(simulation, "l2_a0", 1)
    visible = np.tril(np.ones((SMALL["seq_len"],) * 2, dtype=bool))
    np.testing.assert_allclose(matrix[visible], result.score_mean[1][visible])
    assert np.isnan(matrix[~visible]).all()
    assert not np.isnan(layer_matrix(simulation, "rope_nomask", 2)).any()  # no mask: every pair visible


def colour_axes(fig):
    return [ax for ax in fig.axes if ax.collections and getattr(ax.collections[0], "colorbar", None) is not None]


def test_raw_scores_on_the_papers_fixed_range(simulation):
    """Raw panels span 0 to a token's score with itself, which no simulated score exceeds (Cauchy-Schwarz) and
    every diagonal reaches: 1 for l2 and LayerNorm with d scaling, sqrt(d) for LayerNorm with sqrt(d) scaling."""
    names = ["l2_a0", "ln_sqrtd", "ln_d"]
    fig = fig_layer_grid({"simulation": simulation}, {"variants": names})
    panels = colour_axes(fig)
    tops = {name: self_score(simulation[simulation["variant"] == name].iloc[0]) for name in names}
    assert tops == pytest.approx({"l2_a0": 1.0, "ln_sqrtd": np.sqrt(SMALL["d"]), "ln_d": 1.0})
    for k, name in enumerate(names):
        rows = simulation[simulation["variant"] == name]
        assert rows["score_mean"].max() <= tops[name] * (1 + 1e-6)
        diagonal = rows[rows["query_pos"] == rows["key_pos"]]["score_mean"]
        assert diagonal.to_numpy() == pytest.approx(tops[name], rel=1e-3)  # LayerNorm's eps: not exactly
        for ax in panels[k * SMALL["n_layers"] : (k + 1) * SMALL["n_layers"]]:
            assert ax.collections[0].get_clim() == pytest.approx((0.0, tops[name]))
            assert ax.collections[0].get_cmap().name == "rocket"
    own = colour_axes(fig_layer_grid({"simulation": simulation}, {"variants": names, "colour_limits": "panel"}))
    layer1 = layer_matrix(simulation, "l2_a0", 1)
    assert own[1].collections[0].get_clim() == pytest.approx((np.nanmin(layer1), np.nanmax(layer1)))
    with pytest.raises(ValueError, match="colour_limits"):
        fig_layer_grid({"simulation": simulation}, {"variants": names, "colour_limits": "shared"})


def test_rope_diagonal_normalised_panels_on_their_own_range(simulation):
    panels = colour_axes(fig_rope({"simulation": simulation}, {"variants": ["rope"]}))
    layers = SMALL["n_layers"]
    assert len(panels) == 2 * layers
    normalised = layer_matrix(simulation, "rope", 1, "score_diagnorm")
    assert panels[layers + 1].collections[0].get_clim() == pytest.approx((np.nanmin(normalised), np.nanmax(normalised)))
    centred = colour_axes(fig_rope({"simulation": simulation}, {"variants": ["rope"], "centred_diagnorm": True}))
    low, high = centred[layers + 1].collections[0].get_clim()
    assert low == pytest.approx(-high) and centred[layers + 1].collections[0].get_cmap().name == "coolwarm"


@pytest.mark.parametrize("alpha", [0.0, 0.2, 0.6])
def test_mechanism_panels_compose(alpha):
    """Figure 1's panels agree with each other: (c) is (b) with unit-norm rows under the inputs' Gram matrix
    (1 on the diagonal, alpha elsewhere), and (d) = (c) Gram (c)^T is Eq. 4."""
    n = 5
    (a, _), (b, _), (c, _), (d, _) = mechanism_panels(n, alpha)
    gram = np.full((n, n), alpha) + (1 - alpha) * np.eye(n)
    lower = np.tril(np.ones((n, n), dtype=bool))
    np.testing.assert_allclose(a[lower], gram[lower])
    np.testing.assert_allclose(b.sum(axis=1), 2.0)  # attention weights sum to 1, plus the residual x_i
    np.testing.assert_allclose(np.einsum("ij,jk,ik->i", c, gram, c), 1.0)
    np.testing.assert_allclose((c @ gram @ c.T)[lower], d[lower], rtol=1e-12)
    np.testing.assert_allclose(d, closed_form.layer2_scores(n, alpha), rtol=1e-12)


def test_variant_labels(simulation):
    first = simulation.drop_duplicates("variant").set_index("variant")
    assert variant_label(first.loc["l2_a0.2"]) == "α = 0.2"
    assert variant_label(first.loc["l2_a0_w3"]) == "window 3, α = 0"
    assert variant_label(first.loc["ln_sqrtd"]) == "LayerNorm, √d scaling, α = 0"
    assert variant_label(first.loc["rope_nomask"]) == "RoPE, no causal mask, α = 0"


def test_recursion_figure_shows_monte_carlo_the_recursion_and_their_difference(simulation, recursion):
    """figR1: per variant a block of three rows (Monte Carlo, recursion, difference) by layers, the blocks two to a
    line (three variants: two lines, the fourth place empty) within the report's height; the panels are the two
    tables' scores and their difference, the score rows on the paper's fixed range 0 .. self_score, the difference
    on a diverging map centred at 0 that holds every layer's difference; a windowed variant's hidden pairs blank."""
    names = ["l2_a0", "ln_sqrtd", "l2_a0_w3"]
    fig = fig_recursion({"simulation": simulation, "recursion": recursion}, {"variants": names})
    width, height = fig.get_size_inches()
    assert height <= MAX_ASPECT * width + 1e-9
    blocks = [sub for sub in fig.subfigs if sub.get_visible()]
    assert len(blocks) == 3 and len(fig.subfigs) == 4
    layers = SMALL["n_layers"]
    for block, name in zip(blocks, names):
        params = simulation[simulation["variant"] == name].iloc[0]
        assert block._suptitle.get_text() == variant_label(params)
        panels = [ax for ax in block.axes if ax.images]
        assert len(panels) == 3 * layers
        assert [ax.get_ylabel().split("\n")[0] for ax in panels[::layers]] == list(RECURSION_ROWS)
        mc, limit, difference = recursion_panels(simulation, recursion, name)
        result = rec.recursion(Variant(**{**SMALL, **VARIANTS[name]}))
        for k in range(layers):
            np.testing.assert_array_equal(mc[k], layer_matrix(simulation, name, k))
            visible = result.visible[k]
            np.testing.assert_allclose(limit[k][visible], result.scores[k][visible], rtol=1e-12)
            assert np.isnan(limit[k][~visible]).all() and np.isnan(mc[k][~visible]).all()
            np.testing.assert_allclose(difference[k], mc[k] - limit[k])
        top = self_score(params)
        for ax in panels[: 2 * layers]:
            assert ax.images[0].get_clim() == pytest.approx((0.0, top))
            assert ax.images[0].get_cmap().name == "rocket"
        half = max(np.nanmax(np.abs(d)) for d in difference)
        for ax, d in zip(panels[2 * layers :], difference):
            assert ax.images[0].get_clim() == pytest.approx((-half, half))
            assert ax.images[0].get_cmap().name == "coolwarm"
            np.testing.assert_array_equal(np.ma.getmaskarray(ax.images[0].get_array()), np.isnan(d))
    with pytest.raises(ValueError, match="recursion table is missing"):
        fig_recursion({"simulation": simulation, "recursion": None}, {"variants": names})
    with pytest.raises(ValueError, match="missing from the recursion table"):
        fig_recursion(
            {"simulation": simulation, "recursion": recursion[recursion.variant != "ln_sqrtd"]}, {"variants": names}
        )
    with pytest.raises(ValueError, match="other settings"):
        fig_recursion({"simulation": simulation, "recursion": recursion.assign(alpha=0.5)}, {"variants": names})


def test_missing_variant_is_named(simulation, theory, tmp_path):
    options = {**PLOT, "variants": ["l2_a0", "no_such_variant"]}
    out = tmp_path / "fig02_l2norm.png"
    with pytest.raises(ValueError, match="no_such_variant"):
        render_figure("fig02_l2norm", {"simulation": simulation, "theory": theory}, options, [out])
    assert list(tmp_path.iterdir()) == []


def test_missing_column_and_bad_inputs(simulation, theory, tmp_path):
    out = [tmp_path / "f.png"]
    with pytest.raises(ValueError, match="score_diagnorm"):
        render_figure(
            "fig04_rope",
            {"simulation": simulation.drop(columns="score_diagnorm"), "theory": theory},
            {**PLOT, "variants": ["rope"]},
            out,
        )
    with pytest.raises(ValueError, match="unknown figure"):
        render_figure("fig99", {"simulation": simulation, "theory": theory}, PLOT, out)
    with pytest.raises(ValueError, match="simulation table"):
        render_figure("fig02_l2norm", {"simulation": None, "theory": theory}, {**PLOT, "variants": ["l2_a0"]}, out)
    with pytest.raises(ValueError, match="closed form does not apply"):
        render_figure(
            "figS1_mc_vs_closed_form",
            {"simulation": simulation, "theory": theory},
            {**PLOT, "variants": ["l2_a0", "rope"]},
            out,
        )
    with pytest.raises(ValueError, match="theory table"):
        render_figure(
            "figS1_mc_vs_closed_form", {"simulation": simulation, "theory": None}, {**PLOT, "variants": ["l2_a0"]}, out
        )
    assert list(tmp_path.iterdir()) == []


def test_failed_save_leaves_no_files(simulation, theory, tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    real_savefig = Figure.savefig

    def savefig(self, fname, **kwargs):
        if kwargs.get("format") == "png":
            raise OSError("disk full")
        return real_savefig(self, fname, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    outputs = [tmp_path / "fig01_mechanism.pdf", tmp_path / "fig01_mechanism.png"]
    with pytest.raises(OSError, match="disk full"):
        render_figure("fig01_mechanism", {"simulation": None, "theory": theory}, PLOT, outputs)
    assert list(tmp_path.iterdir()) == []  # neither the finished PDF nor any temporary file


def _toy_training_tables():
    rows = []
    for model, offset in (("nope", 0.1), ("rope", 0.0)):
        for step in range(0, 50, 10):
            rows.append(
                {
                    "model": model,
                    "step": step,
                    "tokens_seen": step * 512,
                    "train_loss": 6 - step / 20 + offset,
                    "heldout_loss": 6.1 - step / 20 + offset if step % 20 == 0 else np.nan,
                    "lr": 1e-3,
                }
            )
    lengths = pd.DataFrame(
        [
            {
                "model": m,
                "factor": f,
                "seq_len": 32 * f,
                "n_sequences": 8,
                "heldout_loss": 4 + f * (0.3 if m == "nope" else 0.05),
                "heldout_loss_sem": 0.02,
            }
            for m in ("nope", "rope")
            for f in (1, 2, 4)
        ]
    )
    blocks = pd.DataFrame([{"train_unigram_entropy": 6.5, "block_len": 32}])
    return {"metrics": pd.DataFrame(rows), "length_eval": lengths, "blocks": blocks}


def test_training_figures_render(tmp_path):
    tables = _toy_training_tables()
    for figure in ("figT1_training_loss", "figT2_length_generalization"):
        outputs = [tmp_path / f"{figure}.png", tmp_path / f"{figure}.pdf"]
        render_figure(figure, tables, PLOT, outputs)
        assert all(p.stat().st_size > 1000 for p in outputs)
    with pytest.raises(ValueError, match="figT2_length_generalization: the length_eval table is missing"):
        render_figure("figT2_length_generalization", {"metrics": tables["metrics"]}, PLOT, [tmp_path / "x.png"])
    with pytest.raises(ValueError, match="lacks column"):
        render_figure(
            "figT1_training_loss", {"metrics": tables["metrics"].drop(columns="train_loss")}, PLOT, [tmp_path / "y.png"]
        )


def _toy_emergence_table() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for model in ("nope", "rope"):
        for step in (0, 3, 8, 24):
            tokens = step * 1024
            for metric, stage, layers, ref in (
                ("concordance", "f", [0], 0.9),
                ("concordance", "i", [1], 0.9),
                ("nearer_key_advantage", "i", [1], 0.5),
                ("strength_ratio", "i", [1], 1.0),
                ("nonrelative_amplitude", "scores", [0, 1, 2], 0.6),
                ("heldout_loss", "", [None], np.nan),
            ):
                for layer in layers:
                    rows.append(
                        {
                            "model": model,
                            "step": step,
                            "tokens_seen": tokens,
                            "layer": layer,
                            "stage": stage,
                            "metric": metric,
                            "value": 0.5 + rng.random(),
                            "uncertainty": 0.05,
                            "reference": ref,
                            "reference_uncertainty": 0.01,
                        }
                    )
    frame = pd.DataFrame(rows)
    frame["layer"] = frame["layer"].astype("Int64")
    return frame


def test_blocks_make_the_narrowest_figure_the_report_shows_whole(simulation, tmp_path):
    """Blocks of panels go side by side only where that makes a narrower figure than widening one block per line
    (the report shows every figure equally wide: the narrowest has the largest text), and every figure's
    height / width stays under MAX_ASPECT."""
    block = (PANEL_SIZE[0] * 4, BLOCK_HEIGHT)  # four layers

    def width(n, per_line):
        return max(per_line * block[0], -(-n // per_line) * block[1] / MAX_ASPECT)

    for n in range(1, 13):
        per_line = blocks_per_line(n, *block)
        assert all(width(n, per_line) <= width(n, other) for other in range(1, n + 1))
    assert blocks_per_line(4, *block) == 1 and blocks_per_line(12, *block) == 2
    names = ["ln_sqrtd", "ln_d", "l2_a0", "l2_a0.2"]  # 4 variants x 3 layers: one per line, widened
    options = {**PLOT, "variants": names}
    outputs = [tmp_path / "fig07_layernorm.png"]
    render_figure("fig07_layernorm", {"simulation": simulation[simulation["variant"].isin(names)]}, options, outputs)
    width_px, height_px = Image.open(outputs[0]).size
    assert height_px == pytest.approx(4 * BLOCK_HEIGHT * PLOT["dpi"], abs=2)
    assert height_px <= MAX_ASPECT * width_px + 2
    assert width_px < 2 * PANEL_SIZE[0] * SMALL["n_layers"] * PLOT["dpi"]  # narrower than two blocks a line


def test_emergence_and_seed_figures_render(tmp_path):
    from causalpos.analysis.lengths import length_seed_frame, paired_differences, with_gaps
    from causalpos.figures.style import save_figure
    from causalpos.figures.training import fig_length_seeds

    outputs = [tmp_path / "figE1_emergence.png", tmp_path / "figE1_emergence.pdf"]
    render_figure("figE1_emergence", {"emergence": _toy_emergence_table()}, PLOT, outputs)
    assert all(p.stat().st_size > 1000 for p in outputs)
    width, height = Image.open(outputs[0]).size
    assert height <= MAX_ASPECT * width  # panels in three columns: whole in the report
    with pytest.raises(ValueError, match="lacks column"):
        render_figure(
            "figE1_emergence",
            {"emergence": _toy_emergence_table().drop(columns="reference")},
            PLOT,
            [tmp_path / "x.png"],
        )
    per_seed = pd.DataFrame(
        [
            {"model": m, "seed": s, "factor": f, "seq_len": 32 * f, "heldout_loss": 5.0 + 0.1 * s + f}
            for m in ("nope", "rope")
            for s in (0, 1, 2)
            for f in (1, 2, 4)
        ]
    )
    tables = {
        "length_seeds": length_seed_frame(per_seed),
        "length_eval": with_gaps(per_seed),
        "length_pairs": paired_differences(with_gaps(per_seed)),
    }
    out = tmp_path / "figT3_length_seeds.png"
    save_figure(lambda: fig_length_seeds(tables, PLOT), PLOT, [out])
    assert out.stat().st_size > 1000


def test_a_pdf_says_its_title(tmp_path):
    """A figure's PDF carries its title (the first clause of its caption), what a viewer and a reference manager show."""
    import matplotlib.figure

    from causalpos.catalogue.figures import figure_title
    from causalpos.figures.style import save_figure

    def draw():
        fig = matplotlib.figure.Figure()
        fig.add_subplot().plot([0, 1])
        return fig

    pdf = tmp_path / "fig01_mechanism.pdf"
    save_figure(draw, {}, [pdf], "fig01_mechanism", figure_title("fig01_mechanism"))
    assert figure_title("fig01_mechanism") == "causalpos fig01_mechanism: Figure 1: the mechanism on three tokens"
    assert b"/Title (causalpos fig01_mechanism: Figure 1: the mechanism on three tokens)" in pdf.read_bytes()
