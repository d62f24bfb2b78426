"""Issue 40's reliability probe, by its own commands, against a checkout: build the tiny run once, then each break on
a fresh copy of it. Prints one line per break: PASS (the fixed behaviour) or FAIL (the break), with evidence.

usage: python scripts/probe-issue40.py CHECKOUT WORKDIR [PROBE ...]   (KILL_AFTER=seconds for break 5; default 1)
Results at 73d9d88 and after issue 40: docs/probes/issue40.md.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

CHECKOUT, WORK = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
ONLY = sys.argv[3:]
BIN = Path(sys.executable).parent
RESULTS = []


def sh(cwd, *args, timeout=1800, **kw):
    env = {**os.environ, "PYTHONPATH": str(cwd / "src")}
    return subprocess.run(
        list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False, **kw
    )


def smk(cwd, *args, timeout=1800):
    return sh(cwd, str(BIN / "snakemake"), "--cores", "2", *args, timeout=timeout)


def planned(proc) -> set[str]:
    """The rules a dry run plans (from its job-stats table)."""
    text = proc.stdout + proc.stderr
    rules = set(re.findall(r"^(?:local)?rule (\w+):", text, re.MULTILINE))
    return rules


def record(name, ok, evidence):
    RESULTS.append((name, ok, evidence))
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {evidence}", flush=True)


def finished() -> Path:
    run = WORK / "finished"
    if (run / "done").exists():
        return run
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    for name in ("Snakefile", "rules", "workflow_scripts", "envs", "report", "profiles", "src"):
        if (CHECKOUT / name).exists():
            (shutil.copytree if (CHECKOUT / name).is_dir() else shutil.copy2)(CHECKOUT / name, run / name)
    shutil.copy2(CHECKOUT / ".test" / "config.yaml", run / "config.yaml")
    t = time.time()
    proc = smk(run, "all", timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run / "done").write_text(f"{time.time() - t:.0f} s\n")
    return run


def copy() -> Path:
    dest = WORK / "copy"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(finished(), dest, symlinks=True)
    return dest


def replace_keeping_mtime(path: Path, data: bytes) -> None:
    stat = path.stat()
    path.unlink()
    path.write_bytes(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def results_mtimes(run):
    return {p: p.stat().st_mtime_ns for p in (run / "results").rglob("*") if p.is_file()}


def edit_config(run, change):
    config = yaml.safe_load((run / "config.yaml").read_text())
    change(config)
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def traceback_free(proc, max_lines=5):
    err = proc.stderr.strip().splitlines()
    return "Traceback" not in proc.stderr + proc.stdout and proc.returncode != 0, len(err)


# ---------------------------------------------------------------- the breaks


def break1_cli_writes_behind_snakemake():
    run = copy()
    variant = next(iter(yaml.safe_load((run / "config.yaml").read_text())["simulation"]["variants"]))
    before = results_mtimes(run)
    proc = sh(run, str(BIN / "causalpos"), "--configfile", "config.yaml", "simulate", variant, timeout=600)
    changed = [str(p.relative_to(run)) for p, t in results_mtimes(run).items() if before.get(p) != t]
    record(
        "1 CLI writes results behind Snakemake",
        not changed,
        f"exit {proc.returncode}; {len(changed)} result files written ({changed[:2]})",
    )


def break2_flipped_bit_mtime_kept():
    run = copy()
    heldout = run / "results" / "tokens" / "heldout.npy"
    data = bytearray(heldout.read_bytes())
    data[len(data) // 2] ^= 0x10
    replace_keeping_mtime(heldout, bytes(data))
    plans = {target: planned(smk(run, "-n", target)) for target in ("all", "verify")}
    ok = any("tokenizer" in p for p in plans.values())
    record(
        "2 flipped bit in tokens/heldout.npy, mtime kept",
        ok,
        "; ".join(
            f"-n {t}: {'tokenizer planned' if 'tokenizer' in p else f'{len(p)} rules planned, not the tokenizer'}"
            for t, p in plans.items()
        ),
    )


def break2b_truncated_final_outputs():
    run = copy()
    ledger = run / "results" / "summary" / "claims.parquet"
    replace_keeping_mtime(ledger, ledger.read_bytes()[: int(ledger.stat().st_size * 0.3)])
    p = planned(smk(run, "-n", "all"))
    record("2 ledger truncated to 30%", "claims" in p, f"-n all plans {sorted(p) or 'nothing'}")


def break3_missing_intermediate():
    run = copy()
    (run / "results" / "models" / "nope" / "model.safetensors").unlink()
    p = planned(smk(run, "-n", "all"))
    record("3 deleted models/nope/model.safetensors", bool({"train"} & p), f"-n all plans {sorted(p) or 'nothing'}")


def break4_timing_decides_retraining():
    run = copy()
    for bench in (run / "results" / "benchmarks" / "train" / "nope.tsv", run / "benchmarks" / "train" / "nope.tsv"):
        if bench.exists():
            bench.unlink()

    def fewer(config):
        first = next(iter(config["simulation"]["variants"]))
        config["simulation"]["variants"][first] = {**(config["simulation"]["variants"][first] or {}), "n_samples": 1000}

    edit_config(run, fewer)
    p = planned(smk(run, "-n", "all"))
    trains = {r for r in p if r.startswith("train")}
    record(
        "4 deleted training benchmark + one variant changed",
        not trains,
        f"-n all plans {len(p)} rules, training: {sorted(trains) or 'none'}",
    )


def processes_in(folder: Path) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")).resolve() == folder:
                    found.add(int(entry.name))
            except OSError:
                pass
    return found


def break5_kill9_leaves_jobs():
    run = copy()
    rule = (
        "extract"
        if re.search(r"^rule extract:", (run / "rules" / "extract.smk").read_text(), re.MULTILINE)
        else "extract_trained"
    )
    scores = "results/activations/nope/scores.parquet"
    proc = subprocess.Popen(
        [str(BIN / "snakemake"), "--cores", "1", "--forcerun", rule, "--", scores],
        cwd=run,
        env={**os.environ, "PYTHONPATH": str(run / "src")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        jobs = set()
        while not jobs and time.monotonic() < deadline:  # a job: a process in the folder other than Snakemake
            jobs = {
                pid
                for pid in processes_in(run)
                if pid != proc.pid
                and b"snakemake" not in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1][-12:]
            }
            time.sleep(0.05)
        time.sleep(float(os.environ.get("KILL_AFTER", "1")))
        killed = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while (left := jobs & processes_in(run)) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = jobs & processes_in(run)
        time.sleep(25 if left else 2)
        newer = [p.name for p in (run / scores).parent.iterdir() if p.is_file() and p.stat().st_mtime > killed]
    finally:
        for pid in processes_in(run):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    record(
        f"5 kill -9 of Snakemake {os.environ.get('KILL_AFTER', '1')} s after an extraction job started",
        bool(jobs) and not left and not newer,
        f"{len(jobs)} job processes; alive 10 s after: {len(left)}; files written after the kill: {newer}",
    )


def break7_bad_configs():
    run = copy()
    for name, change in (
        ("d: 64.0", lambda c: c["simulation"].setdefault("defaults", {}).update(d=64.0)),
        (
            "NaN threshold",
            lambda c: c.setdefault("claims", {}).setdefault("thresholds", {}).update(family_alpha=float("nan")),
        ),
        ("n_samples: 1e12", lambda c: c["simulation"].setdefault("defaults", {}).update(n_samples=int(1e12))),
    ):
        shutil.copy2(run / "config.yaml", run / "config.orig")
        edit_config(run, change)
        proc = smk(run, "-n", "all")
        refused = proc.returncode != 0
        record(
            f"7 config {name}",
            refused and "Traceback" not in proc.stderr,
            f"dry run exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:150]}",
        )
        shutil.copy2(run / "config.orig", run / "config.yaml")


def break8_tracebacks():
    run = copy()
    shutil.copy2(run / "config.yaml", run / "config.orig")
    (run / "config.yaml").write_text("- a\n- b\n")
    proc = smk(run, "-n", "all")
    said = proc.stdout + proc.stderr
    record(
        "8 list-shaped config.yaml",
        "Traceback" not in said and proc.returncode != 0 and "config.yaml" in said,
        f"exit {proc.returncode}, {len(said.splitlines())} lines: {(said.strip().splitlines() or [''])[0][:120]}",
    )
    shutil.copy2(run / "config.orig", run / "config.yaml")
    (run / "tagged.yaml").write_text("results: !!python/name:os.system results\n")
    proc = sh(run, str(BIN / "causalpos"), "--configfile", "tagged.yaml", "list")
    record(
        "8 a YAML tag given to the CLI",
        "Traceback" not in proc.stderr and proc.returncode != 0,
        f"exit {proc.returncode}, {len(proc.stderr.splitlines())} lines",
    )
    proc = subprocess.run(
        f"'{BIN / 'causalpos'}' --configfile config.yaml list | head -1",
        shell=True,
        check=False,
        cwd=run,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(run / "src")},
    )
    record(
        "8 causalpos list | head -1", "Traceback" not in proc.stderr, f"{len(proc.stderr.splitlines())} lines on stderr"
    )
    (run / "afile").write_text("x")
    edit_config(run, lambda c: c.update(results="afile"))
    proc = smk(run, "-n", "all")
    record(
        "8 results: naming a file",
        "Traceback" not in proc.stderr and proc.returncode != 0,
        f"exit {proc.returncode}, {len(proc.stderr.splitlines())} lines",
    )


def break9_tools():
    run = copy()
    other = WORK / "other-results"
    shutil.rmtree(other, ignore_errors=True)
    shutil.copytree(run / "results", other)
    ledger = other / "summary" / "claims.parquet"
    table = pd.read_parquet(ledger)
    text = "verdict"
    table.loc[table.index[0], text] = table[text].iloc[0] + " (changed)"
    table.to_parquet(ledger)
    proc = sh(run, sys.executable, str(CHECKOUT / "scripts" / "compare-results.py"), str(run / "results"), str(other))
    record(
        "9 compare-results.py with a text column that differs",
        "Traceback" not in proc.stderr + proc.stdout,
        f"exit {proc.returncode}; column {text!r} {'named' if text in proc.stdout + proc.stderr else 'not named'}",
    )
    metrics = pd.read_parquet(run / "results" / "models" / "nope" / "metrics.parquet")
    record(
        "9 metrics.parquet holds no timing", "tokens_per_s" not in metrics.columns, f"columns {list(metrics.columns)}"
    )


if __name__ == "__main__":
    WORK.mkdir(parents=True, exist_ok=True)
    t = time.time()
    finished()
    print(f"finished run ready ({(WORK / 'finished' / 'done').read_text().strip()})", flush=True)
    for probe in (
        break1_cli_writes_behind_snakemake,
        break2_flipped_bit_mtime_kept,
        break2b_truncated_final_outputs,
        break3_missing_intermediate,
        break4_timing_decides_retraining,
        break5_kill9_leaves_jobs,
        break7_bad_configs,
        break8_tracebacks,
        break9_tools,
    ):
        if ONLY and not any(name in probe.__name__ for name in ONLY):
            continue
        try:
            probe()
        except Exception as err:  # noqa: BLE001 (a probe that crashes is a result too)
            record(probe.__name__, False, f"probe crashed: {type(err).__name__}: {str(err)[:200]}")
    print(f"{sum(ok for _, ok, _ in RESULTS)}/{len(RESULTS)} pass, {time.time() - t:.0f} s")
