"""Issue 25's sliding-window test of a pretrained LLM (analysis.windows, rule window_test, claims 10d-10e).

Checked against independent computations: the region's non-relative share against a pandas groupby, the
"before" amplitude at S <= w against claim 8a's (triangles.band_statistics over the same pairs), the recursion's
causality (its first S positions do not depend on later ones), the stack read from transformers' own config
classes, and the whole job on a tiny random Gemma-3 written by the extraction itself.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, MistralConfig, Qwen2Config

from causalpos.catalogue.claims import merge_thresholds
from causalpos.analysis.claims.large_d import claim10_windows
from causalpos.analysis.claims.replicates import Field, LedgerInputs, amplitude
from causalpos.analysis.triangles import band_statistics
from causalpos.analysis.windows import (
    AttentionStack,
    attention_stack,
    layer_rows,
    predicted_amplitude,
    predicted_scores,
    query_ranges,
    region_pairs,
    region_share,
)
from causalpos.tril import packed_pairs, packed_size

WINDOW, SEQ, VOCAB = 6, 14, 61
TYPES = ["sliding_attention", "full_attention", "sliding_attention"]


def gemma_config(**extra) -> Gemma3TextConfig:
    return Gemma3TextConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=WINDOW,
        layer_types=TYPES,
        max_position_embeddings=64,
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
        **extra,
    )


def test_the_stack_of_gemma3s_config_class():
    stack = attention_stack(gemma_config().to_dict())
    assert stack.windows == (WINDOW, None, WINDOW)
    assert stack.rope_thetas == (1e4, 1e6, 1e4)
    assert stack.head_dim == 16 and stack.window == WINDOW
    assert [stack.layer_type(i) for i in range(3)] == ["sliding", "global", "sliding"]
    # Gemma-3-270M's own shape: 18 layers, every sixth global (transformers' default layer_types)
    real = attention_stack(Gemma3TextConfig(num_hidden_layers=18, sliding_window=512, head_dim=256).to_dict())
    assert [i for i, w in enumerate(real.windows) if w is None] == [5, 11, 17]
    assert set(real.windows) == {512, None}


def test_stacks_of_other_configs():
    assert attention_stack(LlamaConfig(num_hidden_layers=2).to_dict()) is None  # no window
    mistral = attention_stack(
        MistralConfig(num_hidden_layers=3, sliding_window=8, hidden_size=64, num_attention_heads=4).to_dict()
    )
    assert mistral.windows == (8, 8, 8) and mistral.head_dim == 16
    assert (
        attention_stack(Qwen2Config(num_hidden_layers=2, sliding_window=8, use_sliding_window=False).to_dict()) is None
    )
    # transformers 4's Gemma-3: two flat RoPE keys and a pattern instead of layer_types
    old = {
        "num_hidden_layers": 6,
        "sliding_window": 4,
        "sliding_window_pattern": 3,
        "rope_theta": 1e6,
        "rope_local_base_freq": 1e4,
        "head_dim": 8,
    }
    stack = attention_stack(old)
    assert stack.windows == (4, 4, None, 4, 4, None)
    assert stack.rope_thetas == (1e4, 1e4, 1e6, 1e4, 1e4, 1e6)


def test_region_share_against_a_groupby_and_invariances():
    size, window = 20, 7
    rng = np.random.default_rng(0)
    x = rng.normal(size=(packed_size(size), 3))
    positions = region_pairs(size, window, (window, 2 * window))
    query, key = packed_pairs(size)
    frame = pd.DataFrame({"band": (query - key)[positions], "s": x[positions, 1]})
    assert frame["band"].between(1, window - 1).all() and (key[positions] >= 1).all()
    centred = frame["s"] - frame.groupby("band")["s"].transform("mean")
    expected = (centred**2).mean() / frame["s"].var(ddof=0)
    assert region_share(x, size, positions)[1] == pytest.approx(expected, rel=1e-12)
    # unchanged by a scale and an offset of the scores; 0 for a function of i - j alone
    assert np.allclose(region_share(3.0 * x - 2.0, size, positions), region_share(x, size, positions))
    relative = np.cos(0.3 * (query - key))[:, None] + 0.0 * x
    assert np.allclose(region_share(relative, size, positions), 0.0, atol=1e-12)


def test_before_the_window_equals_claim_8as_amplitude_when_the_table_is_shorter():
    """At S <= w the region "before" is every pair with key >= 1: claim 8a's set, bands recentred without key 0."""
    size, window = 16, 32
    x = np.random.default_rng(1).normal(size=(packed_size(size), 40))
    assert query_ranges(window, size) == {"before": (0, size), "after": None}
    ours = amplitude(region_share(x, size, region_pairs(size, window, (0, size))))
    claim8 = amplitude(band_statistics(x, size)["share1"])
    assert np.allclose(ours, claim8, rtol=1e-10)


