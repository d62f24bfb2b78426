"""The pattern ablation (issue 27): what it subtracts (causalpos.models.pattern_ablation) and the intervention that
subtracts it (models.intervention), checked against an independent eager attention written out here."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, AttentionInterface

from causalpos.models import pattern_ablation as pa
from causalpos.models import intervention
from causalpos.models.intervention import ABLATION_ATTENTION, ablate, mean_score_maps, sequence_losses
from causalpos.tril import packed_pairs, packed_size
from helpers import eager_softmax_inputs
from test_heads import SEQ, VOCAB, WINDOW, save

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return save("llama_gqa", tmp_path_factory.mktemp("llama"))  # 6 query heads on 2 key heads


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    return save("gemma3_gqa", tmp_path_factory.mktemp("gemma"))  # layer 0 slides, layer 1 is global


def load(folder, attention=ABLATION_ATTENTION):
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attention, dtype=torch.float32).eval()


def ids(n=8, seed=0, seq=SEQ):
    return np.random.default_rng(seed).integers(0, VOCAB, size=(n, seq))


# ---------------------------------------------------------------- what is subtracted


def random_maps(layers=3, seq=SEQ, seed=0, hidden_band=None):
    """Packed maps [layers, pairs]; NaN on the bands >= hidden_band of layer 0 (a sliding window's)."""
    maps = np.random.default_rng(seed).normal(size=(layers, packed_size(seq)))
    if hidden_band is not None:
        query, key = packed_pairs(seq)
        maps[0, query - key >= hidden_band] = np.nan
    return maps


def test_the_parts_add_up_and_the_pattern_has_no_band_mean():
    maps = random_maps(hidden_band=WINDOW)
    relative, pattern = pa.band_split(maps)
    query, key = packed_pairs(SEQ)
    inside = np.isfinite(maps) & (key >= 1)
    np.testing.assert_allclose((relative + pattern)[inside], maps[inside], atol=1e-12)
    assert not relative[~inside].any() and not pattern[~inside].any()  # key 0 and hidden pairs untouched
    for layer in range(len(maps)):
        for band in range(SEQ):
            on = inside[layer] & (query - key == band)
            if on.any():
                assert abs(pattern[layer, on].mean()) < 1e-12  # "the map minus its diagonal means"
                assert np.ptp(relative[layer, on]) < 1e-12  # one value per band


def test_a_relative_map_has_no_pattern_and_ablating_it_changes_nothing(llama):
    query, key = packed_pairs(SEQ)
    toeplitz = np.sin(query - key)[None].repeat(2, axis=0) + np.where(key == 0, 5.0, 0.0)  # a sink at key 0
    assert np.abs(pa.band_split(toeplitz)[1]).max() < 1e-12
    model, tokens = load(llama), ids()
    biases = pa.condition_biases(toeplitz, seed=0)
    unmodified = sequence_losses(model, tokens, None, 4, CPU)
    np.testing.assert_array_equal(
        sequence_losses(model, tokens, torch.from_numpy(pa.square(biases["pattern"]).astype(np.float32)), 4, CPU),
        unmodified,
    )
    # the sink is the non-relative part of this map once key 0 joins the bands
    assert np.abs(biases["pattern_sink"][:, key == 0]).max() > 1


def test_sequence_losses_are_the_models_own_loss_of_each_sequence(llama):
    """Computed a sequence at a time from a batch's logits: each is what transformers' loss gives for that
    sequence alone (labels = its tokens, shifted inside the model)."""
    model, tokens = load(llama), ids()
    ours = sequence_losses(model, tokens, None, 3, CPU)  # a batch size that leaves a short last batch
    with torch.no_grad():
        theirs = [
            model(input_ids=torch.from_numpy(t[None]).long(), labels=torch.from_numpy(t[None]).long()).loss
            for t in tokens
        ]
    np.testing.assert_allclose(ours, [float(x) for x in theirs], rtol=1e-5)


def test_the_control_has_the_patterns_values_in_each_band_and_not_its_order():
    maps = random_maps(hidden_band=WINDOW)
    biases = pa.condition_biases(maps, seed=7)
    query, key = packed_pairs(SEQ)
    for layer in range(len(maps)):
        for band in range(SEQ):
            on = np.isfinite(maps[layer]) & (key >= 1) & (query - key == band)
            np.testing.assert_array_equal(np.sort(biases["shuffled"][layer, on]), np.sort(biases["pattern"][layer, on]))
    assert not np.array_equal(biases["shuffled"], biases["pattern"])
    assert pa.bias_rms(biases["shuffled"], maps) == pytest.approx(pa.bias_rms(biases["pattern"], maps), rel=1e-12)
    np.testing.assert_array_equal(pa.condition_biases(maps, seed=7)["shuffled"], biases["shuffled"])  # seeded


# ---------------------------------------------------------------- the intervention against eager attention


def explicit_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, test_bias=None, test_logits=None, **kwargs
):
    """Attention written out: q k^T scaling - B, -inf above the diagonal, softmax, times V (no SDPA)."""
    groups = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    logits = query @ k.transpose(-1, -2) * scaling
    if test_bias is not None:
        logits = logits - test_bias[module.layer_idx]
    if test_logits is not None:
        test_logits.append(logits.detach().double().clone())
    seq = query.shape[2]
    logits = logits.masked_fill(~torch.ones(seq, seq, dtype=torch.bool).tril(), float("-inf"))
    return (torch.softmax(logits, dim=-1) @ v).transpose(1, 2), None


