"""Training: the two decoders, the loop, checkpoints/resume, DDP on gloo, length evaluation.

Tiny models (2 layers, hidden 64, vocab 300, blocks of 32) on a synthetic
Markov-chain stream that a model can learn in a few dozen steps.
"""

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from causalpos.catalogue.tables import METRIC_COLUMNS, THROUGHPUT_COLUMNS
from causalpos.models.model import build_model, count_parameters
from causalpos.models.settings import model_settings, training_settings
from causalpos.models.blocks import TrainOrder, micro_batch_blocks
from causalpos.models.length_eval import evaluate_lengths
from causalpos.models.train import (
    CHECKPOINT_NAME,
    DEBUG_ENV,
    CheckpointError,
    load_checkpoint,
    lr_at,
    train,
)
from causalpos.workflow.config import ConfigError, training_defaults
from helpers import BLOCK, CFG, TINY, VOCAB, command, env, start_and_wait_for_steps

# the fixture `data` (the Markov-chain blocks and their tokenizer) is tests/conftest.py's, shared with
# tests/integration/test_emergence.py


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory) -> Path:
    """An uninterrupted in-process run of CFG: the reference for resume and the model to evaluate."""
    root = tmp_path_factory.mktemp("reference")
    train(
        "nope",
        False,
        data / "blocks",
        root / "out",
        root / "ckpt",
        CFG,
        tokenizer_dir=data / "tokenizer",
        throughput=root / "throughput.tsv",
    )
    return root


# ---------------------------------------------------------------- the model


def test_model_settings_name_the_bad_setting():
    default = training_defaults()["model"]
    with pytest.raises(
        ValueError, match=r"training.model.n_heads = 3 does not divide training.model.hidden_size = 256"
    ):
        model_settings({**default, "n_heads": 3})
    with pytest.raises(ValueError, match=r"training.model.n_kv_heads = 3 does not divide training.model.n_heads = 4"):
        model_settings({**default, "n_kv_heads": 3})
    with pytest.raises(ValueError, match=r"training.model.head_dim = 32 must equal"):
        model_settings({**default, "head_dim": 32})
    with pytest.raises(ValueError, match=r"unknown setting training.model.dropout"):
        model_settings({**default, "dropout": 0.1})
    with pytest.raises(ValueError, match=r"training.model.n_layers = 0 must be a positive integer"):
        model_settings({**default, "n_layers": 0})
    with pytest.raises(ValueError, match=r"training.model.rope_theta is missing"):  # no default below the schema
        build_model({k: v for k, v in default.items() if k != "rope_theta"}, VOCAB, rope=True)
    with pytest.raises(ConfigError, match=r"training.model.n_heads = 3 does not divide"):  # the same through the schema
        training_defaults({"model": {"n_heads": 3}})


def test_training_settings_name_the_bad_setting(data, tmp_path):
    with pytest.raises(ValueError, match=r"unknown setting training.batch_size"):
        training_settings({**CFG, "batch_size": 8})
    with pytest.raises(ValueError, match=r"training.min_lr = 0.1 must be between 0 and training.lr"):
        training_defaults({"lr": 0.01, "min_lr": 0.1})
    with pytest.raises(ValueError, match=r"training.betas"):
        training_defaults({"betas": [0.9]})
    with pytest.raises(ValueError, match=r"training.threads = 0 must be a positive integer"):
        training_settings({**CFG, "threads": 0})
    with pytest.raises(ValueError, match=r"training.seed is missing"):
        train(
            "nope",
            False,
            data / "blocks",
            tmp_path / "o",
            tmp_path / "c",
            {k: v for k, v in CFG.items() if k != "seed"},
        )
    with pytest.raises(ValueError, match=r"block_len = 32 .* exceeds training.model.context = 16"):
        train("nope", False, data / "blocks", tmp_path / "o", tmp_path / "c", {**CFG, "model": {**TINY, "context": 16}})
    bad = tmp_path / "bad"
    shutil.copytree(data / "blocks", bad)
    heldout = np.load(bad / "heldout.npy")
    heldout[3, 5] = VOCAB
    np.save(bad / "heldout.npy", heldout)
    with pytest.raises(ValueError, match=rf"heldout.npy: token ids \d+..{VOCAB} outside the vocabulary 0..{VOCAB - 1}"):
        train("nope", False, bad, tmp_path / "o", tmp_path / "c", CFG)