def test_the_recursion_of_a_stack_is_causal():
    stack = AttentionStack((4, None, 4, 4), (1e4, 1e6, 1e4, 1e4), 16)
    short, long = predicted_scores(stack, 10), predicted_scores(stack, 24)
    assert np.allclose(long[:, :10, :10], short, equal_nan=True, atol=1e-12)
    # a sliding layer gives keys 4 or more back no score; the global one scores every earlier key
    assert np.isnan(long[0][10, 6]) and np.isfinite(long[1][10, 0])


def test_layer_rows_pair_before_and_after():
    stack = AttentionStack((WINDOW, None, WINDOW), (1e4, 1e6, 1e4), 16)
    predicted = predicted_scores(stack, SEQ)
    x = np.random.default_rng(2).normal(size=(packed_size(SEQ), 31))
    rows = {r["region"]: r for r in layer_rows(Field(x, SEQ, "test"), 2, stack, predicted[2])}
    assert set(rows) == {"before", "after", "change"}
    assert (rows["before"]["query_from"], rows["before"]["query_to"]) == (0, WINDOW - 1)
    assert (rows["after"]["query_from"], rows["after"]["query_to"]) == (WINDOW, 2 * WINDOW - 1)  # [w, 2w)
    change = np.subtract(rows["after"]["replicates"], rows["before"]["replicates"])
    assert np.allclose(rows["change"]["replicates"], change)
    assert rows["change"]["predicted"] == pytest.approx(rows["after"]["predicted"] - rows["before"]["predicted"])
    # a table that stops before the window: "after" is the recursion's alone, over the whole region
    short = {
        r["region"]: r
        for r in layer_rows(
            Field(x[: packed_size(WINDOW)], WINDOW, "test"), 2, stack, predicted_scores(stack, 2 * WINDOW)[2]
        )
    }
    assert set(short) == {"before", "after"} and np.isnan(short["after"]["measured"])
    assert np.isfinite(short["after"]["predicted"]) and short["after"]["query_to"] == 2 * WINDOW - 1


@pytest.fixture(scope="module")
def tiny_gemma_run(tmp_path_factory):
    """A tiny random Gemma-3, extracted to the usual tables with its windows as trained and lifted (target
    window_control's two arms, the same sequences) and put through the window test's runner with both."""
    from causalpos.models.extract import ATTENTION_NAME, extract_to_files
    from causalpos.models.pretrained import load_for_extraction
    from causalpos.workflow.job import Job, run_job

    folder = tmp_path_factory.mktemp("window_test")
    torch.manual_seed(5)
    model = Gemma3ForCausalLM(gemma_config())
    with torch.no_grad():  # Gemma's norms start at weight 0 (a scale of 1): give them weights that matter
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.normal_(0.0, 0.5)
    model.save_pretrained(folder / "model")
    ids = np.random.default_rng(0).integers(0, VOCAB, size=(32, SEQ))
    arms = {}
    for arm in ("windowed", "lifted"):
        tables = {t: folder / arm / f"{t}.parquet" for t in ("scores", "intermediates", "probe", "groups")}
        tables["scores"].parent.mkdir()
        loaded, _ = load_for_extraction(
            str(folder / "model"),
            "test",
            torch.device("cpu"),
            ATTENTION_NAME,
            with_tokenizer=False,
            lift_windows=arm == "lifted",
        )
        extract_to_files(
            loaded,
            ids,
            "gemma",
            "pretrained",
            tables,
            batch_size=8,
            intermediates_layer=None,
            probe_sequences=0,
            probe_positions=4,
            seed=0,
            n_groups=8,
        )
        arms[arm] = tables
    frames = {}
    for lifted in (False, True):
        output = folder / f"window_test_{lifted}.parquet"
        both = {f"lifted_{t}": [str(arms["lifted"][t])] for t in ("scores", "groups")} if lifted else {}
        run_job(
            Job(
                "window_test",
                input={
                    "scores": [str(arms["windowed"]["scores"])],
                    "groups": [str(arms["windowed"]["groups"])],
                    **both,
                },
                output={"table": str(output)},
                params={
                    "models": {
                        "gemma": {
                            "location": str(folder / "model"),
                            "source": "window_control" if lifted else "default run",
                            "lifted": lifted,
                        }
                    },
                    "settings": {"n_bootstrap": 50, "seed": 0},
                },
            )
        )
        frames[lifted] = pd.read_parquet(output)
    frames["arms"] = arms
    return frames


