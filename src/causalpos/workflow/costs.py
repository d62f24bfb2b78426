"""What a config asks of its largest jobs, estimated before any job runs, against what those jobs request
(rules/resources.yaml: mem_mb, and runtime in minutes, the limits a cluster holds them to): a size no job could run is
refused at once, naming its key and the estimate, instead of crashing an hour in or running for ever. A training
resumes from its checkpoints when its job is stopped at the time limit, so its time is held to a year instead.

Each estimate is a lower bound, counting only the arrays a job cannot do without and its arithmetic at a speed beyond
any machine it runs on (GPU_SPEED, CPU_SPEED), so a refusal says the job cannot fit, never that it might not. The defaults and
config/paper.yaml ask for a small fraction of every limit (tests/unit/test_costs.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from causalpos.errors import ConfigError

# floating-point operations per second, beyond what a job of ours reaches: one H100's dense fp32 rate is ~6.7e13;
# the simulation kernel ran at ~7e11 on this 2-core machine (bench/bench_simulate.py), a 100-core node would not
# reach 1e13
GPU_SPEED, CPU_SPEED = 1e14, 1e13
FLOAT = 8  # bytes: the simulations and closed forms work in float64
TRAIN_FLOAT = 4  # the trainings in float32
RESUMED_LIMIT = 365.25 * 86400  # seconds: a job that resumes across reruns, refused where it needs a year


@dataclass(frozen=True)
class Cost:
    key: str  # the setting that sets the size
    rule: str  # the rule whose job pays it
    what: str  # what is counted
    bytes: float = 0.0
    seconds: float = 0.0
    resumes: bool = False  # a job stopped at its time limit goes on from its checkpoint when rerun: time is no limit


def simulation_costs(config: dict) -> list[Cost]:
    """Each variant's job: one streamed chunk of inputs and queries/keys per layer ([chunk, seq_len, d] each), its
    score sums ([n_layers, seq_len, seq_len]); per sample and layer the seq_len^2 x d products of the scores."""
    found = []
    simulation = config["simulation"]
    for name, fields in simulation["variants"].items():
        v = {**simulation["defaults"], **(fields or {})}
        chunk = min(simulation["chunk_size"], v["n_samples"])
        memory = FLOAT * (3 * chunk * v["seq_len"] * v["d"] + 2 * v["n_layers"] * v["seq_len"] ** 2)
        flops = 2.0 * v["n_samples"] * v["n_layers"] * v["seq_len"] ** 2 * v["d"]
        key = f"simulation.variants.{name} (n_samples {v['n_samples']:,}, d {v['d']:,}, seq_len {v['seq_len']:,})"
        speed = CPU_SPEED if config.get("device") == "cpu" else GPU_SPEED  # auto takes a GPU where there is one
        found.append(Cost(key, "simulate", "a variant", memory, flops / speed))
    return found


def theory_costs(config: dict) -> list[Cost]:
    """The closed forms' table: a row per alpha and (query, key) pair below the diagonal, a few float columns."""
    seq_len, alphas = config["theory"]["seq_len"], len(config["theory"]["alphas"])
    rows = alphas * seq_len * (seq_len + 1) / 2
    return [Cost(f"theory.seq_len = {seq_len:,}", "theory", "the closed forms' table", 6 * FLOAT * rows)]


def training_costs(config: dict) -> list[Cost]:
    """One training job: the weights with their gradients and Adam's two moments, and one micro-batch's logits
    ([micro_batch, block_len, vocab]) with their gradient; 6 operations per weight per token (forward and back)."""
    training, tokenizer = config["training"], config["tokenizer"]
    model = training["model"]
    vocab, width, layers = tokenizer["vocab_size"], model["hidden_size"], model["n_layers"]
    attention = width * model["head_dim"] * (2 * model["n_heads"] + 2 * model["n_kv_heads"])
    weights = vocab * width + layers * (attention + 3 * width * model["intermediate_size"])
    tokens = training["micro_batch"] * tokenizer["block_len"]
    memory = TRAIN_FLOAT * (4 * weights + 2 * tokens * vocab)
    flops = 6.0 * weights * tokens * training["grad_accum"] * training["steps"]
    key = (
        f"training (steps {training['steps']:,}, tokenizer.vocab_size {vocab:,}, "
        f"training.model.hidden_size {width:,}, micro_batch x block_len {tokens:,} tokens)"
    )
    speed = (CPU_SPEED if training["device"] == "cpu" else GPU_SPEED) * config["train_processes"]
    return [Cost(key, "train", "a training", memory, flops / speed, resumes=True)]


def config_costs(config: dict) -> list[Cost]:
    return simulation_costs(config) + theory_costs(config) + training_costs(config)


def check_costs(config: dict, request) -> None:
    """Refuse a config whose estimate exceeds what a job of the rule requests; `request(rule)` gives the job's
    mem_mb and runtime (minutes) as rules/resources.yaml sets them for this config. Raises ConfigError naming each."""
    refused = []
    for cost in config_costs(config):
        asked = request(cost.rule)
        memory, minutes = asked["mem_mb"] * 1e6, asked["runtime"]
        if cost.bytes > memory:
            refused.append(
                f"{cost.key}: {cost.what} needs at least {_size(cost.bytes)} of memory; a {cost.rule} job asks for "
                f"{_size(memory)} (rules/resources.yaml)"
            )
        if cost.resumes and cost.seconds > RESUMED_LIMIT:
            refused.append(
                f"{cost.key}: {cost.what} takes at least {_duration(cost.seconds)} at a speed beyond any machine's"
            )
        elif not cost.resumes and cost.seconds > 60 * minutes:
            refused.append(
                f"{cost.key}: {cost.what} takes at least {_duration(cost.seconds)} at a speed beyond any machine's; a {cost.rule} job is given {_duration(60 * minutes)} (rules/resources.yaml)"
            )
    if refused:
        raise ConfigError("a job cannot do what the config asks:\n  " + "\n  ".join(refused))


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB", "EB"):
        if n < 1000 or unit == "EB":
            return f"{n:,.1f} {unit}"
        n /= 1000
    raise AssertionError


def _duration(seconds: float) -> str:
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:,.1f} s"
