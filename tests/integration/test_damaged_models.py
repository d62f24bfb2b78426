"""Damaged model weights, tokenizers and converted pretrained models (issue 28): named, moved aside, rebuilt.

models.model_files checks a safetensors file's header against the file's size, and a model's or tokenizer's
JSON files, before anything loads them; a stage reading a damaged one moves it aside (with its whole folder
where the folder is a directory() output, with the folder's declared output where the file is not one) and
names the rule that rebuilds it, as it does for a table (tests/integration/test_faults.py).

Here on small folders of their own; end to end on a copy of the session's finished tiny run:
tests/workflow/test_damaged_end_to_end.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file

from causalpos.io import DamagedFileError, write_parquet
from causalpos.models.model import build_model
from causalpos.catalogue import paths
from causalpos.workflow.job import Job, run_job
from helpers import BLOCK, CFG, TINY, VOCAB, make_tokenizer

RERUN = "run the same snakemake command again."


def damaged(path: Path, reason: str = "") -> str:
    """The start of the message naming `path` (a regular expression)."""
    return rf"^{re.escape(str(path))} is damaged \({reason}"


def replace(path: Path, raw: bytes) -> None:
    """Write `raw` as a new file (in a copy of the shared run a large file is a hard link: never write into it)."""
    path.unlink()
    path.write_bytes(raw)


# ---------------------------------------------------------------- the checks, unit


@pytest.fixture
def weights(tmp_path) -> Path:
    path = tmp_path / "model.safetensors"
    save_file(
        {"a": torch.arange(10, dtype=torch.float32).reshape(2, 5), "b": torch.zeros(3, dtype=torch.int64)},
        path,
        metadata={"format": "pt"},
    )
    return path


def cut(at):
    return lambda raw, n: raw[: at(raw, n)]


DAMAGES = {  # (raw bytes, header length N) -> damaged bytes
    "cut_in_the_header_length": cut(lambda raw, n: 5),
    "cut_in_the_header": cut(lambda raw, n: 8 + n // 2),
    "cut_in_the_data": cut(lambda raw, n: len(raw) - 3),
    "empty": cut(lambda raw, n: 0),
    "flipped_header_byte": lambda raw, n: raw[:8] + bytes([raw[8] ^ 0x01]) + raw[9:],  # "{" -> "z": not JSON
    "flipped_shape_digit": lambda raw, n: raw.replace(b"[2,5]", b"[2,6]", 1),  # JSON, sizes wrong
    "trailing_garbage": lambda raw, n: raw + b"\0" * 16,
}


def test_a_good_safetensors_file_passes(weights):
    from causalpos.models.model_files import verify_safetensors

    header = verify_safetensors(weights)
    assert header["a"] == {"dtype": "F32", "shape": [2, 5], "data_offsets": [24, 64]}
    assert set(header) == {"__metadata__", "a", "b"}


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_safetensors_file_raises_an_error_naming_it(weights, how):
    from causalpos.models.model_files import verify_safetensors

    raw = weights.read_bytes()
    replace(weights, DAMAGES[how](raw, int.from_bytes(raw[:8], "little")))
    with pytest.raises(Exception):  # what the check refuses, safetensors refuses too
        load_file(weights)
    with pytest.raises(DamagedFileError, match=damaged(weights)) as info:
        verify_safetensors(weights)
    assert info.value.path == str(weights) and isinstance(info.value, ValueError)


@pytest.fixture
def model_folder(tmp_path) -> Path:
    """A trained model's folder as rule train writes it (weights, config, generation config, tokenizer)."""
    folder = tmp_path / "results" / "models" / "rope"
    torch.manual_seed(0)
    build_model(TINY, VOCAB, True, 0).save_pretrained(folder)
    make_tokenizer(folder)
    return folder


def test_good_model_and_tokenizer_folders_pass(model_folder):
    from causalpos.models.model_files import verify_model_folder, verify_tokenizer_folder

    verify_model_folder(model_folder)
    verify_tokenizer_folder(model_folder)


