"""Activation figures render from small synthetic extraction tables; layout and colour scales hold."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from causalpos.figures.activations import all_layers_pages
from causalpos.catalogue.figures import FIGURES
from causalpos.analysis.summary import increasing_fraction, nonrelativeness, probe_summary
from causalpos.figures.render import drawer, render_figure
from causalpos.figures.style import MAX_ASPECT, PANEL_SIZE
from causalpos.workflow.job import Job, run_job

# the figures drawn from the extraction tables
ACTIVATION_FIGURES = {figure: drawer(figure) for figure, spec in FIGURES.items() if spec.models}

MODELS = {"nope": ("trained", 3, 10), "rope": ("trained", 3, 10), "smol": ("pretrained", 7, 12)}
PLOT = dict(cmap="viridis", diverging_cmap="coolwarm", dpi=50, formats=["png"], font_scale=1.0, unknown="ignored")


def lower(n):
    return np.nonzero(np.tril(np.ones((n, n), dtype=bool)))


def band_centred(matrix):
    n = matrix.shape[0]
    out = np.full_like(matrix, np.nan)
    for offset in range(n):
        i = np.arange(offset, n)
        out[i, i - offset] = matrix[i, i - offset] - matrix[i, i - offset].mean()
    return out


def scores_table():
    rng = np.random.default_rng(0)
    frames = []
    for model, (kind, n_layers, n) in MODELS.items():
        q, k = lower(n)
        i, j = np.indices((n, n))
        for layer in range(n_layers):
            matrix = np.sin(0.7 * (i - j)) + (layer + 1) * 0.3 * np.log1p(j) + 0.05 * rng.normal(size=(n, n))
            matrix[:, 0] += 3.0  # attention sink
            frames.append(
                pd.DataFrame(
                    {
                        "model": model,
                        "kind": kind,
                        "layer": layer,
                        "query_pos": q,
                        "key_pos": k,
                        "score_mean": matrix[q, k],
                        "score_sem": 0.05,
                        "score_diagnorm": band_centred(matrix)[q, k],
                        "n_sequences": 20,
                        "seq_len": n,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def intermediates_table():
    n = 10
    q, k = lower(n)
    rng = np.random.default_rng(1)
    frames = [
        pd.DataFrame(
            {
                "model": "nope",
                "layer": int(stage in "hi"),
                "stage": stage,
                "query_pos": q,
                "key_pos": k,
                "value": rng.normal(size=len(q)) + 5.0 * (q == k),
                "n_sequences": 20,
                "seq_len": n,
            }
        )
        for stage in "abcdefghi"
    ]
    return pd.concat(frames, ignore_index=True)


def probe_table():
    rows = []
    for model, (kind, n_layers, n) in MODELS.items():
        for layer in range(n_layers + 1):
            rows.append(
                {
                    "model": model,
                    "kind": kind,
                    "layer": layer,
                    "mae": n / 4 / (1 + layer),
                    "mae_baseline": n / 4,
                    "n_train": 100,
                    "n_test": 40,
                    "seq_len": n,
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def tables():
    scores, probe = scores_table(), probe_table()
    # rule summary's tables, made by its functions (analysis.summary), for figures M1-M3
    return {
        "scores": scores,
        "intermediates": intermediates_table(),
        "probe": probe,
        "nonrelativeness": nonrelativeness(scores),
        "increasing_fraction": increasing_fraction(scores),
        "position_probe": probe_summary(probe),
    }


@pytest.fixture(scope="module")
def drawn(tables, tmp_path_factory):
    """Each figure with default options, drawn and saved once (saving runs the layout engine)."""
    folder = tmp_path_factory.mktemp("figures")
    cache = {}

    def get(figure_id):
        if figure_id not in cache:
            fig = ACTIVATION_FIGURES[figure_id](tables, dict(PLOT))
            path = folder / f"{figure_id}.png"
            fig.savefig(path, dpi=PLOT["dpi"])
            cache[figure_id] = fig, path
        return cache[figure_id]

    return get


def heatmap_axes(fig):
    """The heatmap panels (not their colour bars), in drawing order."""
    return [ax for ax in fig.axes if ax.collections and getattr(ax.collections[0], "colorbar", None) is not None]


def panel_data(ax):
    return np.ma.filled(ax.collections[0].get_array(), np.nan)


@pytest.mark.parametrize("figure_id", sorted(ACTIVATION_FIGURES))
def test_every_figure_renders(figure_id, drawn):
    fig, path = drawn(figure_id)
    assert path.is_file() and path.stat().st_size > 5000
    panels = heatmap_axes(fig)
    if panels:
        assert panels[0].get_ylabel() == "Query position"  # named once per row, in the first column
    assert {ax.get_ylabel() for ax in panels} <= {"Query position", ""}
    width, height = fig.get_size_inches()
    assert height <= MAX_ASPECT * width * (1 + 1e-12)  # shown whole in the report's viewer (float rounding aside)


def test_intermediates_grid(drawn):
    fig, _ = drawn("fig03_intermediates")
    panels = heatmap_axes(fig)
    assert len(panels) == 9 and len(fig.axes) == 19  # nine panels, nine colour bars, one empty cell
    width, height = fig.get_size_inches()
    assert height < 0.5 * width  # 2 rows of 5: shown whole in the report's window
    assert [ax.get_title()[:3] for ax in panels] == [f"({s})" for s in "abcdefghi"]
    assert panels[0].get_title() == "(a) LN(X)"
    assert "Layer 1" in fig._suptitle.get_text() and "Layer 2" in fig._suptitle.get_text()


def test_intermediates_panels_hold_their_stage(tables):
    table = tables["intermediates"]
    fig = ACTIVATION_FIGURES["fig03_intermediates"](tables, {})
    rows = table[table["stage"] == "h"]
    expected = np.full((10, 10), np.nan)
    expected[rows["query_pos"], rows["key_pos"]] = rows["value"]
    np.testing.assert_allclose(panel_data(heatmap_axes(fig)[7]), expected)  # NaN above the diagonal too


def test_model_layers_raw_then_diagonal_normalised(tables):
    """Figure 8 as the paper draws it (raw scores, each panel its own range, rocket), then diagonal-normalised;
    centred_diagnorm centres the second kind on 0 in the diverging map."""
    fig = ACTIVATION_FIGURES["fig08_model_layers"](tables, {})
    panels = heatmap_axes(fig)
    assert [ax.get_title() for ax in panels] == ["Layer 1", "Layer 2", "Layer 3"] * 2
    rows = tables["scores"].query("model == 'nope' and layer == 2")
    for ax, value in ((panels[2], "score_mean"), (panels[5], "score_diagnorm")):
        expected = np.full((10, 10), np.nan)
        expected[rows["query_pos"], rows["key_pos"]] = rows[value]
        np.testing.assert_allclose(panel_data(ax), expected)
        assert ax.collections[0].get_clim() == pytest.approx((np.nanmin(expected), np.nanmax(expected)))
        assert ax.collections[0].get_cmap().name == "rocket"
    centred = heatmap_axes(ACTIVATION_FIGURES["fig08_model_layers"](tables, {"centred_diagnorm": True}))
    for ax in centred[3:]:
        low, high = ax.collections[0].get_clim()
        assert low == pytest.approx(-high) and high > 0
        assert ax.collections[0].get_cmap().name == "coolwarm"
    assert centred[0].collections[0].get_cmap().name == "rocket"


def test_all_layers_pages_bound_the_layers_per_page(tables):
    pages = all_layers_pages(tables, {"model": "smol", "layers_per_page": 3})
    assert [kind for kind, _ in pages] == ["raw"] * 3 + ["diagnorm"] * 3
    assert [layers for _, layers in pages[:3]] == [[0, 1, 2], [3, 4], [5, 6]]  # 7 layers: 3, 2, 2
    assert pages[3:] == [("diagnorm", layers) for _, layers in pages[:3]]
    thirty = pd.concat([tables["scores"].query("model == 'nope' and layer == 0").assign(layer=k) for k in range(30)])
    runs = [layers for kind, layers in all_layers_pages({"scores": thirty}, {"model": "nope"}) if kind == "raw"]
    assert [len(run) for run in runs] == [8, 8, 7, 7]  # at most LAYERS_PER_PAGE, pages alike
    assert sum(runs, []) == list(range(30))


@pytest.mark.parametrize(
    "kind, options, cmap, centred",
    [
        ("raw", {}, "rocket", False),
        ("diagnorm", {}, "rocket", False),
        ("diagnorm", {"centred_diagnorm": True}, "coolwarm", True),
        ("raw", {"cmap": "viridis"}, "viridis", False),
    ],
)
def test_all_layers_page_fits_a_screen(kind, options, cmap, centred, tables):
    fig = ACTIVATION_FIGURES["fig_all_layers"](
        tables, {"model": "smol", "kind": kind, "layers": [1, 2, 3, 4, 5], **options}
    )
    panels = heatmap_axes(fig)
    assert [ax.get_title() for ax in panels] == [f"Layer {k}" for k in range(2, 7)]
    assert {ax.get_subplotspec().get_geometry()[:2] for ax in panels} == {(2, 3)}  # 5 panels: 2 rows of 3
    width, height = fig.get_size_inches()
    assert width == pytest.approx(3 * PANEL_SIZE[0]) and height < width  # wider than tall
    assert "layers 2-6 of 7" in fig.texts[0].get_text()
    for ax in panels:
        assert ax.collections[0].get_cmap().name == cmap
    low, high = panels[0].collections[0].get_clim()
    assert (low == pytest.approx(-high)) == centred
    with pytest.raises(ValueError, match="no layer"):
        ACTIVATION_FIGURES["fig_all_layers"](tables, {"model": "smol", "layers": [7]})
    with pytest.raises(ValueError, match="kind"):
        ACTIVATION_FIGURES["fig_all_layers"](tables, {"model": "smol", "kind": "other"})


def test_all_layers_writes_its_pages_and_drops_stale_ones(tables, tmp_path):
    source = tmp_path / "scores.parquet"
    tables["scores"].to_parquet(source)
    folder = tmp_path / "fig_all_layers_smol"
    folder.mkdir()
    (folder / "raw_layers01-09.png").write_bytes(b"stale")
    run_job(
        Job(
            "model_figure",
            input={"scores": str(source)},
            output={"folder": str(folder)},
            params={"options": {**PLOT, "model": "smol", "layers_per_page": 4, "formats": ["png", "pdf"]}},
        )
    )
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(
        f"{kind}_layers{span}.{ext}"
        for kind in ("raw", "diagnorm")
        for span in ("01-04", "05-07")
        for ext in ("png", "pdf")
    )


def test_big_matrices_are_block_averaged_with_true_ticks(tables):
    fig = ACTIVATION_FIGURES["fig_all_layers"](
        tables, {"model": "smol", "kind": "raw", "heatmap_max_size": 4, "quantile_clip": None}
    )
    ax = heatmap_axes(fig)[0]
    shown = panel_data(ax)
    assert shown.shape == (4, 4)  # 12 positions in blocks of 3
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "3", "6", "9"]
    rows = tables["scores"].query("model == 'smol' and layer == 0")
    full = np.full((12, 12), np.nan)
    full[rows["query_pos"], rows["key_pos"]] = rows["score_mean"]
    assert shown[3, 1] == pytest.approx(full[9:12, 3:6].mean())  # a block below the diagonal
    assert shown[1, 1] == pytest.approx(np.nanmean(full[3:6, 3:6]))  # a diagonal block: visible cells only
    assert np.isnan(shown[0, 2])


def long_scores(n_layers: int, n: int, window: int) -> pd.DataFrame:
    """Noise (the worst case for compression) at n positions, NaN where a sliding window hides the key."""
    rng = np.random.default_rng(2)
    q, k = lower(n)
    frames = []
    for layer in range(n_layers):
        values = rng.normal(size=len(q))
        values[q - k >= window] = np.nan
        frames.append(
            pd.DataFrame(
                {
                    "model": "long",
                    "kind": "pretrained",
                    "layer": layer,
                    "query_pos": q,
                    "key_pos": k,
                    "score_mean": values,
                    "score_sem": 0.0,
                    "score_diagnorm": values,
                    "n_sequences": 1,
                    "seq_len": n,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def test_a_full_page_of_long_maps_embeds_in_the_report(tmp_path):
    """A page of 8 layers at 512 positions (drawn as 256 x 256 like 1,024) stays under 1.4 MB as PDF (under
    Chromium's 2 MB data URLs once base64-encoded), its tick labels few and apart, hidden pairs blank."""
    table = {"scores": long_scores(8, 512, window=384)}
    out = tmp_path / "page.pdf"
    render_figure("fig_all_layers", table, {**PLOT, "model": "long", "dpi": 150}, [out])
    assert out.stat().st_size < 1.4e6
    fig = ACTIVATION_FIGURES["fig_all_layers"](table, {"model": "long"})
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    panels = heatmap_axes(fig)
    assert len(panels) == 8
    for ax in panels:
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            assert 2 <= len(labels) <= 4
            boxes = [label.get_window_extent(renderer) for label in labels]
            assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "200", "400"]  # real positions, 2 per cell
    shown = panels[0].images[0].get_array()
    assert shown.mask[255, 0] and not shown.mask[255, 100]  # beyond the window: blank


