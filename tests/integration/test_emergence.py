"""Snapshots along training and the emergence sweep (issue 14): the snapshot of step s holds the weights after
exactly s optimizer steps, interrupted or not; the emergence extraction of step s is `extract` on those
weights; the emergence table's metrics are the claims ledger's on the same tables; the length comparison
over seeds summarises its inputs.

Tiny models on the Markov-chain blocks of tests/integration/test_train.py (the `data` fixture of tests/conftest.py).
"""

from __future__ import annotations

import json
import math
import signal
import subprocess

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from causalpos.models.model import build_model
from causalpos.models.settings import snapshot_schedule, training_settings
from causalpos.workflow.config import training_defaults
from helpers import CFG, TINY, VOCAB, command, env, start_and_wait_for_steps

STEPS = 40
SNAPSHOTS = [0, 5, 15, 40]
RUN = {
    **CFG,
    "steps": STEPS,
    "grad_accum": 1,
    "eval_every": 10,
    "checkpoint_every": 10,
    "log_every": 5,
    "snapshot_steps": SNAPSHOTS,
}


# ---------------------------------------------------------------- the schedule


@pytest.mark.parametrize("steps, count", [(1600, 8), (20, 4), (4000, 8), (7, 8), (1, 2), (100, 2)])
def test_a_count_gives_step_0_the_last_and_log_spaced_steps_between(steps, count):
    chosen = snapshot_schedule(training_defaults({"steps": steps, "snapshot_steps": count}))
    assert chosen[0] == 0 and chosen[-1] == steps and chosen == sorted(set(chosen))
    assert len(chosen) <= count and (len(chosen) == count or steps < 2 * count)  # rounding may merge tiny ones
    inner = [s for s in chosen if s > 0]
    if len(inner) >= 4:  # log-spaced: consecutive ratios about equal, steps ** (1 / (count - 1))
        ratios = np.diff(np.log(inner))
        assert np.allclose(ratios, math.log(steps) / (count - 1), atol=0.5)


def test_a_list_gets_0_and_the_last_and_bad_values_are_named():
    assert snapshot_schedule(training_defaults({"steps": 50, "snapshot_steps": [7, 7, 30]})) == [0, 7, 30, 50]
    assert snapshot_schedule(training_defaults({"snapshot_steps": 0})) == []
    for bad, message in (
        (1, "at least 2"),
        (-3, "at least 2"),
        ([5, 60], "outside 0 .. training.steps = 50"),
        ("many", "a non-negative integer or a list"),
    ):
        with pytest.raises(ValueError, match="training.snapshot_steps") as err:
            training_settings({**CFG, "steps": 50, "snapshot_steps": bad})  # past the schema: the check below it
        assert message in str(err.value)


# ---------------------------------------------------------------- the snapshots of a run


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory):
    """Run A: with snapshots. Run B: the same training without snapshots, a checkpoint every 5 steps, whose model
    state is recorded at every save (an independent record of the weights after exactly s steps)."""
    import causalpos.models.train as train_module
    from causalpos.models.train import train

    root = tmp_path_factory.mktemp("runs")
    train("nope", False, data / "blocks", root / "a", root / "a_ckpt", RUN, tokenizer_dir=data / "tokenizer")
    states, save = {}, train_module.save_checkpoint

    def recording(payload, path):
        states[payload["step"]] = {k: v.clone() for k, v in payload["model"].items()}
        save(payload, path)

    train_module.save_checkpoint = recording
    try:
        train(
            "nope",
            False,
            data / "blocks",
            root / "b",
            root / "b_ckpt",
            {**RUN, "snapshot_steps": 0, "checkpoint_every": 5},
            tokenizer_dir=data / "tokenizer",
        )
    finally:
        train_module.save_checkpoint = save
    return root, states