def test_the_job_on_a_tiny_gemma(tiny_gemma_run):
    frame = tiny_gemma_run[False]
    assert (frame["arm"] == "windowed").all()
    assert sorted(frame["layer"].unique()) == [0, 1, 2]
    assert set(frame["layer_type"]) == {"sliding", "global"}
    assert (frame["source"] == "default run").all() and (frame["n_sequences"] == 32).all()
    measured = frame[frame["region"] != "change"]
    # an RMS ratio (bias-corrected, so it may pass 1 at this tiny N), with a spread over the groups
    assert (measured["measured"] >= 0).all() and (measured["uncertainty"] > 0).all()
    assert (
        measured["n_pairs"]
        == [len(region_pairs(SEQ, WINDOW, (a, b + 1))) for a, b in zip(measured["query_from"], measured["query_to"])]
    ).all()
    # layer 1 (paper) of the parameter-free decoder at alpha 0 has no pattern at all: no prediction there
    assert frame[frame["layer"] == 0]["predicted"].isna().all()
    assert frame[frame["layer"] > 0]["predicted"].notna().all()


def test_claims_10d_10e_read_the_windows_own_effect(tiny_gemma_run):
    """10d and 10e (issue 43, as registered) read the arm `difference`: Pearson r across the layers 2+ (paper)
    between the recursion's and the measured effect, and the sign agreement beyond the best constant, each
    recomputed on every paired replicate; a table without a lifted arm gives rows without a value that say so."""
    th = merge_thresholds(None)
    frame = tiny_gemma_run[True]
    rows = claim10_windows(LedgerInputs(None, None, None, None, None, 50, 0, window_test=frame), th)
    by_claim = {c: [r for r in rows if r["claim_id"] == c] for c in ("10d", "10e")}
    assert [len(v) for v in by_claim.values()] == [1, 1]
    effect = frame[(frame["arm"] == "difference") & (frame["layer"] >= 1)].sort_values("layer")
    measured, predicted = effect["measured"].to_numpy(), effect["predicted"].to_numpy()
    assert by_claim["10d"][0]["value"] == pytest.approx(np.corrcoef(measured, predicted)[0, 1])
    agree = (np.sign(measured) == np.sign(predicted)).mean()
    majority = max((measured > 0).mean(), (measured <= 0).mean())
    assert by_claim["10e"][0]["value"] == pytest.approx(agree - majority)
    assert by_claim["10d"][0]["reference"] == f"t({int(effect['n_groups'].iloc[0]) - 1})"  # G - 1, as registered
    for table in (tiny_gemma_run[False], None):  # the default run's (no lifted arm), or none
        empty = claim10_windows(LedgerInputs(None, None, None, None, None, 50, 0, window_test=table), th)
        assert [r["verdict"] for r in empty] == ["inconclusive", "inconclusive"]
        assert all("target window_control" in r["note"] for r in empty)


def effect_table(measured: np.ndarray, predicted: np.ndarray, groups: int = 16) -> pd.DataFrame:
    """A window test's arm `difference` for one model: layer k's measured effect replicates measured[k] (the
    estimate first) and its prediction predicted[k]."""
    rows = [
        {
            "model": "llm",
            "source": "window_control",
            "arm": "difference",
            "seq_len": 1024,
            "n_sequences": 64,
            "n_groups": groups,
            "layer": layer,
            "layer_type": "sliding",
            "window": 512,
            "rope_theta": 1e4,
            "region": "change",
            "query_from": pd.NA,
            "query_to": pd.NA,
            "n_pairs": 0,
            "measured": values[0],
            "uncertainty": values[1:].std(ddof=1),
            "predicted": forecast,
            "predicted_seq_len": 1024,
            "replicates": values[1:].tolist(),
        }
        for layer, (values, forecast) in enumerate(zip(measured, predicted))
    ]
    return pd.DataFrame(rows)


