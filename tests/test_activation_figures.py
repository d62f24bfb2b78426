"""Activation figures render from small synthetic extraction tables; layout and colour scales hold."""

import numpy as np
import pandas as pd
import pytest

from causalpos.figures.registry import FIGURES
from causalpos.figures.render import DRAW
from causalpos.figures.style import PANEL_SIZE

# the figures drawn from the extraction tables
ACTIVATION_FIGURES = {figure: DRAW[figure] for figure, spec in FIGURES.items() if spec.models}

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
            frames.append(pd.DataFrame({
                "model": model, "kind": kind, "layer": layer, "query_pos": q, "key_pos": k,
                "score_mean": matrix[q, k], "score_sem": 0.05, "score_diagnorm": band_centred(matrix)[q, k],
                "n_sequences": 20, "seq_len": n}))
    return pd.concat(frames, ignore_index=True)


def intermediates_table():
    n = 10
    q, k = lower(n)
    rng = np.random.default_rng(1)
    frames = [pd.DataFrame({"model": "nope", "layer": int(stage in "hi"), "stage": stage, "query_pos": q,
                            "key_pos": k, "value": rng.normal(size=len(q)) + 5.0 * (q == k),
                            "n_sequences": 20, "seq_len": n})
              for stage in "abcdefghi"]
    return pd.concat(frames, ignore_index=True)


def probe_table():
    rows = []
    for model, (kind, n_layers, n) in MODELS.items():
        for layer in range(n_layers + 1):
            rows.append({"model": model, "kind": kind, "layer": layer, "mae": n / 4 / (1 + layer),
                         "mae_baseline": n / 4, "n_train": 100, "n_test": 40, "seq_len": n})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def tables():
    return {"scores": scores_table(), "intermediates": intermediates_table(), "probe": probe_table()}


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
    return [ax for ax in fig.axes if ax.get_xlabel() == "Key position"]


def panel_data(ax):
    return np.ma.filled(ax.collections[0].get_array(), np.nan)


@pytest.mark.parametrize("figure_id", sorted(ACTIVATION_FIGURES))
def test_every_figure_renders(figure_id, drawn):
    fig, path = drawn(figure_id)
    assert path.is_file() and path.stat().st_size > 5000
    for ax in heatmap_axes(fig):
        assert ax.get_ylabel() == "Query position"


def test_intermediates_grid(drawn):
    fig, _ = drawn("fig03_intermediates")
    panels = heatmap_axes(fig)
    assert len(panels) == 9 and len(fig.axes) == 18  # nine panels, nine colour bars
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


def test_model_layers_diverging_and_centred(drawn):
    fig, _ = drawn("fig08_model_layers")
    panels = heatmap_axes(fig)
    assert [ax.get_title() for ax in panels] == ["Layer 1", "Layer 2", "Layer 3"]
    for ax in panels:
        low, high = ax.collections[0].get_clim()
        assert low == pytest.approx(-high) and high > 0
        assert ax.collections[0].get_cmap().name == "coolwarm"


def test_all_layers_wraps_rows_of_six(tables):
    fig = ACTIVATION_FIGURES["fig_all_layers"](tables, {"model": "smol"})
    panels = heatmap_axes(fig)
    assert len(panels) == 14  # 7 layers, raw and diagonal-normalised
    assert fig.get_size_inches()[0] == pytest.approx(6 * PANEL_SIZE[0])
    grids = {ax.get_subplotspec().get_geometry()[:2] for ax in panels}
    assert grids == {(2, 6)}  # per block: layers 1-6, then layer 7 on a second row
    cells = [ax.get_subplotspec().num1 for ax in panels]
    assert cells == list(range(7)) * 2
    titles = [ax.get_title() for ax in panels]
    assert titles[:7] == titles[7:] == [f"Layer {k}" for k in range(1, 8)]
    three = ACTIVATION_FIGURES["fig_all_layers"](tables, {"model": "nope", "max_columns": 2})
    assert three.get_size_inches()[0] == pytest.approx(2 * PANEL_SIZE[0])


def test_big_matrices_are_block_averaged_with_true_ticks(tables):
    fig = ACTIVATION_FIGURES["fig_all_layers"](tables, {"model": "smol", "heatmap_max_size": 4,
                                                        "quantile_clip": None})
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


def test_llms_default_to_pretrained_and_clip_outliers(tables):
    scores = tables["scores"].copy()
    spike = (scores["model"] == "smol") & (scores["layer"] == 1) & (scores["query_pos"] == 11) & (
        scores["key_pos"] == 1)
    scores.loc[spike, "score_diagnorm"] = 1000.0
    fig = ACTIVATION_FIGURES["fig05_llms"]({"scores": scores}, {})
    panels = heatmap_axes(fig)
    assert [ax.get_title() for ax in panels] == [f"Layer {k}" for k in range(1, 5)]  # smol only, first 4
    low, high = panels[1].collections[0].get_clim()
    assert low == pytest.approx(-high) and high < 300  # the 99% quantile, not the spike
    full = ACTIVATION_FIGURES["fig05_llms"]({"scores": scores}, {"quantile_clip": None, "models": ["smol", "nope"]})
    assert heatmap_axes(full)[1].collections[0].get_clim()[1] == pytest.approx(1000.0)
    assert len(heatmap_axes(full)) == 4 + 3


def test_nope_vs_rope_difference_and_shared_scale(drawn, tables):
    fig, _ = drawn("figC1_nope_vs_rope")
    panels = heatmap_axes(fig)
    assert len(panels) == 15  # 3 layers x (2 raw, 2 diagonal-normalised, 1 difference)
    by_column = [panels[c::5] for c in range(5)]  # one row per layer, five columns
    assert [ax.get_title() for ax in by_column[4]] == ["NoPE − RoPE,\ndiag.-normalised\nLayer 1", "Layer 2",
                                                        "Layer 3"]
    s = tables["scores"]
    layer2 = [s.query(f"model == '{m}' and layer == 1") for m in ("nope", "rope")]
    mats = []
    for rows in layer2:
        m = np.full((10, 10), np.nan)
        m[rows["query_pos"], rows["key_pos"]] = rows["score_diagnorm"]
        mats.append(m)
    np.testing.assert_allclose(panel_data(by_column[4][1]), mats[0] - mats[1])
    assert by_column[2][1].collections[0].get_clim() == by_column[3][1].collections[0].get_clim()


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


@pytest.mark.parametrize("figure_id, tables_kept, options, message", [
    ("fig08_model_layers", ["scores"], {"model": "absent"}, "absent"),
    ("fig_all_layers", ["scores"], {"model": "absent"}, "absent"),
    ("fig03_intermediates", ["scores"], {}, "intermediates"),
    ("fig03_intermediates", ["intermediates"], {"model": "rope"}, "rope"),
    ("fig03_intermediates", ["intermediates"], {"layer": 1}, "stage 'a'"),
    ("fig05_llms", ["scores"], {"models": ["nope", "absent"]}, "absent"),
    ("figC1_nope_vs_rope", ["scores"], {"compare": ["nope", "absent"]}, "absent"),
    ("figM1_nonrelativeness", ["intermediates"], {}, "scores"),
    ("figM2_increasing_fraction", ["probe"], {}, "scores"),
    ("figM3_position_probe", ["scores"], {}, "probe"),
])
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
        ACTIVATION_FIGURES["figM3_position_probe"]({"probe": tables["probe"].drop(columns="mae_baseline")}, {})