@pytest.mark.parametrize("name", ["config.json", "generation_config.json"])
def test_a_model_folder_with_broken_json_names_the_file(model_folder, name):
    from causalpos.models.model_files import verify_model_folder

    path = model_folder / name
    replace(path, path.read_bytes()[:40])
    with pytest.raises(DamagedFileError, match=damaged(path, "JSONDecodeError")) as info:
        verify_model_folder(model_folder)
    assert info.value.companion == str(model_folder / "model.safetensors")  # moved aside with it


@pytest.mark.parametrize(
    "name, text, reason",
    [
        ("tokenizer.json", None, "JSONDecodeError"),  # truncated
        ("tokenizer.json", '{"model": 3}', "the tokenizers library cannot load it"),
        ("tokenizer_config.json", "", "empty"),
        ("special_tokens_map.json", '{"eos_token": ', "JSONDecodeError"),
    ],
)
def test_a_tokenizer_folder_with_a_broken_file_names_it(model_folder, name, text, reason):
    from causalpos.models.model_files import verify_tokenizer_folder

    path = model_folder / name
    if path.exists():
        replace(path, path.read_bytes()[:100] if text is None else text.encode())
    else:
        path.write_text(text)
    with pytest.raises(DamagedFileError, match=damaged(path, reason)):
        verify_tokenizer_folder(model_folder)


# ---------------------------------------------------------------- the jobs that load them, as the workflow runs them


@pytest.fixture
def blocks(data) -> Path:
    return data / "blocks"


def run_length_eval(model_folder: Path, blocks: Path, factors, tmp_path: Path) -> None:
    run_job(
        Job(
            "length_eval",
            input={"model": str(model_folder / "model.safetensors"), "blocks": str(blocks / "blocks.json")},
            output={"table": str(tmp_path / "length_eval.parquet")},
            params={"factors": factors, "max_sequences": 2, "device": "cpu"},
        )
    )


def test_length_eval_moves_a_truncated_model_aside_and_names_rule_train(
    model_folder, blocks, tmp_path, published_writers
):
    weights = model_folder / "model.safetensors"
    replace(weights, weights.read_bytes()[:1000])
    expected = (
        damaged(weights, "its header of \\d+ bytes does not fit")
        + r".*\); "
        + re.escape(f"moved to {weights}.damaged. Rule train rebuilds it: {RERUN}")
        + "$"
    )
    with pytest.raises(DamagedFileError, match=expected):
        run_length_eval(model_folder, blocks, [1, 2], tmp_path)
    assert not weights.exists() and Path(f"{weights}.damaged").exists()
    assert not (tmp_path / "length_eval.parquet").exists()


def test_a_damaged_file_its_rule_does_not_declare_takes_the_weights_with_it(
    model_folder, blocks, tmp_path, published_writers
):
    """generation_config.json is no output of rule train: moved aside alone it would rerun nothing."""
    path, weights = model_folder / "generation_config.json", model_folder / "model.safetensors"
    replace(path, b"{")
    expected = (
        damaged(path, "JSONDecodeError")
        + r".*\); "
        + re.escape(
            f"moved to {path}.damaged, and {weights}, the output of its rule beside it, to {weights}.damaged, so that "
            f"Snakemake runs that rule again. Rule train rebuilds both: {RERUN}"
        )
        + "$"
    )
    with pytest.raises(DamagedFileError, match=expected):
        run_length_eval(model_folder, blocks, [1], tmp_path)
    assert not path.exists() and not weights.exists()
    assert Path(f"{path}.damaged").exists() and Path(f"{weights}.damaged").exists()