AttentionInterface.register("test_explicit", explicit_attention)


def test_intervened_logits_are_the_eager_logits_minus_the_pattern(llama, monkeypatch):
    model, tokens = load(llama), ids()
    maps = mean_score_maps(model, tokens[:4], 4, CPU)
    bias = torch.from_numpy(pa.square(pa.condition_biases(maps, seed=0)["pattern"]).astype(np.float32))
    assert bias.abs().max() > 0.05  # a pattern to subtract
    eager = eager_softmax_inputs(load(llama, "eager"), tokens[4:], monkeypatch)
    explicit, caught = load(llama, "test_explicit"), []
    with torch.no_grad():
        expected = explicit(input_ids=torch.from_numpy(tokens[4:]), test_bias=bias, test_logits=caught).logits
        got = model(input_ids=torch.from_numpy(tokens[4:]), causalpos_bias=bias).logits
    query, key = np.tril_indices(SEQ)
    # layer 0 reads the same inputs with or without the bias: its logits are eager's minus B, pair by pair
    np.testing.assert_allclose(
        caught[0][..., query, key], eager[0][..., query, key] - bias[0][query, key].double(), atol=1e-5
    )
    # and the whole model under the intervention is the written-out attention's (later layers included)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=2e-5)
    with torch.no_grad():  # no bias: transformers' SDPA model
        plain = load(llama, "sdpa")(input_ids=torch.from_numpy(tokens[4:])).logits
        np.testing.assert_allclose(
            model(input_ids=torch.from_numpy(tokens[4:])).logits.numpy(), plain.numpy(), atol=1e-6
        )


def test_the_pattern_is_gone_from_layer_0_on_the_sequences_it_was_estimated_on(llama):
    model, tokens = load(llama), ids(12)
    maps = mean_score_maps(model, tokens, 4, CPU)
    biases = pa.condition_biases(maps, seed=0)
    recorder = intervention.ScoreRecorder(model.config.num_hidden_layers, SEQ, CPU)
    bias = torch.from_numpy(pa.square(biases["pattern"]).astype(np.float32))
    with torch.no_grad():
        for start in range(0, len(tokens), 4):  # the recorder sees the logits before the bias: subtract it here
            model(
                input_ids=torch.from_numpy(tokens[start : start + 4]), causalpos_bias=bias, causalpos_recorder=recorder
            )
    again, _ = recorder.mean_and_sem()
    np.testing.assert_allclose(again[0], maps[0], atol=1e-5)  # layer 0's inputs do not see the bias
    left = pa.band_split(again[:1] - biases["pattern"][:1])[1]
    assert np.abs(left).max() < 1e-5 < np.abs(biases["pattern"][0]).max()
    assert np.abs(pa.band_split(again[1:] - biases["pattern"][1:])[1]).max() > 1e-3  # deeper: inputs changed