def test_llms_default_to_pretrained_and_clip_outliers(tables):
    scores = tables["scores"].copy()
    spike = (
        (scores["model"] == "smol") & (scores["layer"] == 1) & (scores["query_pos"] == 11) & (scores["key_pos"] == 1)
    )
    scores.loc[spike, "score_diagnorm"] = 1000.0
    fig = ACTIVATION_FIGURES["fig05_llms"]({"scores": scores}, {})
    panels = heatmap_axes(fig)
    assert [ax.get_title() for ax in panels] == [f"Layer {k}" for k in range(1, 5)]  # smol only, first 4
    rows = scores.query("model == 'smol' and layer == 1")["score_diagnorm"]
    # the caption's scale: the 1% and 99% quantiles of the panel (not symmetric about 0), not the spike
    assert panels[1].collections[0].get_clim() == pytest.approx(tuple(np.quantile(rows, [0.01, 0.99])))
    assert panels[1].collections[0].get_clim()[1] < 300
    full = ACTIVATION_FIGURES["fig05_llms"]({"scores": scores}, {"quantile_clip": None, "models": ["smol", "nope"]})
    assert heatmap_axes(full)[1].collections[0].get_clim()[1] == pytest.approx(1000.0)
    assert len(heatmap_axes(full)) == 4 + 3