def test_emergence_moves_the_snapshots_folder_of_a_damaged_snapshot_aside(
    model_folder, blocks, tmp_path, published_writers
):
    """A snapshot lies in rule train's directory() output: Snakemake notices the folder missing, not a file."""
    from causalpos.models.snapshots import snapshot_name, write_snapshot

    model = build_model(TINY, VOCAB, True, 0)
    snapshots = model_folder / "snapshots"
    for step in (0, 4):
        write_snapshot(model, snapshots / snapshot_name(step))
    older = Path(f"{snapshots}.damaged")
    older.mkdir()
    (older / "x").write_text("a folder moved aside before")
    bad = snapshots / snapshot_name(4)
    replace(bad, bad.read_bytes() + b"garbage")
    (model_folder / "training.json").write_text(json.dumps({"training": CFG, "blocks": {"block_len": BLOCK}}))
    metrics = tmp_path / "metrics.parquet"
    write_parquet(pd.DataFrame({"step": [0, 4], "heldout_loss": [5.0, 4.0]}), metrics)
    snippets = tmp_path / "snippets.npy"
    np.save(snippets, np.arange(40, dtype=np.uint16).reshape(4, 10))
    expected = (
        damaged(bad, "7 bytes after its last tensor")
        + r".*\); "
        + re.escape(
            f"moved its folder {snapshots} (an output of rule train) to {snapshots}.damaged. Rule train rebuilds it: "
            f"{RERUN}"
        )
        + "$"
    )
    with pytest.raises(DamagedFileError, match=expected):
        run_job(
            Job(
                "emergence",
                wildcards={"model": "rope"},
                input={
                    "model": str(model_folder / "model.safetensors"),
                    "snapshots": str(snapshots),
                    "tokens": str(snippets),
                    "blocks": str(blocks / "blocks.json"),
                    "metrics": str(metrics),
                },
                params={
                    "settings": {"batch_size": 2, "intermediates_layer": 0, "bootstrap_groups": 2},
                    "steps": [0, 4],
                    "device": "cpu",
                    "seed": 0,
                },
            )
        )
    assert not snapshots.exists() and (older / snapshot_name(4)).exists() and not (older / "x").exists()


