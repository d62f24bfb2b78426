"""Peak memory and time of the LLM analysis stages (summary, convergence, claim 8's ledger) against the depth.

Writes synthetic extraction outputs, the files rule `extract` writes for a pretrained model (scores, intermediates, probe,
groups through `causalpos.models.outputs`), for one pretrained model of L layers, N sequences in G groups of
length S: each layer's scores a relative pattern plus a small non-relative one, the groups' sums that pattern
times their sequences plus noise. Then runs each rule's job module (causalpos.jobs.summary, .convergence, .claims
with claim 8, through workflow.job.run_job) in a fresh process and reads that process's peak RSS from the kernel
(os.wait4) and its wall time.

    python bench/bench_analysis.py --layers 8 --seq-len 1024 --sequences 1000 --json out.json
    python bench/bench_analysis.py --layers 2 4 8 --seq-len 1024 --sequences 1000   # the slope in L

Issue 26's goal at S = 1,024, N = 1,000: peak RSS at most 3 GB at L = 40 and at most 1.3x the peak at L = 8,
time linear in L.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MODEL = "synthetic"
STAGES = ("summary", "convergence", "claims")
JOB = "from causalpos.workflow.job import Job, run_job; run_job(Job("
RUNNER = {
    "summary": JOB + "'summary', input={'scores': [d + '/scores.parquet'], 'probe': [d + '/probe.parquet']}, "
               "output={'table': d + '/summary/nonrelativeness.parquet'}))",
    "convergence": JOB + "'convergence', input={'scores': [d + '/scores.parquet'], 'groups': [d + '/groups.parquet']}, "
                   "output={'table': d + '/convergence.parquet', 'figures': [d + '/convergence.png']}, "
                   "params={'settings': SETTINGS, 'options': {'formats': ['png']}}))",
    "claims": JOB + "'claims', input={'scores': [d + '/scores.parquet'], 'intermediates': [d + "
              "'/intermediates.parquet'], 'groups': [d + '/groups.parquet']}, output={'table': d + '/claims.parquet', "
              "'markdown': d + '/claims.md', 'figures': d + '/claims_pages'}, params={'settings': SETTINGS, "
              "'options': {'formats': ['png']}, 'claim': 8}))",
}
SETTINGS = {"n_bootstrap": 200, "seed": 0, "thresholds": {}, "convergence_min_groups": 4}


def write_inputs(folder: Path, layers: int, seq_len: int, sequences: int, groups: int, seed: int = 0) -> dict:
    """The four extraction tables of one synthetic pretrained model; returns their sizes in bytes."""
    from causalpos.models.outputs import join_group_parts, part_name, write_group_part, write_intermediates, \
        write_probe, write_scores
    from causalpos.tril import packed_pairs

    rng = np.random.default_rng(seed)
    query, key = packed_pairs(seq_len)
    sizes = np.full(groups, sequences // groups)
    sizes[: sequences % groups] += 1
    means = np.empty((layers, query.size))
    sems = np.empty_like(means)
    parts = [folder / part_name(g) for g in range(groups)]
    sums = np.empty((groups, layers, query.size), dtype=np.float32)
    for layer in range(layers):
        pattern = np.cos(0.05 * (query - key)) * (1 + layer / layers) + 0.2 * np.exp(-key / 32.0)
        noise = rng.standard_normal((groups, query.size)).astype(np.float32)
        group_sums = sizes[:, None] * pattern[None, :] + np.sqrt(sizes)[:, None] * noise
        sums[:, layer] = group_sums
        means[layer] = group_sums.sum(axis=0) / sequences
        sems[layer] = (group_sums / sizes[:, None]).std(axis=0, ddof=1) / np.sqrt(groups)
    for g, part in enumerate(parts):
        write_group_part(part, [("scores", "", layer, sums[g, layer]) for layer in range(layers)], MODEL,
                         "pretrained", g, int(sizes[g]), seq_len)
    del sums
    metadata = {"stage": "extract", "model": MODEL, "synthetic": True}
    write_scores(folder / "scores.parquet", means, sems, MODEL, "pretrained", sequences, metadata)
    write_intermediates(folder / "intermediates.parquet", {}, None, MODEL, sequences, metadata)
    probe = [{"mae": 10.0, "mae_baseline": 20.0, "n_train": 120, "n_test": 40}] * (layers + 1)  # a probe per state
    write_probe(folder / "probe.parquet", probe, MODEL, "pretrained", seq_len, metadata)
    join_group_parts(folder / "groups.parquet", parts, metadata)
    for part in parts:
        part.unlink()
    return {t: (folder / f"{t}.parquet").stat().st_size for t in ("scores", "intermediates", "probe", "groups")}


PEAK = "; print('VmHWM', open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"


def run_stage(stage: str, folder: Path) -> dict:
    """One stage's runner in a fresh process: wall seconds and that process's own peak RSS (VmHWM at its end:
    the kernel's ru_maxrss of a child can carry its parent's RSS at the fork, which once made the summary at
    L = 40 look 2.1 GB when it was 0.5)."""
    code = f"d = {str(folder)!r}; SETTINGS = {SETTINGS!r}; {RUNNER[stage]}{PEAK}"
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if process.returncode:
        raise RuntimeError(f"stage {stage} failed with exit code {process.returncode}")
    peak_kb = int(out.rsplit("VmHWM", 1)[1].split()[0])
    return {"stage": stage, "seconds": seconds, "peak_rss_gb": peak_kb * 1024 / 1e9,
            "cpu_seconds": usage.ru_utime + usage.ru_stime}


def write_in_child(folder: Path, layers: int, args) -> dict:
    """write_inputs in a process of its own, so this one never holds the tables' arrays (see run_stage)."""
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); from bench_analysis import "
            f"write_inputs; from pathlib import Path; print(json.dumps(write_inputs(Path({str(folder)!r}), "
            f"{layers}, {args.seq_len}, {args.sequences}, {args.groups})))")
    out = subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[8])
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--sequences", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument("--json")
    args = parser.parse_args()
    results = []
    for layers in args.layers:
        with tempfile.TemporaryDirectory(prefix="bench-analysis-") as tmp:
            folder = Path(tmp)
            start = time.perf_counter()
            sizes = write_in_child(folder, layers, args)
            written = time.perf_counter() - start
            for stage in args.stages:
                row = {"layers": layers, "seq_len": args.seq_len, "sequences": args.sequences, "groups": args.groups,
                       **run_stage(stage, folder), "inputs_written_s": written, "table_bytes": sizes}
                results.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