def snapshot(root, step, folder: str = "a") -> dict:
    """Every weight of a snapshot (tied ones under both names), as the model it is loaded into has them."""
    from causalpos.models.snapshots import load_snapshot

    model = build_model(TINY, VOCAB, rope=False, eos_token_id=0)
    load_snapshot(model, root / folder / "snapshots" / f"step_{step:07d}.safetensors")
    return model.state_dict()


def same_weights(snap: dict, state: dict) -> bool:
    return set(snap) == set(state) and all(torch.equal(snap[k], state[k]) for k in snap)


def test_snapshot_of_step_s_is_the_weights_after_exactly_s_steps(runs):
    root, states = runs
    files = sorted(p.name for p in (root / "a" / "snapshots").iterdir())
    assert files == [f"step_{s:07d}.safetensors" for s in SNAPSHOTS]
    for step in SNAPSHOTS[1:]:
        assert same_weights(snapshot(root, step), states[step]), step
    assert not same_weights(snapshot(root, 5), states[10])  # the weights do move between snapshots
    torch.manual_seed(RUN["seed"])  # step 0: the initial weights, as build_model draws them from the seed
    initial = build_model(TINY, VOCAB, rope=False, eos_token_id=0).state_dict()
    assert same_weights(snapshot(root, 0), initial)
    from transformers import AutoModelForCausalLM

    final = AutoModelForCausalLM.from_pretrained(root / "a").state_dict()
    assert same_weights(snapshot(root, STEPS), final)
    assert not (root / "b" / "snapshots").exists()