def test_training_names_a_damaged_tokenizer_before_it_trains(data, tmp_path, published_writers):
    """Rule tokenizer declares tokenizer.json: a damaged special_tokens_map.json (not declared) takes it along."""
    results = tmp_path / "results"
    tokenizer = Path(paths.tokenizer_dir(str(results)))
    make_tokenizer(tokenizer)
    settings = {**CFG, "steps": 4, "eval_every": 0, "checkpoint_every": 0, "log_every": 2}
    out_dir = Path(paths.model_dir("nope", str(results)))
    job = Job(
        "train",
        wildcards={"model": "nope"},
        input={"blocks": str(data / "blocks" / "blocks.json"), "tokenizer": str(tokenizer / "tokenizer.json")},
        output={"model": str(out_dir / "model.safetensors")},
        params={"settings": settings, "processes": 1, "checkpoints": paths.checkpoints_dir(str(results))},
    )
    path = tokenizer / "tokenizer.json"
    raw = path.read_bytes()
    replace(path, raw[: len(raw) // 2])
    with pytest.raises(
        DamagedFileError,
        match=damaged(path, "JSONDecodeError")
        + r".*\); "
        + re.escape(f"moved to {path}.damaged. Rule tokenizer rebuilds it: {RERUN}")
        + "$",
    ):
        run_job(job)
    assert not path.exists() and not (out_dir / "model.safetensors").exists()

    path.write_bytes(raw)
    special = tokenizer / "special_tokens_map.json"
    special.write_text('{"eos_token": ')
    with pytest.raises(
        DamagedFileError,
        match=damaged(special, "JSONDecodeError")
        + r".*\); "
        + re.escape(
            f"moved to {special}.damaged, and {path}, the output of its rule beside it, to {path}.damaged, so that "
            f"Snakemake runs that rule again. Rule tokenizer rebuilds both: {RERUN}"
        )
        + "$",
    ):
        run_job(job)
    assert not special.exists() and not path.exists()


@pytest.fixture
def converted(tmp_path) -> Path:
    """A converted pretrained model's folder, as rule pretrained writes it (a directory() output)."""
    folder = Path(paths.pretrained_dir("smollm2_135m", str(tmp_path / "results")))  # a GGUF model of the tiny config
    torch.manual_seed(0)
    build_model(TINY, VOCAB, True, 0).save_pretrained(folder)
    make_tokenizer(folder)
    return folder


def ablate_pretrained(location, documents, tmp_path):
    settings = {"seq_len": 8, "batch_size": 2, "splits": ["heldout"], "setting": "first"}
    run_job(
        Job(
            "pattern_ablation_pretrained",
            wildcards={"model": "tiny_llm"},
            input={"documents": str(documents) if documents else None},
            output={"table": str(tmp_path / "ablation.parquet")},
            params={
                "settings": settings,
                "location": location,
                "n_estimate": 2,
                "n_evaluate": 2,
                "device": "cpu",
                "seed": 0,
            },
        )
    )


@pytest.mark.parametrize("name", ["tokenizer.json", "model.safetensors"])
def test_a_damaged_converted_model_moves_its_folder_aside_and_names_rule_pretrained(
    converted, tmp_path, name, published_writers
):
    rng = np.random.default_rng(0)
    documents = tmp_path / "documents.parquet"
    write_parquet(
        pd.DataFrame(
            {
                "doc_id": [f"d{i}" for i in range(8)],
                "source": "x",
                "split": "heldout",
                "text": [" ".join(f"t{t}" for t in rng.integers(1, VOCAB, 20)) for _ in range(8)],
            }
        ),
        documents,
    )
    path = converted / name
    replace(path, path.read_bytes()[: len(path.read_bytes()) // 2])
    expected = (
        damaged(path)
        + r".*\); "
        + re.escape(
            f"moved its folder {converted} (an output of rule pretrained) to {converted}.damaged. Rule pretrained "
            f"rebuilds it: {RERUN}"
        )
        + "$"
    )
    with pytest.raises(DamagedFileError, match=expected):
        ablate_pretrained(str(converted), documents, tmp_path)
    assert not converted.exists() and Path(f"{converted}.damaged", name).exists()


def test_a_reader_finding_the_file_moved_aside_by_another_job_says_so(
    model_folder, converted, blocks, tmp_path, published_writers
):
    """Several jobs read one model at once: the first moves the damaged file (or folder) aside, the others say so."""
    weights = model_folder / "model.safetensors"
    weights.rename(f"{weights}.damaged")
    with pytest.raises(
        DamagedFileError,
        match=damaged(weights, "another job reading it found it damaged and moved it aside")
        + re.escape(f"); moved to {weights}.damaged. Rule train rebuilds it"),
    ):
        run_length_eval(model_folder, blocks, [1], tmp_path)
    converted.rename(f"{converted}.damaged")
    with pytest.raises(
        DamagedFileError,
        match=damaged(converted, "another job reading it")
        + r".*"
        + re.escape(f"moved to {converted}.damaged. Rule pretrained rebuilds it"),
    ):
        ablate_pretrained(str(converted), None, tmp_path)
    assert Path(f"{converted}.damaged", "model.safetensors").exists()


def test_a_damaged_model_folder_of_the_config_is_named_and_left_in_place(converted, tmp_path, published_writers):
    """A `path:` model of the config is no result: no rule rebuilds it, and its files stay where they are."""
    from causalpos.models.extract import ATTENTION_NAME
    from causalpos.models.pretrained import load_for_extraction
    from causalpos.workflow.job import moved_aside

    (tmp_path / "downloads").mkdir()
    folder = converted.rename(tmp_path / "downloads" / "llm")
    config = folder / "config.json"
    replace(config, b'{"architectures": ')
    expected = damaged(config, "JSONDecodeError") + r".*\); no rule of the workflow writes it: replace it\.$"
    with pytest.raises(DamagedFileError, match=expected):
        try:
            load_for_extraction(str(folder), "extraction.pretrained.models.llm", torch.device("cpu"), ATTENTION_NAME)
        except DamagedFileError as err:  # what run_job does with a damaged input
            raise moved_aside(err) from err
    assert config.exists() and not Path(f"{config}.damaged").exists()