def test_10d_and_10e_tell_a_recursion_that_sees_the_window_from_one_that_does_not():
    """Measured effects that follow the prediction (plus noise) give r near 1 (10d supported) and, with both signs
    among the layers, signs beyond a constant (10e supported); effects that ignore it give r near 0 (10d not
    supported); one sign in every layer leaves a constant as good as the recursion (10e: 0, not above it)."""
    th = merge_thresholds(None)
    rng = np.random.default_rng(4)
    predicted = np.linspace(-0.1, 0.1, 12)
    noise = lambda scale: rng.normal(0, scale, (12, 201))  # noqa: E731

    def ledger(measured):
        table = effect_table(measured, predicted)
        rows = claim10_windows(LedgerInputs(None, None, None, None, None, 200, 0, window_test=table), th)
        return {r["claim_id"]: r for r in rows}

    follows = ledger(predicted[:, None] + noise(0.01))
    assert follows["10d"]["value"] > 0.9 and follows["10d"]["verdict"] == "supported"
    assert follows["10e"]["value"] > 0.2 and follows["10e"]["verdict"] == "supported"
    assert follows["10d"]["reference"] == "t(15)"  # G - 1 for 16 groups
    ignores = ledger(rng.normal(0, 0.1, 12)[:, None] * np.ones((1, 201)) + noise(0.005))
    assert abs(ignores["10d"]["value"]) < 0.5 and ignores["10d"]["verdict"] == "not supported"
    one_sign = ledger(np.abs(predicted)[:, None] + 0.05 + noise(0.001))
    assert one_sign["10e"]["value"] <= 0 and one_sign["10e"]["verdict"] != "supported"


def test_the_job_reads_paper_llms_tables_once_both_exist(tmp_path):
    """The default run's window test reads target paper_llms's tables of a model once that extraction has
    written both it reads (scores, groups), and says so in its params (a change of input files and params:
    Snakemake reruns it)."""
    from causalpos.catalogue import paths
    from causalpos.workflow.config import load_config
    from causalpos.workflow.settings import window_test_models, window_test_sources

    config = load_config("config.yaml")
    results = str(tmp_path / "results")
    before = window_test_models(config, results)
    assert {m: spec["source"] for m, spec in before.items()} == {
        "smollm2_135m": "default run",
        "gemma3_270m": "default run",
    }
    tables = paths.activation_tables("gemma3_270m", paths.paper_llms_dir(results))
    for table in tables:  # every table but groups: an unfinished extraction is not read
        if table != "groups":
            Path(tables[table]).parent.mkdir(parents=True, exist_ok=True)
            Path(tables[table]).touch()
    assert window_test_models(config, results)["gemma3_270m"]["source"] == "default run"
    Path(tables["groups"]).touch()
    after = window_test_models(config, results)
    assert after["gemma3_270m"]["source"] == "paper_llms" and after["smollm2_135m"]["source"] == "default run"
    assert window_test_sources(config, results) == {
        "gemma3_270m": paths.paper_llms_dir(results),
        "smollm2_135m": results,
    }


def test_lifting_the_windows_changes_the_mask_alone(tmp_path):
    """load_for_extraction(lift_windows=True) makes every layer global by the window alone: the same logits as the
    model with a window as long as the sequence, each layer keeping its type and RoPE base (not those of a model
    whose layers were all made global, which gives the sliding layers the global base too), and other logits than
    the windowed model's past the window. A model without sliding windows is refused, naming the setting."""
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    from causalpos.models.pretrained import load_for_extraction

    torch.manual_seed(1)
    Gemma3ForCausalLM(gemma_config()).save_pretrained(tmp_path / "gemma")
    ids = torch.from_numpy(np.random.default_rng(1).integers(0, VOCAB, size=(2, SEQ)))

    def logits(model):
        with torch.no_grad():
            return model(ids).logits

    cpu = torch.device("cpu")
    lifted, _ = load_for_extraction(str(tmp_path / "gemma"), "s", cpu, "eager", with_tokenizer=False, lift_windows=True)
    windowed, _ = load_for_extraction(str(tmp_path / "gemma"), "s", cpu, "eager", with_tokenizer=False)
    assert lifted.config.layer_types == TYPES
    covering = AutoModelForCausalLM.from_pretrained(tmp_path / "gemma", attn_implementation="eager", sliding_window=SEQ)
    all_global = AutoModelForCausalLM.from_pretrained(
        tmp_path / "gemma", attn_implementation="eager", layer_types=["full_attention"] * len(TYPES)
    )
    torch.testing.assert_close(logits(lifted), logits(covering.eval()), rtol=0, atol=0)
    assert not torch.allclose(logits(lifted), logits(all_global.eval()), atol=1e-4)
    # before the window both see every earlier key: equal there, apart past it
    torch.testing.assert_close(logits(lifted)[:, :WINDOW], logits(windowed)[:, :WINDOW], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(logits(lifted)[:, WINDOW:], logits(windowed)[:, WINDOW:], atol=1e-4)
    LlamaForCausalLM(
        LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2)
    ).save_pretrained(tmp_path / "llama")
    with pytest.raises(ValueError, match="s: model .* has no sliding-window layer"):
        load_for_extraction(str(tmp_path / "llama"), "s", cpu, "eager", with_tokenizer=False, lift_windows=True)