def test_nope_and_rope_have_the_same_parameters_and_initial_weights():
    models = {}
    for rope in (False, True):
        torch.manual_seed(0)
        models[rope] = build_model(TINY, VOCAB, rope)
    nope, rope = models[False].state_dict(), models[True].state_dict()
    assert list(nope) == list(rope)
    assert all(torch.equal(nope[k], rope[k]) for k in nope)
    assert models[False].config.no_rope_layers == [0, 0] and models[True].config.no_rope_layers == [1, 1]
    assert models[False].model.embed_tokens.weight.abs().sum(dim=1).min() > 0  # no zeroed padding row
    sizes = count_parameters(models[False])
    assert sizes["total"] - sizes["non_embedding"] == VOCAB * 64


def attention_scores(model, position_ids) -> dict:
    """Pre-softmax scores q k^T of every layer, as the model computes them (after RoPE if any)."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    scores = {}

    def capture(module, query, key, value, mask, **kwargs):
        key_per_head = key.repeat_interleave(query.shape[1] // key.shape[1], dim=1)
        scores[module.layer_idx] = (query @ key_per_head.transpose(-1, -2)).detach()
        return sdpa_attention_forward(module, query, key, value, mask, **kwargs)

    AttentionInterface.register("causalpos_capture", capture)
    model.set_attn_implementation("causalpos_capture")
    tokens = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        model(input_ids=tokens, position_ids=position_ids.expand(2, -1))
    model.set_attn_implementation("sdpa")
    return scores


def test_nope_scores_ignore_positions_rope_scores_do_not():
    torch.manual_seed(0)
    nope, rope = build_model(TINY, VOCAB, rope=False), build_model(TINY, VOCAB, rope=True)
    positions = torch.arange(16)[None]
    for model, name in ((nope, "nope"), (rope, "rope")):
        base = attention_scores(model, positions)[0]
        shifted = attention_scores(model, positions + 7)[0]
        stretched = attention_scores(model, 3 * positions + 7)[0]
        if name == "nope":  # position_ids reach nothing: bitwise the same scores
            assert torch.equal(base, shifted) and torch.equal(base, stretched)
        else:  # RoPE is relative: a shift keeps the scores (up to rounding), a stretch does not
            assert torch.allclose(base, shifted, atol=1e-5)
            assert (base - stretched).abs().max() > 0.05


# ---------------------------------------------------------------- schedule and data order


def test_lr_warms_up_linearly_then_decays_to_min_lr():
    cfg = training_defaults({"steps": 100, "lr": 1e-3, "min_lr": 1e-4, "warmup_steps": 10})
    lrs = [lr_at(s, cfg) for s in range(100)]
    assert lrs[0] == pytest.approx(1e-3 / 11) and lrs[10] == pytest.approx(1e-3)
    assert all(a < b for a, b in zip(lrs[:10], lrs[1:11]))
    assert all(a > b for a, b in zip(lrs[10:], lrs[11:]))
    assert lr_at(100, cfg) == pytest.approx(1e-4) and lrs[-1] > 1e-4


def test_data_order_is_a_permutation_per_epoch_and_ranks_are_disjoint():
    order = TrainOrder(10, seed=5)
    stream = order(0, 30)
    for epoch in range(3):
        assert sorted(stream[10 * epoch : 10 * epoch + 10]) == list(range(10))
    assert not np.array_equal(stream[:10], stream[10:20])
    assert np.array_equal(TrainOrder(10, seed=5)(13, 9), stream[13:22])  # any position, no state
    cfg = {"micro_batch": 2, "grad_accum": 3}
    for step in range(4):
        shards = [micro_batch_blocks(order, step, m, cfg, r, 2) for r in range(2) for m in range(3)]
        assert np.array_equal(np.concatenate(shards), order(step * 12, 12))


# ---------------------------------------------------------------- the loop, outputs, resume


def test_outputs_load_and_the_model_learned(trained, data):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = trained / "out"
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert list(metrics.columns) == METRIC_COLUMNS
    assert metrics["step"].tolist() == list(range(0, CFG["steps"] + 1, 10))
    assert metrics["tokens_seen"].iloc[-1] == CFG["steps"] * 8 * BLOCK
    evaluated = metrics.dropna(subset=["heldout_loss"])
    assert evaluated["step"].tolist() == [0, 40, 80, 120]
    # the chain has 3 successors per token: from ~ln 300 = 5.7 toward ln 3 = 1.1
    assert evaluated["heldout_loss"].iloc[0] > 5.0 and evaluated["heldout_loss"].iloc[-1] < 2.5
    # the speed apart from the results, row by row
    speed = pd.read_csv(trained / "throughput.tsv", sep="\t")
    assert list(speed.columns) == THROUGHPUT_COLUMNS
    assert speed["step"].tolist() == metrics["step"].tolist()
    assert speed["tokens_seen"].tolist() == metrics["tokens_seen"].tolist()
    assert (speed["tokens_per_s"].iloc[1:] > 0).all()

    loaded = AutoModelForCausalLM.from_pretrained(out)
    assert loaded.config.no_rope_layers == [0, 0]
    final = build_model(TINY, VOCAB, rope=False)
    final.load_state_dict(load_checkpoint(trained / "ckpt" / CHECKPOINT_NAME)["model"])
    tokens = torch.as_tensor(np.load(data / "blocks" / "heldout.npy")[:2].astype(np.int64))
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=tokens).logits, final.eval()(input_ids=tokens).logits)
    assert AutoTokenizer.from_pretrained(out)("t1 t2").input_ids == [1, 2]
    assert json.loads((out / "training.json").read_text())["model_name"] == "nope"


@pytest.mark.parametrize("omp, expected", [(None, "all"), ("1", 1), ("999", "all"), ("many", "all")])
def test_job_cpus_is_the_affinity_capped_by_omp_num_threads(monkeypatch, omp, expected):
    from causalpos.runtime.devices import available_cpus, job_cpus

    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert job_cpus() == (available_cpus() if expected == "all" else expected)


def test_threads_are_capped_by_the_cpus_of_the_job(data, tmp_path, monkeypatch, caplog):
    """Snakemake sets OMP_NUM_THREADS to the rule's threads: a training of one thread per job uses one thread,
    not training.threads = 8 nor every core (two of them on two cores stalled each other for seconds at a time)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    caplog.set_level("INFO", logger="causalpos")
    train("nope", False, data / "blocks", tmp_path / "o", tmp_path / "c", {**CFG, "steps": 1, "threads": 8})
    assert "1 ranks on cpu, 1 threads" in caplog.text


