"""A config cannot ask for the impossible (issue 40): NaN and infinity, whole numbers written as floats, and sizes
whose memory or time no job could afford are refused before any job, naming the key and the estimate; the shipped
configs ask for a small fraction of every limit."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from causalpos.errors import ConfigError
from causalpos.workflow import settings
from causalpos.workflow.config import validate_config
from causalpos.workflow.costs import check_costs, config_costs

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = yaml.safe_load((ROOT / "rules" / "resources.yaml").read_text())
CONFIGS = ["config.yaml", "config/paper.yaml", ".test/config.yaml"]


def loaded(name: str) -> dict:
    return validate_config(yaml.safe_load((ROOT / name).read_text()), devices=False)


def request(config):
    return lambda rule: settings.job_request(RESOURCES, config, rule)


def tiny_with(change) -> dict:
    config = yaml.safe_load((ROOT / ".test" / "config.yaml").read_text())
    change(config)
    return config


@pytest.mark.parametrize("name", CONFIGS)
def test_the_shipped_configs_ask_for_a_fraction_of_every_limit(name):
    config = loaded(name)
    for cost in config_costs(config):
        asked = request(config)(cost.rule)
        assert cost.bytes < 0.6 * asked["mem_mb"] * 1e6, cost
        if not cost.resumes:
            assert cost.seconds < 0.01 * 60 * asked["runtime"], cost
    check_costs(config, request(config))


@pytest.mark.parametrize(
    "change, key, estimate",
    [
        (lambda c: c["simulation"]["defaults"].update(d=10**7), "d 10,000,000", "needs at least 1.5 TB of memory"),
        (
            lambda c: (c.update(device="cpu"), c["simulation"]["defaults"].update(n_samples=10**9, seq_len=512)),
            "n_samples 1,000,000,000",
            "takes at least 3.7 hours",
        ),
        (lambda c: c["theory"].update(seq_len=10**7), "theory.seq_len = 10,000,000", "needs at least 4.8 PB"),
        (
            lambda c: (
                c["tokenizer"].update(vocab_size=10**6),
                c["training"]["model"].update(hidden_size=4096, head_dim=2048),
            ),
            "vocab_size 1,000,000",
            "needs at least 69.2 GB of memory",
        ),
        (
            lambda c: (
                c["training"].update(steps=10**8, micro_batch=256),
                c["training"]["model"].update(hidden_size=2048, head_dim=1024, n_layers=22),
            ),
            "steps 100,000,000",
            "years",
        ),
    ],
    ids=["d", "n_samples", "theory.seq_len", "vocab_size", "steps"],
)
def test_a_size_no_job_could_afford_is_refused_naming_its_key_and_estimate(change, key, estimate):
    config = validate_config(tiny_with(change), devices=False)
    with pytest.raises(ConfigError) as refused:
        check_costs(config, request(config))
    line = next(line for line in str(refused.value).splitlines() if key in line)
    assert estimate in line


def test_a_training_resumes_so_only_a_year_refuses_its_time():
    config = loaded("config/paper.yaml")
    (train,) = [cost for cost in config_costs(config) if cost.rule == "train"]
    assert train.resumes and 60 * request(config)("train")["runtime"] < train.seconds < 86400  # hours, over jobs


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["simulation"]["defaults"].update(d=64.0), "simulation.defaults.d = 64.0 must be a whole number"),
        (lambda c: c["theory"].update(seq_len=12.0), "theory.seq_len = 12.0 must be a whole number"),
        (
            lambda c: c.setdefault("claims", {}).setdefault("thresholds", {}).update(family_alpha=float("nan")),
            "claims.thresholds.family_alpha = nan is not a finite number",
        ),
        (lambda c: c["simulation"]["defaults"].update(alpha=float("inf")), "alpha = inf is not a finite number"),
        (lambda c: c.setdefault("plot", {}).update(font_scale=float("-inf")), "font_scale = -inf is not a finite"),
    ],
    ids=["d-float", "seq_len-float", "nan-threshold", "inf-alpha", "inf-font"],
)
def test_nan_infinity_and_whole_floats_are_refused(change, message):
    with pytest.raises(ConfigError, match="invalid config") as refused:
        validate_config(tiny_with(change), devices=False)
    assert message in str(refused.value)


@pytest.mark.parametrize(
    "change, key",
    [
        (lambda c: c.update(train_processes=500), "train_processes = 500"),
        (lambda c: c["simulation"]["defaults"].update(n_samples=10**12), "n_samples = 1000000000000"),
        (lambda c: c.setdefault("training", {}).update(steps=2**64), "training.steps = 18446744073709551616"),
        (lambda c: c.setdefault("tokenizer", {}).update(vocab_size=10**8), "tokenizer.vocab_size = 100000000"),
        (lambda c: c.setdefault("plot", {}).update(font_scale=1000), "plot.font_scale = 1000"),
    ],
)
def test_counts_and_scales_have_an_upper_bound(change, key):
    with pytest.raises(ConfigError, match=key):
        validate_config(tiny_with(change), devices=False)
