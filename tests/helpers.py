"""Plain helpers shared by the test modules, imported as `from helpers import ...` (pytest puts tests/ on
sys.path); tests/conftest.py holds only the pytest hooks and fixtures, and test modules import nothing from it
nor from each other.

- Reference computations shared by the extraction tests and by bench/bench_extract.py (which puts tests/ on
  sys.path): independent of the extraction they check. `ProbabilityRecorder`, `mean_probabilities_eager`.
- Workflow copies: `ROOT`, `SNAKEMAKE`, `copy_workflow`, `snakemake`, `edit_config`, `planned_jobs`,
  `touch_source`, `processes_in`, `copy_with_profiles`, `copy_run`.
- SLURM: `JOB_ID`, `job_env`, `sacct_states`, `wait_for_accounting`, `local_slurm`.
- Training (tests/integration/test_train.py, test_emergence.py; their `data` fixture is conftest's): `VOCAB`, `BLOCK`,
  `CFG`, `TINY`, `env`, `make_tokenizer`, `command`, `start_and_wait_for_steps`.
- Synthetic tables of the claims ledger (tests/integration/test_claims.py, test_claims_figure.py): `S`, `R`, `I`, `J`,
  `LOWER`, `BASE`, `sim_table`, `identity`, `keys_up`, `model_tables`, `small_inputs`, ...
- `write_tiny_gguf` (tests/integration/test_config_checks.py, test_pretrained.py), `assert_convergence_is_the_ledger`
  (tests/workflow/test_workflow.py, test_paper_llms.py).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import torch
import yaml

from causalpos.models.recorder import ScoreRecorder
from causalpos.simulation.theory import layer2_scores, theory_frame
from causalpos.workflow.config import training_defaults


# ---------------------------------------------------------------- reference computations of the extraction


@dataclass
class ProbabilityRecorder(ScoreRecorder):
    """A ScoreRecorder that also sums the head-averaged attention probabilities, softmax of the recorded
    logits under the layer's mask, [layers, S, S] in `prob_total`: to compare with eager attention's."""

    prob_total: torch.Tensor = field(init=False)

    def __post_init__(self):
        super().__post_init__()
        self.prob_total = torch.zeros(
            self.n_layers, self.seq_len, self.seq_len, dtype=torch.float64, device=self.device
        )

    def record_scores(
        self,
        layer: int,
        query: torch.Tensor,
        key: torch.Tensor,
        scaling: float,
        attention_mask: torch.Tensor | None = None,
    ) -> None:
        super().record_scores(layer, query, key, scaling, attention_mask)
        # per-head probabilities: a [batch, heads, S, S] transient
        heads, groups, seq = query.shape[1], key.shape[1], query.shape[2]
        k = key.float().repeat_interleave(heads // groups, dim=1)
        scores = torch.einsum("bhqd,bhkd->bhqk", query.float(), k) * scaling
        masked = torch.ones(seq, seq, dtype=torch.bool, device=scores.device).triu(1)
        if self.hidden[layer] is not None:
            query_pos, key_pos = torch.tril_indices(seq, seq, device=scores.device)
            masked[query_pos[self.hidden[layer]], key_pos[self.hidden[layer]]] = True
        probs = scores.masked_fill(masked, float("-inf")).softmax(dim=-1)
        self.prob_total[layer] += probs.double().mean(dim=1).sum(dim=0)


def mean_probabilities_eager(model, tokens: np.ndarray, batch_size: int = 8) -> np.ndarray:
    """The straightforward way: eager attention with output_attentions=True, averaged over sequences
    and heads, [layers, S, S]."""
    total = None
    for start in range(0, len(tokens), batch_size):
        batch = torch.from_numpy(np.asarray(tokens[start : start + batch_size], dtype=np.int64))
        # the decoder without its LM head: no logits, only what the comparison needs
        out = model.model(input_ids=batch.to(next(model.parameters()).device), output_attentions=True, use_cache=False)
        stacked = torch.stack([a.double().mean(dim=1).sum(dim=0) for a in out.attentions])
        total = stacked if total is None else total + stacked
    return (total / len(tokens)).cpu().numpy()


def eager_softmax_inputs(model, ids: np.ndarray, monkeypatch) -> list:
    """Every layer's [sequences, heads, S, S] input of eager attention's softmax (its logits plus the mask: a very
    negative number where the mask hides a pair), caught on the way in; `model` loaded with eager attention."""
    caught, softmax = [], torch.nn.functional.softmax

    def spy(x, *args, **kwargs):
        caught.append(x.detach().double().clone())
        return softmax(x, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "softmax", spy)
    with torch.no_grad():
        model.model(input_ids=torch.from_numpy(ids), use_cache=False)
    monkeypatch.undo()
    assert len(caught) == model.config.num_hidden_layers
    return caught


# ---------------------------------------------------------------- workflow copies and SLURM


ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
LOCAL_SLURM = ROOT / "scripts" / "local-slurm.sh"
JOB_ID = re.compile(r"SLURM job id (\d+) on (\S+)")


LINK_MIN_BYTES = 1 << 20  # a copy of a finished run hard-links files this large (the converted LLM, checkpoints)


def copy_workflow(dest: Path) -> Path:
    for name in ("Snakefile", "rules", "workflow_scripts", "envs", "report"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / name)
    shutil.copytree(ROOT / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy2(ROOT / ".test" / "config.yaml", dest / "config.yaml")
    # The simulation kernels' numba cache (cache=True: in __pycache__ beside the source) is this checkout's:
    # the sources are the same files with the same times, so each kernel compiles once per test session,
    # not once in every copy and once more in the tests that run it here (some 6 s of CPU each time).
    kernels = ROOT / "src" / "causalpos" / "simulation" / "__pycache__"
    kernels.mkdir(exist_ok=True)
    (dest / "src" / "causalpos" / "simulation" / "__pycache__").symlink_to(kernels, target_is_directory=True)
    return dest


def snakemake(workdir: Path, *args: str, check: bool = True, timeout: float = 1800) -> subprocess.CompletedProcess:
    """Run snakemake in the copy; past `timeout` its whole process group (its jobs too) is stopped, not left."""
    env = {**os.environ, "PYTHONPATH": str(workdir / "src")}
    popen = subprocess.Popen(
        [SNAKEMAKE, "--cores", "2", *args],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.communicate()
        raise AssertionError(f"snakemake {' '.join(args)} still running after {timeout} s; stopped") from None
    proc = subprocess.CompletedProcess(popen.args, popen.returncode, out, err)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def planned_jobs(workdir: Path, target: str = "all_figures") -> set[tuple[str, str]]:
    """(rule, its wildcards' values or '') of every job `snakemake -n` would run: the values joined by ",", the
    results folder left out where it is the default one ("results") and added as "@<folder>" where it is another
    (("extract", "smollm2_135m@results/paper_llms"))."""
    out = snakemake(workdir, "-n", target).stdout
    jobs, rule = set(), None
    for line in out.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):", line):
            rule = m.group(1)
            jobs.add((rule, ""))
        elif rule and (m := re.match(r"^\s+wildcards: (.+)$", line)):
            values = dict(item.split("=", 1) for item in m.group(1).split(", "))
            folder = values.pop("results", "results")
            jobs.discard((rule, ""))
            jobs.add((rule, ",".join(values.values()) + ("" if folder == "results" else f"@{folder}")))
            rule = None
    return {job for job in jobs if job[0] not in TARGET_RULES}


def target_rules() -> set[str]:
    """The rules that make nothing of their own, only ask for other rules' outputs (all, verify, ...): read off the
    Snakefile and rules/*.smk, a rule without `output:`."""
    found = set()
    for path in [ROOT / "Snakefile", *(ROOT / "rules").glob("*.smk")]:
        parts = re.split(r"^rule (\w+):", path.read_text(), flags=re.M)
        found |= {name for name, body in zip(parts[1::2], parts[2::2]) if not re.search(r"^    output:", body, re.M)}
    return found


TARGET_RULES = target_rules()


RESULTS_MARKER = "/causalpos-results-marker"


def rule_outputs() -> list[tuple[str, str, bool]]:
    """What the Snakefile publishes to its jobs (workflow.provenance.writer_patterns: every rule's outputs), read off
    the real workflow of the tiny config in this process (workflow.introspect), for a results folder named
    RESULTS_MARKER: `writers_for` puts another folder in its place."""
    from causalpos.workflow.introspect import loaded_workflow
    from causalpos.workflow.provenance import writer_patterns

    with loaded_workflow([ROOT / ".test" / "config.yaml"], {"results": RESULTS_MARKER}) as workflow:
        return writer_patterns(workflow)


def writers_for(outputs, results) -> str:
    """rule_outputs() for the results folder `results`, as the environment variable's value."""
    import json

    marker, folder = re.escape(RESULTS_MARKER), re.escape(str(results))
    return json.dumps([[rule, regex.replace(marker, folder), is_dir] for rule, regex, is_dir in outputs])


def touch_source(workdir: Path, module: str) -> None:
    """Append a statement to src/causalpos/<module>.py of the copy (module as a path, e.g. "corpus/documents"): an
    edit of the code's meaning (a comment or a docstring changes no rule's digest: workflow.digest)."""
    path = workdir / "src" / "causalpos" / f"{module}.py"
    path.write_text(path.read_text() + "\nEDITED_BY_A_TEST = True\n")


def edit_config(workdir: Path, change) -> None:
    path = workdir / "config.yaml"
    config = yaml.safe_load(path.read_text())
    change(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def job_rule(argv: list[bytes]) -> str | None:
    """The rule of a Snakemake job process (argv from /proc: python .snakemake/scripts/tmpXXXX.job.py): every rule
    runs the same script, so the rule is read from the `snakemake` object the script's preamble unpickles."""
    import ast
    import pickle

    script = next((a.decode() for a in argv if b"/.snakemake/scripts/" in a and a.endswith(b".py")), None)
    if script is None:
        return None
    try:
        tree = ast.parse(Path(script).read_text())
    except (OSError, SyntaxError, ValueError):
        return None  # not written yet, or gone
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            try:
                return pickle.loads(node.value).rule
            except Exception:  # another bytes constant
                continue
    return None


def damage(path: Path, how: str) -> None:
    raw = path.read_bytes()
    if how == "truncated":
        raw = raw[: len(raw) // 2]
    elif how == "empty":
        raw = b""
    else:  # bytes overwritten inside a data page: only the page checksum notices
        middle = len(raw) // 3
        raw = raw[:middle] + b"\xff" * 16 + raw[middle + 16 :]
    path.unlink()  # a new file, not a write into this one: in a copy of the shared run it may be a hard link
    path.write_bytes(raw)


def default_stop_signals() -> None:
    """In a child: SIGINT and SIGTERM as a terminal's job gets them. A shell script's `cmd &` (and nohup)
    starts pytest with SIGINT ignored, which every child would inherit; these tests are about the signals."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def job_env(workdir: Path) -> dict:
    """What the submitting process hands to its SLURM jobs (sbatch --export=ALL): the venv first on PATH."""
    venv_bin = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "")]),
        "PYTHONPATH": str(workdir / "src"),
    }


def processes_in(workdir: Path) -> dict[int, list[bytes]]:
    """PID -> argv of every process whose working directory is `workdir` (from /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if os.readlink(entry / "cwd") == str(workdir):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
    return found


def sacct_states(job_ids) -> dict[str, str]:
    """SLURM job id -> state of the job allocation (-X), from accounting."""
    proc = subprocess.run(
        ["sacct", "-j", ",".join(map(str, job_ids)), "--format=JobID,State,ExitCode", "--noheader", "-X", "-P"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.strip()]
    return {job: state.split()[0] for job, state, _ in rows}


def wait_for_accounting(job_ids, timeout: float = 30) -> dict[str, str]:
    """sacct's states once every job has a final one (slurmctld sends the end record to slurmdbd asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        states = sacct_states(job_ids)
        final = all(states.get(str(job), "PENDING") not in ("PENDING", "RUNNING", "COMPLETING") for job in job_ids)
        if final or time.monotonic() > deadline:
            return states
        time.sleep(1)


def copy_with_profiles(dest: Path) -> Path:
    workdir = copy_workflow(dest)  # Snakefile, rules, scripts, src and .test/config.yaml as config.yaml
    shutil.copytree(ROOT / "profiles", workdir / "profiles")  # profiles/default is the workflow profile there too
    return workdir


def copy_run(src: Path, dest: Path) -> Path:
    """A copy of a finished workflow folder to run and edit, mtimes and Snakemake's metadata kept.

    Files of LINK_MIN_BYTES or more under results/ are hard links, not copies (the converted LLM alone is
    over 500 MB): Snakemake removes a job's outputs before the job runs and every stage writes by rename,
    so a rerun in the copy replaces the link and never writes into the original. A test that damages
    such a file must replace it too, not write into it."""

    def link_or_copy(source: str, target: str) -> None:
        inside = Path(source).relative_to(src).parts[0] == "results"
        if inside and os.path.getsize(source) >= LINK_MIN_BYTES:
            os.link(source, target)
        else:
            shutil.copy2(source, target)

    shutil.copytree(src, dest, symlinks=True, copy_function=link_or_copy)
    return dest


def local_slurm(command: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(LOCAL_SLURM), command], capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------- training: tiny models on a Markov-chain stream


VOCAB, BLOCK = 300, 32
# complete settings, as a config gives them: the schema's defaults under these (train() fills in none)
CFG = training_defaults(
    {
        "model": {
            "n_layers": 2,
            "hidden_size": 64,
            "n_heads": 2,
            "n_kv_heads": 1,
            "head_dim": 32,
            "intermediate_size": 128,
            "context": 4 * BLOCK,
        },
        "steps": 120,
        "micro_batch": 4,
        "grad_accum": 2,
        "lr": 1e-2,
        "min_lr": 1e-3,
        "warmup_steps": 5,
        "eval_every": 40,
        "eval_batches": 2,
        "checkpoint_every": 20,
        "log_every": 10,
        "threads": 1,
        "seed": 3,
        "device": "cpu",
    }
)  # cpu: the bitwise comparisons need its determinism
TINY = CFG["model"]
SRC = str(ROOT / "src")


def env(**extra) -> dict:
    # the subprocesses import this checkout's package, single-threaded like the in-process runs
    return {
        **os.environ,
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": "1",
        **extra,
    }


def make_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<eos>": 0, **{f"t{i}": i for i in range(1, VOCAB)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<eos>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>").save_pretrained(path)


def command(data: Path, root: Path, config: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "causalpos.models.train",
        "--blocks",
        str(data / "blocks"),
        "--out",
        str(root / "out"),
        "--checkpoints",
        str(root / "ckpt"),
        "--config",
        str(config),
        "--model",
        "nope",
        "--tokenizer",
        str(data / "tokenizer"),
    ]


def start_and_wait_for_steps(cmd: list[str], pattern: str = "nope step 10/") -> subprocess.Popen:
    """Start a training process; return once its log (stderr) shows `pattern`."""
    proc = subprocess.Popen(cmd, env=env(), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300  # a loaded 2-core machine: the imports alone can take a minute
    for line in proc.stderr:
        if pattern in line or time.monotonic() > deadline:
            break
    return proc


# ---------------------------------------------------------------- synthetic tables of the claims ledger


S = 10
R = 40  # bootstrap replicates in most tests: enough for a standard error, fast
# replicates of a whole ledger of clean constructed data, whose metrics often never vary over them: such a row's p is
# the bootstrap's bound 1 / (R + 1), which must survive Holm over the ledger's few dozen rows to be supported
R_LEDGER = 1000
I, J = np.indices((S, S))
LOWER = J <= I
BASE = dict(norm="l2", scale="none", alpha=0.0, pe="none", rope_theta=10000.0, mask="causal", residual=True, d=64)


def long(matrix: np.ndarray, full: bool = False) -> pd.DataFrame:
    n = matrix.shape[0]
    q, k = np.nonzero(np.ones((n, n), dtype=bool) if full else np.tril(np.ones((n, n), dtype=bool)))
    return pd.DataFrame({"query_pos": q, "key_pos": k, "value": matrix[q, k]})


def sim_table(name: str, layers: list, sem: float = 1e-4, seed: int = 0, **params) -> pd.DataFrame:
    """A simulation table: layer l = layers[l] plus Gaussian noise of standard deviation `sem` (recorded)."""
    p = {**BASE, **params}
    rng = np.random.default_rng(seed)
    frames = []
    for layer, matrix in enumerate(layers):
        rows = long(matrix, full=p["mask"] == "none")
        noise = rng.normal(0.0, sem, len(rows))
        frames.append(
            rows.assign(variant=name, layer=layer, score_mean=rows["value"] + noise, score_sem=sem).drop(
                columns="value"
            )
        )
    out = pd.concat(frames, ignore_index=True)
    n = layers[0].shape[0]
    return out.assign(**p, seq_len=n, n_layers=len(layers), n_samples=100000, seed=0, sampler="official")


def identity(alpha: float = 0.0, n: int = S) -> np.ndarray:
    return np.where(np.eye(n, dtype=bool), 1.0, alpha)


def with_diagonal(matrix: np.ndarray, value: float = 1.0) -> np.ndarray:
    out = matrix.copy()
    np.fill_diagonal(out, value)
    return out


def keys_up(slope: float, offset: float = 0.1) -> np.ndarray:
    """Off-diagonal scores rising with the key position, 1 on the diagonal."""
    return with_diagonal(offset + slope * J / S)


def toeplitz(seed: int = 0, n: int = S, scale: float = 0.3) -> np.ndarray:
    f = np.random.default_rng(seed).normal(0.0, scale, 2 * n)
    return f[np.abs(np.subtract.outer(np.arange(n), np.arange(n)))]


def packed(matrix: np.ndarray) -> np.ndarray:
    q, k = np.tril_indices(matrix.shape[-1])
    return matrix[..., q, k]


def model_tables(
    model: str,
    kind: str,
    layers: list,
    stages: dict | None = None,
    n: int = 64,
    groups: int = 8,
    noise: float = 0.05,
    seed: int = 0,
):
    """scores, intermediates and groups tables of a model whose per-sequence matrices are the given ones plus
    Gaussian noise; groups are contiguous blocks of sequences."""
    rng = np.random.default_rng(seed)
    size = layers[0].shape[0]
    sizes = np.diff(np.linspace(0, n, groups + 1).astype(int))
    score_rows, inter_rows, group_rows = [], [], []

    def draw(matrix):
        per_sequence = packed(matrix)[None] + rng.normal(0.0, noise, (n, size * (size + 1) // 2))
        sums = np.add.reduceat(per_sequence, np.r_[0, np.cumsum(sizes)[:-1]], axis=0)
        return per_sequence.mean(0), per_sequence.std(0, ddof=1) / np.sqrt(n), sums

    q, k = np.tril_indices(size)
    for layer, matrix in enumerate(layers):
        mean, sem, sums = draw(matrix)
        score_rows.append(
            pd.DataFrame(
                {
                    "model": model,
                    "kind": kind,
                    "layer": layer,
                    "query_pos": q,
                    "key_pos": k,
                    "score_mean": mean,
                    "score_sem": sem,
                    "score_diagnorm": 0.0,
                    "n_sequences": n,
                    "seq_len": size,
                    "table": "scores",
                }
            )
        )
        group_rows += [
            {
                "model": model,
                "kind": kind,
                "table": "groups",
                "quantity": "scores",
                "stage": "",
                "layer": layer,
                "group": g,
                "n_sequences": int(sizes[g]),
                "seq_len": size,
                "sums": sums[g].astype(np.float32),
            }
            for g in range(groups)
        ]
    for stage, (layer, matrix) in (stages or {}).items():
        mean, _, sums = draw(matrix)
        inter_rows.append(
            pd.DataFrame(
                {
                    "model": model,
                    "layer": layer,
                    "stage": stage,
                    "query_pos": q,
                    "key_pos": k,
                    "value": mean,
                    "n_sequences": n,
                    "seq_len": size,
                    "table": "intermediates",
                }
            )
        )
        group_rows += [
            {
                "model": model,
                "kind": kind,
                "table": "groups",
                "quantity": "intermediate",
                "stage": stage,
                "layer": 0,
                "group": g,
                "n_sequences": int(sizes[g]),
                "seq_len": size,
                "sums": sums[g].astype(np.float32),
            }
            for g in range(groups)
        ]
    inter = pd.concat(inter_rows, ignore_index=True) if inter_rows else None
    return pd.concat(score_rows, ignore_index=True), inter, pd.DataFrame(group_rows)


def nope_tables(slope: float, seed: int = 0):
    pattern = keys_up(slope)
    pattern[:, 0] = 3.0  # an attention-sink column: high, whatever the order of the other keys
    return model_tables(
        "nope", "trained", [identity(), pattern], stages={"f": (0, pattern), "i": (1, pattern)}, seed=seed
    )


def llm_tables(seed: int = 0, groups_as_arrow: bool = False):
    rng = np.random.default_rng(seed)
    relative = toeplitz(9, scale=1.0)
    sink = relative.copy()
    sink[:, 0] += 5.0 + rng.normal(0, 1.0, S)  # key 0: big and position-dependent (non-relative)
    pattern = relative + 0.8 * np.sqrt(J + 1.0) * rng.normal(0, 1.0, (S, S))  # a non-relative pattern
    scores, _, groups = model_tables("llm", "pretrained", [sink, pattern, pattern], noise=0.05, seed=seed)
    if groups_as_arrow:
        groups["sums"] = pd.array(
            [list(map(float, v)) for v in groups["sums"]], dtype=pd.ArrowDtype(pa.list_(pa.float32()))
        )
    return scores, groups


def small_inputs():
    sims = [
        sim_table("zero", [identity(), layer2_scores(S, 0.0), keys_up(0.2), keys_up(0.3)]),
        sim_table("zero16", [identity(), layer2_scores(S, 0.0) - 0.01, keys_up(0.2)], d=16),
        sim_table("pos", [identity(0.2), layer2_scores(S, 0.2), keys_up(0.3)], alpha=0.2),
    ]
    scores, inter, groups = nope_tables(slope=1.0)
    llm_scores, llm_groups = llm_tables()
    return (
        pd.concat(sims, ignore_index=True),
        theory_frame(S, [0.0, 0.2]),
        pd.concat([scores, llm_scores]),
        inter,
        pd.concat([groups, llm_groups], ignore_index=True),
    )


# ---------------------------------------------------------------- GGUF files and the convergence of claim 8


def write_tiny_gguf(path: Path, context: int = 64, layers: int = 2) -> Path:
    """A GGUF file of two tiny tensors, with the metadata the checks read and a vocabulary array."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_context_length(context)
    writer.add_block_count(layers)
    writer.add_array("tokenizer.ggml.tokens", ["a", "bb", "ccc"])
    writer.add_array("tokenizer.ggml.scores", [0.0, -1.0, -2.0])
    writer.add_tensor("token_embd.weight", np.ones((3, 8), np.float32))
    writer.add_tensor("output_norm.weight", np.arange(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def assert_convergence_is_the_ledger(convergence: pd.DataFrame, ledger: pd.DataFrame, same_family: bool) -> None:
    """At the full N the convergence table measures what the ledger measures: the same values, uncertainties and
    unadjusted p's (referred to the same t). Its verdicts are Holm-adjusted within one model's claim 8, so they are
    the ledger's where the ledger's families are those (`same_family`: a ledger of one model's claim 8, as
    paper_llms's); a whole ledger's family is larger, and there they are not compared."""
    full = convergence[convergence["n_sequences"] == convergence.groupby("model")["n_sequences"].transform("max")]
    keys = ["claim_id", "model", "layer"]
    rows = ledger[ledger["claim"] == 8][keys + ["value", "uncertainty", "p_value", "p_against"]]
    both = full.merge(rows, on=keys, suffixes=("", "_ledger"), validate="one_to_one")
    assert len(both) == len(full) == len(rows) > 0
    for column in ("value", "uncertainty", "p_value", "p_against"):
        np.testing.assert_array_equal(both[column], both[f"{column}_ledger"], err_msg=column)
    if same_family:
        verdicts = ledger[ledger["claim"] == 8][keys + ["verdict"]]
        assert (full.merge(verdicts, on=keys, suffixes=("", "_ledger")).eval("verdict == verdict_ledger")).all()