# over 20 s (~70 s): three training processes in turn (stopped, killed, resumed), each starting torch
def test_sigterm_then_sigkill_and_the_resumed_run_ends_bitwise_the_same(trained, data, tmp_path):
    """Three processes of one training: SIGTERM stops the first after a checkpoint at the step it reached; the
    second resumes there and is killed (SIGKILL) after its next periodic checkpoint; the third resumes from
    that one, and ends with the weights and metrics of the uninterrupted run."""
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"training": CFG}))
    checkpoint = tmp_path / "ckpt" / CHECKPOINT_NAME
    proc = start_and_wait_for_steps(command(data, tmp_path, config))
    assert proc.poll() is None, "training ended before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    proc.wait(timeout=120)  # a hang guard only: that it stopped where it was, not at the end, is the step below
    assert proc.returncode == 128 + signal.SIGTERM, rest[-2000:]
    stopped_at = load_checkpoint(checkpoint)["step"]
    assert 10 <= stopped_at < CFG["steps"]
    assert f"stopped by SIGTERM at step {stopped_at}; checkpoint {checkpoint} written" in rest
    assert not (tmp_path / "out").exists()

    written = checkpoint.stat().st_mtime_ns
    proc = subprocess.Popen(command(data, tmp_path, config), env=env(), stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while checkpoint.stat().st_mtime_ns == written and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)  # until the resumed run writes its first periodic checkpoint (by rename: a new file)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
    assert f"resuming from {checkpoint} at step {stopped_at}" in err.decode()
    interrupted_at = load_checkpoint(checkpoint)["step"]
    assert stopped_at < interrupted_at < CFG["steps"] and interrupted_at % CFG["checkpoint_every"] == 0
    assert not (tmp_path / "out" / "metrics.parquet").exists()
    stale = checkpoint.parent / ".last.abc.tmp.ckpt"  # as left by a kill during a save
    stale.write_bytes(b"partial")

    done = subprocess.run(command(data, tmp_path, config), env=env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"resuming from {checkpoint} at step {interrupted_at}" in done.stderr
    assert not stale.exists()
    # same thread count, same ops in the same order: bitwise the uninterrupted weights
    resumed = load_file(tmp_path / "out" / "model.safetensors")
    reference = load_file(trained / "out" / "model.safetensors")
    assert resumed.keys() == reference.keys()
    assert all(torch.equal(resumed[k], reference[k]) for k in reference)
    # the row after the stop averages the steps before it too (the loss sum is in the checkpoint)
    columns = ["model", "step", "tokens_seen", "train_loss", "heldout_loss", "lr"]
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "out" / "metrics.parquet")[columns],
        pd.read_parquet(trained / "out" / "metrics.parquet")[columns],
    )