def test_nope_vs_rope_difference_and_shared_scale(drawn, tables):
    fig, path = drawn("figC1_nope_vs_rope")
    panels = heatmap_axes(fig)
    assert len(panels) == 9  # (NoPE, RoPE, difference) x 3 layers
    by_row = [panels[3 * r : 3 * r + 3] for r in range(3)]  # one row per kind, one column per layer
    assert [ax.get_title() for ax in by_row[2]] == ["Layer 1", "Layer 2", "Layer 3"]
    assert [sub._suptitle.get_text() for sub in fig.subfigs] == [
        "NoPE, diagonal-normalised",
        "RoPE, diagonal-normalised",
        "NoPE − RoPE, diagonal-normalised",
    ]
    s = tables["scores"]
    layer2 = [s.query(f"model == '{m}' and layer == 1") for m in ("nope", "rope")]
    mats = []
    for rows in layer2:
        m = np.full((10, 10), np.nan)
        m[rows["query_pos"], rows["key_pos"]] = rows["score_diagnorm"]
        mats.append(m)
    np.testing.assert_allclose(panel_data(by_row[0][1]), mats[0])
    np.testing.assert_allclose(panel_data(by_row[2][1]), mats[0] - mats[1])
    assert by_row[0][1].collections[0].get_clim() == by_row[1][1].collections[0].get_clim()
    assert by_row[0][1].collections[0].get_clim() != by_row[0][2].collections[0].get_clim()
    width, height = fig.get_size_inches()
    assert height / width <= MAX_ASPECT  # whole in the report's viewer