# over 20 s (~45 s): an interrupted training with snapshots and its resumed run, against an uninterrupted one
def test_an_interrupted_run_writes_the_rest_and_the_same_bits(runs, data, tmp_path):
    root, _ = runs
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"training": {**RUN, "checkpoint_every": 0}}))
    proc = start_and_wait_for_steps(command(data, tmp_path, config), pattern="nope step 10/")
    assert proc.poll() is None, "training ended before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, rest[-2000:]
    written = sorted(p.name for p in (tmp_path / "ckpt" / "snapshots").glob("*.safetensors"))
    assert 2 <= len(written) < len(SNAPSHOTS)  # step 0 and 5 before the stop, not the last
    done = subprocess.run(command(data, tmp_path, config), env=env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for step in SNAPSHOTS:
        assert same_weights(snapshot(tmp_path, step, "out"), snapshot(root, step)), step
        assert (
            load_file(tmp_path / "out" / "snapshots" / f"step_{step:07d}.safetensors").keys()
            == load_file(root / "a" / "snapshots" / f"step_{step:07d}.safetensors").keys()
        )


def test_a_resumed_run_missing_an_earlier_snapshot_is_refused(runs, data, tmp_path):
    from causalpos.models.train import CheckpointError, train

    root, _ = runs
    ckpt = tmp_path / "ckpt"
    train(
        "nope",
        False,
        data / "blocks",
        tmp_path / "out",
        ckpt,
        {**RUN, "steps": STEPS},
        tokenizer_dir=data / "tokenizer",
    )
    (ckpt / "snapshots" / "step_0000005.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"snapshots of steps \[5\] are missing"):
        train("nope", False, data / "blocks", tmp_path / "out", ckpt, RUN, tokenizer_dir=data / "tokenizer")


# ---------------------------------------------------------------- the emergence extraction


@pytest.fixture(scope="module")
def sweep(runs, data):
    from causalpos.models.emergence import emergence_tables

    root, _ = runs
    tokens = np.load(data / "blocks" / "heldout.npy")[:12, :16].astype(np.int64)
    metrics = pd.read_parquet(root / "a" / "metrics.parquet")
    snaps = {s: root / "a" / "snapshots" / f"step_{s:07d}.safetensors" for s in SNAPSHOTS}
    tables, seconds = emergence_tables(
        root / "a",
        snaps,
        tokens,
        data / "blocks",
        metrics,
        "nope",
        torch.device("cpu"),
        batch_size=2,
        intermediates_layer=0,
        n_groups=3,
    )
    return tables, tokens, metrics


def test_emergence_of_step_s_is_extract_on_the_weights_of_step_s(runs, sweep):
    from causalpos.models.extract import ATTENTION_NAME, extract
    from causalpos.models.pretrained import load_for_extraction

    root, states = runs
    tables, tokens, _ = sweep
    model, _ = load_for_extraction(str(root / "b"), "test", torch.device("cpu"), ATTENTION_NAME, with_tokenizer=False)
    for step in (5, 15):
        model.load_state_dict(states[step])  # run B's weights at step s, not the snapshot file
        direct = extract(
            model, tokens, "nope", "trained", batch_size=2, intermediates_layer=0, probe_sequences=0, n_groups=3
        )
        for table in ("scores", "intermediates", "groups"):
            swept = tables[table][tables[table]["step"] == step].drop(columns=["step", "tokens_seen"])
            swept, mine = swept.reset_index(drop=True), getattr(direct, table).reset_index(drop=True)
            if table == "groups":  # a column of float32 arrays: compared as one matrix
                np.testing.assert_allclose(np.stack(swept.pop("sums")), np.stack(mine.pop("sums")), rtol=1e-5)
            pd.testing.assert_frame_equal(swept, mine, check_exact=False, rtol=1e-6)
        assert (tables["scores"].loc[tables["scores"]["step"] == step, "tokens_seen"] == step * 4 * 32).all()


def test_emergence_loss_is_the_trainings_evaluation(sweep, runs, data):
    from causalpos.models.emergence import emergence_tables

    root, _ = runs
    tables, tokens, metrics = sweep
    losses = tables["losses"].set_index("step")
    evaluated = metrics.dropna(subset=["heldout_loss"]).set_index("step")["heldout_loss"]
    assert losses.loc[[0, 40], "source"].tolist() == ["metrics", "metrics"]
    assert losses.loc[[5, 15], "source"].tolist() == ["computed", "computed"]  # no evaluation at 5 and 15
    assert losses.loc[40, "heldout_loss"] < losses.loc[5, "heldout_loss"] < losses.loc[0, "heldout_loss"]
    # computed where the training did evaluate (its row left out): the training's own number
    snaps = {s: root / "a" / "snapshots" / f"step_{s:07d}.safetensors" for s in (0, 40)}
    again, _ = emergence_tables(
        root / "a",
        snaps,
        tokens,
        data / "blocks",
        metrics.iloc[:0],
        "nope",
        torch.device("cpu"),
        batch_size=2,
        n_groups=3,
    )
    computed = again["losses"].set_index("step")
    assert (computed["source"] == "computed").all()
    np.testing.assert_allclose(computed["heldout_loss"], evaluated.loc[[0, 40]], rtol=1e-6)


# ---------------------------------------------------------------- the emergence table and the ledger


@pytest.fixture(scope="module")
def alpha0():
    from causalpos.simulation.engine import result_frame, simulate
    from causalpos.simulation.variant import Variant

    variant = Variant(alpha=0.0, d=32, seq_len=16, n_layers=3, n_samples=400, seed=1)
    return result_frame(simulate(variant, device="cpu"), "l2_alpha0.0")


def test_emergence_metrics_are_the_ledgers_on_the_same_tables(sweep, alpha0):
    from causalpos.analysis.claims.ledger import build_ledger
    from causalpos.analysis.emergence import EMERGENCE_COLUMNS, emergence_frame

    tables, _, _ = sweep
    frame = emergence_frame(
        tables["scores"], tables["intermediates"], tables["groups"], tables["losses"], alpha0, n_bootstrap=50, seed=3
    )
    assert list(frame.columns) == EMERGENCE_COLUMNS
    assert sorted(frame["step"].unique()) == SNAPSHOTS
    for step in (5, STEPS):
        at = {
            name: tables[name][tables[name]["step"] == step].drop(columns=["step", "tokens_seen"])
            for name in ("scores", "intermediates", "groups")
        }
        ledger = build_ledger(alpha0, None, at["scores"], at["intermediates"], at["groups"], n_bootstrap=50, seed=3)
        mine = frame[frame["step"] == step]

        def value(metric, stage):
            row = mine[(mine["metric"] == metric) & (mine["stage"] == stage)]
            assert len(row) == 1, (metric, stage)
            return row[["value", "uncertainty"]].iloc[0].tolist()

        for stage in ("f", "i"):
            row = ledger[(ledger["claim_id"] == "7a") & (ledger["label"] == f"nope ({stage})")].iloc[0]
            assert value("concordance", stage) == [row["value"], row["uncertainty"]]
        row = ledger[ledger["claim_id"] == "7b"].iloc[0]
        assert value("strength_ratio", "i") == pytest.approx([row["value"], row["uncertainty"]], rel=1e-12)
        # the non-relative amplitude is claim 8a's: the same tables with the model called a pretrained one
        relabelled = at["scores"].assign(kind="pretrained")
        groups = at["groups"].assign(kind="pretrained")
        amp = build_ledger(None, None, relabelled, None, groups, n_bootstrap=50, seed=3)
        amp = amp[amp["claim_id"] == "8a"].set_index("layer")
        rows = mine[mine["metric"] == "nonrelative_amplitude"].set_index("layer")
        np.testing.assert_allclose(rows["value"], amp.loc[rows.index, "value"], rtol=1e-12)
        np.testing.assert_allclose(rows["uncertainty"], amp.loc[rows.index, "uncertainty"], rtol=1e-12)
    loss = frame[frame["metric"] == "heldout_loss"].set_index("step")["value"]
    np.testing.assert_array_equal(
        loss.loc[SNAPSHOTS], tables["losses"].set_index("step").loc[SNAPSHOTS, "heldout_loss"]
    )
    # the reference: the simulation's own concordance and amplitude, the same at every step
    reference = frame[frame["metric"] == "concordance"].groupby("stage")["reference"].nunique()
    assert (reference == 1).all()
    assert frame.loc[frame["metric"] == "strength_ratio", "reference"].eq(1.0).all()


# ---------------------------------------------------------------- the length comparison over seeds


def test_length_over_seeds_is_the_mean_and_sd_of_each_seeds_gap():
    from causalpos.analysis.lengths import length_seed_frame

    rng = np.random.default_rng(0)
    rows = [
        {"model": m, "seed": s, "factor": f, "seq_len": 32 * f, "heldout_loss": 5 + rng.normal()}
        for m in ("nope", "rope")
        for s in (0, 4, 9)
        for f in (1, 2, 4)
    ]
    per_seed = pd.DataFrame(rows)
    frame = length_seed_frame(per_seed).set_index(["model", "factor"])
    loss = per_seed.pivot_table(index=["model", "seed"], columns="factor", values="heldout_loss")
    for model in ("nope", "rope"):
        for factor in (1, 2, 4):
            mine = loss.loc[model]  # seeds x factors
            gaps = (mine[factor] - mine[1]).to_numpy()
            row = frame.loc[(model, factor)]
            assert row["n_seeds"] == 3 and row["seeds"] == "0,4,9"
            assert row["heldout_loss_mean"] == pytest.approx(mine[factor].mean())
            assert row["gap_mean"] == pytest.approx(gaps.mean())
            assert row["gap_sd"] == pytest.approx(np.std(gaps, ddof=1), nan_ok=True)
            assert row["gap_sem"] == pytest.approx(np.std(gaps, ddof=1) / math.sqrt(3), nan_ok=True)
    nope, rope = loss.loc["nope"], loss.loc["rope"]
    paired = ((nope[4] - nope[1]) - (rope[4] - rope[1])).to_numpy()  # the same seeds, in the same order
    row = frame.loc[("nope - rope", 4)]
    assert row["gap_mean"] == pytest.approx(paired.mean())
    assert row["gap_sd"] == pytest.approx(paired.std(ddof=1))
    assert row["heldout_loss_mean"] == pytest.approx((nope[4] - rope[4]).mean())