# over 20 s (~27 s): torchrun with two ranks, stopped and resumed
def test_sigterm_stops_every_rank_at_one_step_and_the_resumed_ranks_split_the_data_and_agree(data, tmp_path):
    """The workflow's DDP path (rule train's job with processes=2: torchrun, gloo): the job passes SIGTERM on to
    torchrun, torchrun to its ranks, and the ranks agree on the step to stop at. The rerun resumes there; per
    step the two ranks read disjoint halves of the global batch, and they end with the same weights."""
    settings = {**CFG, "checkpoint_every": 0}
    train = {
        "rule": "train",
        "wildcards": {"model": "nope"},
        "input": {"blocks": str(data / "blocks" / "blocks.json"), "tokenizer": str(data / "tokenizer" / "x")},
        "output": {"model": str(tmp_path / "out" / "model.safetensors")},
        "params": {"settings": settings, "processes": 2, "checkpoints": str(tmp_path / "ckpt")},
    }
    job = [sys.executable, "-c", f"from causalpos.workflow.job import Job, run_job; run_job(Job(**{train!r}))"]
    proc = start_and_wait_for_steps(job)
    assert proc.poll() is None, "training ended before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode != 0
    (checkpoint,) = (tmp_path / "ckpt").glob(f"nope/*/{CHECKPOINT_NAME}")
    stopped_at = load_checkpoint(checkpoint)["step"]
    assert 10 <= stopped_at < CFG["steps"], rest[-3000:]
    assert rest.count(f"stopped by SIGTERM at step {stopped_at};") == 2, rest[-3000:]  # both ranks, one step
    assert not (tmp_path / "out" / "model.safetensors").exists()

    debug = tmp_path / "debug"  # each rank writes the blocks it read and its final weights
    done = subprocess.run(job, env=env(**{DEBUG_ENV: str(debug)}), capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming from {checkpoint} at step {stopped_at}" in done.stderr
    assert "2 ranks on cpu" in done.stderr
    shards = [np.load(debug / f"rank{r}.npz") for r in range(2)]
    global_batch = CFG["micro_batch"] * CFG["grad_accum"] * 2
    order = TrainOrder(160, CFG["seed"])
    for step in range(stopped_at, CFG["steps"]):  # the steps of the resumed run
        mine = [s["blocks"][s["steps"][:, 0] == step].ravel() for s in shards]
        assert len(mine[0]) == len(mine[1]) == global_batch // 2 and not set(mine[0]) & set(mine[1])
        assert np.array_equal(np.concatenate(mine), order(step * global_batch, global_batch))
    weights = [torch.load(debug / f"rank{r}_state.pt") for r in range(2)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    metrics = pd.read_parquet(tmp_path / "out" / "metrics.parquet")
    assert metrics["tokens_seen"].iloc[-1] == CFG["steps"] * global_batch * BLOCK
    assert metrics["train_loss"].iloc[-1] < metrics["train_loss"].iloc[1] - 1.0
    assert metrics["heldout_loss"].iloc[-1] < metrics["heldout_loss"].iloc[0] - 1.0


def test_model_folder_has_the_usual_file_modes(trained):
    """safetensors writes model.safetensors 0600; the folder is shared (results, a cache): 0666 less the umask."""
    mask = os.umask(0)
    os.umask(mask)
    files = [path for path in (trained / "out").rglob("*") if path.is_file()]
    assert "model.safetensors" in {path.name for path in files}
    assert {path.name: oct(path.stat().st_mode & 0o777) for path in files} == {
        path.name: oct(0o666 & ~mask) for path in files
    }


def test_damaged_checkpoint_is_detected_and_named(trained, data, tmp_path):
    checkpoint = tmp_path / "ckpt" / CHECKPOINT_NAME
    checkpoint.parent.mkdir()
    raw = bytearray((trained / "ckpt" / CHECKPOINT_NAME).read_bytes())
    raw[len(raw) // 2] ^= 0x01  # one flipped bit in the payload
    checkpoint.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=rf"checkpoint {checkpoint} is damaged: SHA-256"):
        train("nope", False, data / "blocks", tmp_path / "out", checkpoint.parent, CFG)
    checkpoint.write_bytes(bytes(raw[:100]))  # truncated to its header
    with pytest.raises(CheckpointError, match=rf"checkpoint {checkpoint} is damaged"):
        load_checkpoint(checkpoint)
    checkpoint.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="no causalpos checkpoint header"):
        load_checkpoint(checkpoint)
    assert not (tmp_path / "out").exists()


def test_checkpoint_of_another_run_is_refused(trained, data, tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / CHECKPOINT_NAME).write_bytes((trained / "ckpt" / CHECKPOINT_NAME).read_bytes())
    with pytest.raises(CheckpointError, match=r"was written by a different run \(rope: checkpoint False, now True"):
        train("nope", True, data / "blocks", tmp_path / "out", tmp_path / "ckpt", CFG)
    # a finished checkpoint with changed logging settings only rewrites the outputs (the checkpoint folder
    # is one unit: a resumed run needs the snapshots written before its checkpoint)
    shutil.copytree(trained / "ckpt" / "snapshots", tmp_path / "ckpt" / "snapshots")
    frame = train("nope", False, data / "blocks", tmp_path / "out", tmp_path / "ckpt", {**CFG, "log_every": 7})
    assert frame["step"].iloc[-1] == CFG["steps"]
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == (trained / "out" / "model.safetensors").read_bytes()


# ---------------------------------------------------------------- length generalisation


def test_evaluate_lengths(trained, data, caplog):
    with caplog.at_level(logging.INFO, logger="causalpos"):
        frame = evaluate_lengths(trained / "out", data / "blocks", factors=(1, 2, 4), max_sequences=4, batch_size=3)
    # progress (issue 42): every factor puts the same 16 blocks of 32 tokens through, to 100%
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("length eval nope:")]
    assert len(progress) >= 10 and progress[-1].startswith("length eval nope: 1536/1536 tokens (100%)")
    assert list(frame.columns) == ["model", "factor", "seq_len", "n_sequences", "heldout_loss", "heldout_loss_sem"]
    assert frame["model"].tolist() == ["nope"] * 3
    assert frame["seq_len"].tolist() == [32, 64, 128] and frame["n_sequences"].tolist() == [16, 8, 4]
    assert (frame["heldout_loss"] < 3).all() and (frame["heldout_loss_sem"] > 0).all()
    with pytest.raises(ValueError, match=r"factor 8 needs sequences of 256 tokens, beyond max_position_embeddings"):
        evaluate_lengths(trained / "out", data / "blocks", factors=(1, 8))
    longer = evaluate_lengths(trained / "out", data / "blocks", factors=(8,), max_sequences=2, beyond_context=True)
    assert longer["seq_len"].tolist() == [256] and longer["heldout_loss"].notna().all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_trains_on_cuda_in_bf16(data, tmp_path):
    frame = train(
        "rope",
        True,
        data / "blocks",
        tmp_path / "out",
        tmp_path / "ckpt",
        {**CFG, "device": "cuda", "steps": 40, "threads": 0},
    )
    evaluated = frame.dropna(subset=["heldout_loss"])["heldout_loss"]
    assert evaluated.iloc[-1] < evaluated.iloc[0] - 1.0
    lengths = evaluate_lengths(tmp_path / "out", data / "blocks", factors=(1, 2), max_sequences=4)
    assert lengths["heldout_loss"].notna().all()