def test_summary_plots(drawn):
    fig, _ = drawn("figM2_increasing_fraction")
    ax = fig.axes[0]
    assert len(ax.containers) == 2 * len(MODELS)  # error bars: all keys and without key 0
    assert any(np.allclose(line.get_ydata(), 0.5) for line in ax.get_lines())
    fig, _ = drawn("figM1_nonrelativeness")
    assert len(fig.axes) == 3
    fig, _ = drawn("figM3_position_probe")
    ratio_lines = [line for line in fig.axes[1].get_lines() if len(line.get_xdata()) == 8]
    assert len(ratio_lines) == 1 and np.all(np.diff(ratio_lines[0].get_ydata()) < 0)  # smol: layers 0-7


@pytest.mark.parametrize(
    "figure_id, tables_kept, options, message",
    [
        ("fig08_model_layers", ["scores"], {"model": "absent"}, "absent"),
        ("fig_all_layers", ["scores"], {"model": "absent"}, "absent"),
        ("fig03_intermediates", ["scores"], {}, "intermediates"),
        ("fig03_intermediates", ["intermediates"], {"model": "rope"}, "rope"),
        ("fig03_intermediates", ["intermediates"], {"layer": 1}, "stage 'a'"),
        ("fig05_llms", ["scores"], {"models": ["nope", "absent"]}, "absent"),
        ("figC1_nope_vs_rope", ["scores"], {"compare": ["nope", "absent"]}, "absent"),
        ("figM1_nonrelativeness", ["scores"], {}, "nonrelativeness"),
        ("figM2_increasing_fraction", ["scores"], {}, "increasing_fraction"),
        ("figM3_position_probe", ["probe"], {}, "position_probe"),
    ],
)
def test_missing_inputs_are_named(figure_id, tables_kept, options, message, tables):
    with pytest.raises(ValueError, match=message):
        ACTIVATION_FIGURES[figure_id]({name: tables[name] for name in tables_kept}, options)


def test_missing_columns_and_no_pretrained_model(tables):
    trained = tables["scores"][tables["scores"]["kind"] == "trained"]
    with pytest.raises(ValueError, match="pretrained"):
        ACTIVATION_FIGURES["fig05_llms"]({"scores": trained}, {})
    with pytest.raises(ValueError, match="score_diagnorm"):
        ACTIVATION_FIGURES["fig08_model_layers"]({"scores": trained.drop(columns="score_diagnorm")}, {})
    with pytest.raises(ValueError, match="mae_baseline"):
        ACTIVATION_FIGURES["figM3_position_probe"](
            {"position_probe": tables["position_probe"].drop(columns="mae_baseline")}, {}
        )