def test_a_sliding_window_stays_a_window_under_the_intervention(gemma):
    model, tokens = load(gemma), ids(6)
    query, key = np.tril_indices(SEQ)
    outside = np.zeros((2, SEQ, SEQ), dtype=np.float32)
    outside[0, query[query - key >= WINDOW], key[query - key >= WINDOW]] = 1e4  # layer 0 slides: pairs it hides
    with torch.no_grad():
        plain = model(input_ids=torch.from_numpy(tokens)).logits
        hidden = model(input_ids=torch.from_numpy(tokens), causalpos_bias=torch.from_numpy(outside)).logits
    np.testing.assert_allclose(hidden.numpy(), plain.numpy(), atol=1e-5)
    maps = mean_score_maps(model, tokens, 3, CPU)
    assert np.isnan(maps[0][query - key >= WINDOW]).all() and np.isfinite(maps[1]).all()
    losses, sizes = ablate(model, tokens[:3], tokens[3:], 3, CPU, seed=0)
    assert set(losses) == set(pa.CONDITIONS) and all(np.isfinite(v).all() for v in losses.values())
    assert sizes["none"] == 0 and sizes["pattern"] == pytest.approx(sizes["shuffled"])


# ---------------------------------------------------------------- the table's arithmetic


def test_gap_and_effect_pair_each_long_sequence_with_its_blocks():
    rng = np.random.default_rng(1)
    losses = {(f, c): rng.normal(5, 0.1, size=12 // f) for f in (1, 2, 4) for c in pa.CONDITIONS}
    rows = pa.ablation_rows(losses, {k: 0.0 for k in losses}, {1: 8, 2: 16, 4: 32}, "m", "trained", 3, 5)
    assert list(rows.columns) == pa.ABLATION_COLUMNS and len(rows) == 3 * len(pa.CONDITIONS)
    row = rows.set_index(["factor", "condition"])
    for f in (1, 2, 4):
        for c in pa.CONDITIONS:
            # every block is used at every factor: the mean gap is the difference of the mean losses
            assert row.loc[(f, c), "gap"] == pytest.approx(losses[(f, c)].mean() - losses[(1, c)].mean())
            assert row.loc[(f, c), "delta"] == pytest.approx(losses[(f, c)].mean() - losses[(f, "none")].mean())
    assert row.loc[(4, "pattern"), "effect"] == pytest.approx(
        row.loc[(4, "pattern"), "gap"] - row.loc[(4, "shuffled"), "gap"]
    )
    paired = losses[(4, "pattern")] - losses[(1, "pattern")].reshape(3, 4).mean(axis=1)
    assert row.loc[(4, "pattern"), "gap_sem"] == pytest.approx(paired.std(ddof=1) / np.sqrt(3))
    assert np.isnan(row.loc[(1, "pattern"), "effect"]) and row.loc[(1, "none"), "delta"] == 0
    assert (rows["seed"] == 3).all() and (rows["n_estimate"] == 5).all()


def test_a_trained_models_table_on_held_out_blocks(llama, tmp_path, caplog):
    from causalpos.models.intervention import ablate_trained, split_heldout

    blocks = tmp_path / "tokens"
    blocks.mkdir()
    heldout = ids(40, seed=4, seq=8)
    np.save(blocks / "heldout.npy", heldout)
    np.save(blocks / "train.npy", heldout[:4])
    (blocks / "blocks.json").write_text('{"block_len": 8, "vocab_size": %d}' % VOCAB)
    assert split_heldout(40, [1, 2, 4], 5, 3) == (20, 12)
    with pytest.raises(ValueError, match="evaluation.ablation_sequences"):
        split_heldout(40, [1, 2, 4], 5, 10)
    with caplog.at_level(logging.INFO, logger="causalpos"):
        table = ablate_trained(
            llama,
            blocks,
            [1, 2, 4],
            max_sequences=5,
            n_estimate=3,
            seed=0,
            batch_size=4,
            model_name="tiny",
            training_seed=2,
            progress_terminal=False,
        )
    # a long job says how far it is (issue 42): at least every 5% of the tokens it puts through, to 100%; the
    # total is every factor's 3 x factor estimation blocks once and its 20 evaluation blocks once per condition
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pattern ablation tiny:")]
    total = sum(3 * f * 8 + 20 * 8 * len(pa.CONDITIONS) for f in (1, 2, 4))
    assert len(lines) >= 10 and lines[-1].startswith(f"pattern ablation tiny: {total}/{total} tokens (100%)")
    assert set(table["factor"]) == {1, 2, 4} and set(table["condition"]) == set(pa.CONDITIONS)
    assert table.set_index(["factor", "condition"]).loc[(4, "none"), "n_sequences"] == 5
    assert (table["seed"] == 2).all() and (table["model"] == "tiny").all()
    none = table[table["condition"] == "none"]
    assert (none["delta"] == 0).all() and (none["bias_rms"] == 0).all()
    assert isinstance(table, pd.DataFrame) and table["loss"].notna().all()


def test_the_figure_shows_each_models_effects_over_its_seeds_and_the_llms_losses():
    from causalpos.figures.ablation import fig_pattern_ablation

    rng = np.random.default_rng(2)

    def table(model, kind, seed, factors):
        losses = {(f, c): rng.normal(5, 0.1, size=8 // f) for f in factors for c in pa.CONDITIONS}
        return pa.ablation_rows(losses, {k: 0.0 for k in losses}, {f: 16 * f for f in factors}, model, kind, seed, 4)

    frame = pd.concat(
        [
            table("nope", "trained", 0, (1, 2, 4)),
            table("nope", "trained", 1, (1, 2, 4)),
            table("rope", "trained", 0, (1, 2, 4)),
            table("tiny_llm", "pretrained", -1, (1,)),
        ]
    )
    fig = fig_pattern_ablation({"pattern_ablation": frame}, {"model_labels": {"tiny_llm": "Tiny LLM"}})
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [
        "NoPE: 2 seeds\n(±SE over seeds)",
        "RoPE: 1 seed\n(±SE over sequences)",
        "Pretrained LLMs\n(±SE over sequences)",
    ]
    nope = frame[(frame["model"] == "nope") & (frame["condition"] == "pattern") & (frame["factor"] == 4)]
    drawn = [
        bars.lines[0].get_ydata()
        for bars in fig.axes[0].containers
        if bars.get_label() == "non-relative pattern removed"
    ]
    assert drawn and drawn[0][-1] == pytest.approx(nope["effect"].mean())  # the mean over the two seeds at 4x
    assert "Tiny LLM" in fig.axes[2].get_xticklabels()[0].get_text()
    # every marker and error bar inside its panel: a symmetric log scale's autoscale cut the largest at the top, as
    # the default run's RoPE had it at 2x (relative part removed: 0.0096 ± 0.0015 beside effects of 1e-4)
    rope = (frame["model"] == "rope") & (frame["factor"] == 2)
    frame.loc[rope & (frame["condition"] == "relative"), ["effect", "effect_sem"]] = [0.0096, 0.0015]
    frame.loc[rope & (frame["condition"] == "none"), ["effect", "effect_sem"]] = [-0.00037, 0.00023]
    fig = fig_pattern_ablation({"pattern_ablation": frame}, {})
    fig.draw_without_rendering()
    for ax in fig.axes[:2]:
        box = ax.get_window_extent()
        for bars in ax.containers:  # each error bar's ends at least a marker's size (6 px) inside the panel
            ends = np.concatenate([np.asarray(s) for s in bars.lines[2][0].get_segments()])
            y = ax.transData.transform(ends)[:, 1]
            assert box.y0 + 6 < y.min() and y.max() < box.y1 - 6, (ax.get_title(), bars.get_label())