def test_paper_config_is_the_papers_recipe():
    """config/paper.yaml: 1.5B parameters, 22 layers, hidden 2048, head dim 64, context 1024,
    peak lr 3e-4, a 1M-token global batch and 20B tokens (Section 4.2)."""
    from transformers import SmolLM3ForCausalLM

    from causalpos.workflow.config import load_config
    from causalpos.models.model import model_config

    # devices=False: a GPU config, checked here on a machine that may have none
    config = load_config(Path(__file__).resolve().parents[2] / "config" / "paper.yaml", devices=False)
    training, block = config["training"], config["tokenizer"]["block_len"]
    shape = training["model"]
    assert (shape["n_layers"], shape["hidden_size"], shape["head_dim"], block) == (22, 2048, 64, 1024)
    with torch.device("meta"):  # no memory: shapes only
        model = SmolLM3ForCausalLM(model_config(shape, 128256, rope=False))  # the Llama-3 vocabulary
    assert 1.4e9 < sum(p.numel() for p in model.parameters()) < 1.6e9
    global_tokens = training["micro_batch"] * training["grad_accum"] * config["train_processes"] * block
    assert global_tokens == 2**20
    assert abs(training["steps"] * global_tokens - 20e9) < 0.01 * 20e9
    assert training["lr"] == 3e-4 and training["warmup_steps"] > 0