def test_the_lifted_arm_and_the_windows_own_effect(tiny_gemma_run):
    """Target window_control's arms on the same sequences: the queries before the window see every earlier key in
    both, so their scores are the same and so are their amplitudes and draws (paired); the window's own effect
    (arm difference) is then the after-window amplitude with the window minus without it, replicate by
    replicate, and its prediction the recursion's with the windows minus without them."""
    from causalpos.analysis.windows import lifted_stack

    arms = tiny_gemma_run["arms"]
    windowed, lifted = (pd.read_parquet(arms[arm]["scores"]) for arm in ("windowed", "lifted"))
    early = windowed["query_pos"] < WINDOW
    np.testing.assert_allclose(
        windowed.loc[early, "score_mean"], lifted.loc[lifted["query_pos"] < WINDOW, "score_mean"], rtol=1e-5, atol=1e-6
    )
    frame = tiny_gemma_run[True]
    assert set(frame["arm"]) == {"windowed", "lifted", "difference"} and (frame["source"] == "window_control").all()
    by = {(r["arm"], r["region"], r["layer"]): r for _, r in frame.iterrows()}
    stack = AttentionStack((WINDOW, None, WINDOW), (1e4, 1e6, 1e4), 16)
    with_windows, without = predicted_scores(stack, 2 * WINDOW), predicted_scores(lifted_stack(stack), 2 * WINDOW)
    for layer in (1, 2):
        before = [by[(arm, "before", layer)] for arm in ("windowed", "lifted")]
        assert before[0]["measured"] == pytest.approx(before[1]["measured"], rel=1e-4)
        np.testing.assert_allclose(before[0]["replicates"], before[1]["replicates"], rtol=1e-4, atol=1e-6)
        effect = by[("difference", "change", layer)]
        after = [
            np.r_[by[(arm, "after", layer)]["measured"], by[(arm, "after", layer)]["replicates"]]
            for arm in ("windowed", "lifted")
        ]
        np.testing.assert_allclose(np.r_[effect["measured"], effect["replicates"]], after[0] - after[1], atol=1e-4)
        change = {}
        for name, scores in (("with", with_windows), ("without", without)):
            amplitudes = [predicted_amplitude(scores[layer], WINDOW, q) for q in ((0, WINDOW), (WINDOW, 2 * WINDOW))]
            change[name] = amplitudes[1] - amplitudes[0]
        assert effect["predicted"] == pytest.approx(change["with"] - change["without"])
    # the global layer 2 (paper) is global in both arms: the recursion sees a window's effect only through the
    # sliding layer below it
    assert by[("lifted", "change", 1)]["layer_type"] == "global"


def test_the_ledger_reads_window_controls_table_once_it_exists(tmp_path):
    """Claims 10d-10e read target window_control's window test once it has been written, else the default run's
    (which has no lifted arm); a config without window_control models always the default run's. A table that
    appears later changes the ledger's input files, and Snakemake reruns it."""
    from causalpos.catalogue import paths
    from causalpos.workflow.config import load_config
    from causalpos.workflow.settings import window_effect_table

    config = load_config("config.yaml")
    results = str(tmp_path / "results")
    default, windows = (paths.table_file("window_test", r) for r in (results, paths.windows_root(results)))
    assert config["extraction"]["window_control"]["models"] == ["gemma3_270m"]
    assert window_effect_table(config, results) == default
    Path(windows).parent.mkdir(parents=True)
    Path(windows).touch()
    assert window_effect_table(config, results) == windows
    config["extraction"]["window_control"]["models"] = []
    assert window_effect_table(config, results) == default
