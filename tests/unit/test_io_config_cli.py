"""Atomic outputs, config checking and the CLI (the same stage functions as the rules)."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from causalpos.workflow.cli import main
from causalpos.models.settings import ModelSettings, TrainingSettings
from causalpos.workflow.config import ConfigError, load_config, training_defaults, validate_config
from causalpos.workflow.settings import variant_params
from causalpos.io import atomic_path, read_metadata, write_parquet

ROOT = Path(__file__).resolve().parents[2]


def test_atomic_path_leaves_nothing_when_writing_fails(tmp_path):
    target = tmp_path / "out.parquet"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"half a file")
            raise RuntimeError("killed mid-write")
    assert list(tmp_path.iterdir()) == []


def test_write_parquet_roundtrip_with_metadata(tmp_path):
    frame = pd.DataFrame({"layer": [0, 1], "score_mean": [0.5, 0.25]})
    write_parquet(frame, tmp_path / "a" / "t.parquet", {"variant": "x", "seconds": 1.5})
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "a" / "t.parquet"), frame)
    assert read_metadata(tmp_path / "a" / "t.parquet") == {"variant": "x", "seconds": 1.5}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["t.parquet"]


def test_write_parquet_failure_leaves_no_file(tmp_path):
    bad = pd.DataFrame({"mixed": [1, "a", object()]})
    with pytest.raises(Exception):
        write_parquet(bad, tmp_path / "bad.parquet")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def config():
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def test_default_and_test_configs_are_valid():
    for path in (ROOT / "config.yaml", ROOT / ".test" / "config.yaml"):
        load_config(path)
    # a cluster config (device: cuda): its GPUs are on the nodes, not necessarily where the tests run
    load_config(ROOT / "config" / "paper.yaml", devices=False)


def test_validation_fills_defaults(config):
    del config["simulation"]["threads"]
    del config["plot"]["dpi"]
    validate_config(config)
    assert config["simulation"]["threads"] == 8 and config["plot"]["dpi"] == 150


def test_the_schema_holds_every_training_default(config):
    """A config without a training section trains with the schema's defaults, every key of the settings; outside
    a config (tests, bench/) training_defaults gives the same, under any keys given."""
    del config["training"]
    del config["extraction"]["threads"]
    validate_config(config)
    assert list(config["training"]) == list(TrainingSettings.__annotations__)
    assert list(config["training"]["model"]) == list(ModelSettings.__annotations__)
    assert config["training"] == training_defaults() and config["training"]["threads"] == 8
    assert config["extraction"]["threads"] == 8
    assert training_defaults({"steps": 7, "model": {"n_layers": 2}}) == {
        **training_defaults(),
        "steps": 7,
        "model": {**training_defaults()["model"], "n_layers": 2},
    }
    with pytest.raises(ConfigError, match=r"training.model.n_heads = 0 is invalid"):
        training_defaults({"model": {"n_heads": 0}})
    with pytest.raises(ConfigError, match=r"training: unknown key\(s\) \['dropout'\]"):
        training_defaults({"dropout": 0.1})


def test_variant_inherits_defaults_and_overrides(config):
    validate_config(config)
    params = variant_params(config, "rope_nomask_alpha0.0")
    assert params["pe"] == "rope" and params["mask"] == "none"
    assert params["d"] == config["simulation"]["defaults"]["d"]


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (("simulation", "defaults", "alpha"), 1.0, "simulation.defaults.alpha"),
        (("simulation", "defaults", "alpha"), -0.5, "simulation.defaults.alpha"),
        (("simulation", "defaults", "seq_len"), 1, "simulation.defaults.seq_len"),
        (("simulation", "defaults", "norm"), "batchnorm", "allowed values: ['l2', 'layernorm']"),
        (("simulation", "defaults", "typo"), 3, "unknown key(s) ['typo']"),
        (("theory", "alphas"), [0.2, 1.5], "theory.alphas.1"),
        (("plot", "formats"), ["jpg"], "plot.formats.0"),
        (("device",), "tpu", "allowed values: ['auto', 'cpu', 'cuda']"),
        (("training", "model", "n_heads"), 0, "training.model.n_heads"),
        (("training", "dropout"), 0.1, "unknown key(s) ['dropout']"),
    ],
)
def test_bad_values_name_the_key(config, path, value, expected):
    node = config
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=None) as err:
        validate_config(config)
    assert expected in str(err.value)


def test_cross_key_checks(config):
    bad = copy.deepcopy(config)
    bad["simulation"]["variants"]["odd_rope"] = {"pe": "rope", "d": 33}
    with pytest.raises(ConfigError, match="simulation.variants.odd_rope"):
        validate_config(bad)
    bad = copy.deepcopy(config)
    bad["figures"]["fig04_rope"]["variants"] = ["nope"]
    with pytest.raises(ConfigError, match="figures.fig04_rope.variants"):
        validate_config(bad)


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            lambda c: c["training"]["model"].update(n_heads=3),
            "training.model.n_heads = 3 does not divide training.model.hidden_size = 256",
        ),
        (lambda c: c["tokenizer"].update(block_len=2048), "tokenizer.block_len = 2048 exceeds training.model.context"),
        (lambda c: c["evaluation"].update(length_factors=[1, 8]), "evaluation.length_factors: 8 x tokenizer.block_len"),
        (
            lambda c: c["training"].update(lr=0.01, min_lr=0.1),
            "training.min_lr = 0.1 must be between 0 and training.lr",
        ),
    ],
)
def test_training_settings_are_checked_with_the_config(config, change, expected):
    """A training setting that cannot work stops the workflow at its start, not after sampling and tokenising."""
    change(config)
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    assert expected in str(err.value)


def test_cli_reports_config_errors_without_traceback(tmp_path, capsys):
    cfg = yaml.safe_load((ROOT / ".test" / "config.yaml").read_text())
    cfg["simulation"]["defaults"]["alpha"] = 2
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["--configfile", str(tmp_path / "c.yaml"), "check"]) == 2
    assert "simulation.defaults.alpha" in capsys.readouterr().err


def test_cli_names_a_missing_corpus_path(tmp_path, capsys):
    cfg = yaml.safe_load((ROOT / ".test" / "config.yaml").read_text())
    cfg["data"]["sources"] = [{"type": "files", "paths": [str(tmp_path / "nowhere")], "text_column": "text"}]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["--configfile", str(tmp_path / "c.yaml"), "check"]) == 2
    err = capsys.readouterr().err
    assert "data.sources[0].paths" in err
    assert not (tmp_path / "r" / "data" / "documents.parquet").exists()


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            lambda c: c["extraction"]["pretrained"]["models"].update(nope={"gguf": "embedded"}),
            "extraction.pretrained.models.nope: 'nope' is the name of a trained model",
        ),
        (
            lambda c: c["extraction"]["pretrained"]["models"].update(mine={"path": "/no/such/folder"}),
            "extraction.pretrained.models.mine.path: folder /no/such/folder does not exist",
        ),
        (
            lambda c: c["extraction"]["pretrained"]["models"].update(two={"name": "a/b", "path": "/tmp"}),
            "extraction.pretrained.models.two: give exactly one of gguf, path, name",
        ),
        (lambda c: c["extraction"].update(intermediates_layer=3), "extraction.intermediates_layer = 3 is out of range"),
        (
            lambda c: c["figures"]["fig03_intermediates"].update(model="gpt2"),
            "figures.fig03_intermediates.model = 'gpt2'",
        ),
        (lambda c: c["figures"]["fig05_llms"].update(models=["llama"]), "figures.fig05_llms.models: ['llama']"),
        (lambda c: c["extraction"]["pretrained"].update(models={}), "figures.fig05_llms: name at least one model"),
    ],
)
def test_extraction_settings_are_checked_with_the_config(config, change, expected):
    change(config)
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    assert expected in str(err.value)


def test_cli_checks_and_lists_a_good_config(capsys):
    assert main(["--configfile", str(ROOT / ".test" / "config.yaml"), "check"]) == 0
    assert "OK (results in results)" in capsys.readouterr().out
    assert main(["--configfile", str(ROOT / ".test" / "config.yaml"), "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert "model nope trained" in listed and any(line.startswith("model smollm2_135m pretrained") for line in listed)
    assert sum(line.startswith("variant ") for line in listed) == 8


# ---------------------------------------------------------------- no tracebacks (issue 40, the probe's cases)


def tiny_config_text() -> str:
    return (ROOT / ".test" / "config.yaml").read_text()


@pytest.mark.parametrize(
    "text, message",
    [
        ("- data\n- training\n", "line 1: its top level is a list; a config maps keys"),
        ("x: !!python/object:os.system 1\n", "line 1, column 4: not valid YAML: could not determine a constructor"),
    ],
    ids=["a-list", "a-python-tag"],
)
def test_a_config_that_is_no_mapping_is_one_line_naming_file_and_line(tmp_path, capsys, text, message):
    (tmp_path / "c.yaml").write_text(text)
    assert main(["--configfile", str(tmp_path / "c.yaml"), "check"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"causalpos check: config file {tmp_path / 'c.yaml'}") and message in line


@pytest.mark.parametrize("under", [False, True], ids=["a-file", "under-a-file"])
def test_results_naming_a_file_is_refused_naming_the_key(tmp_path, capsys, under):
    (tmp_path / "taken").write_text("a file")
    results = tmp_path / "taken" / "results" if under else tmp_path / "taken"
    (tmp_path / "c.yaml").write_text(tiny_config_text() + f"\nresults: {results}\n")
    assert main(["--configfile", str(tmp_path / "c.yaml"), "check"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"results = '{results}'" in line and "a file; results names the folder" in line
