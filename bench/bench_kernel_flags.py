"""What the numba kernel's fast-math flags cost: the kernel as built (no reassociation, no contraction: the same bits
whether compiled in the job or loaded from numba's cache) against the flags it had before issue 40 (reassociation and
contraction too), side by side in one run, each in its own process with its own warm cache.

    python bench/bench_kernel_flags.py                  # l2, alpha 0, d 64, 4 layers, seq_len 64, 20,000 samples
    python bench/bench_kernel_flags.py --n-samples 100000 --pe rope

The "before" side runs a copy of src/ whose cpu_vectors.py has the old flags. Prints each side's best of --repeat
timings, their ratio, and whether a compiled and a cached kernel agree bit for bit on each side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_FLAGS = 'FASTMATH = {"nsz", "arcp", "contract", "reassoc"}'

RUN = """
import hashlib, json, sys, time
import numpy as np
from causalpos.simulation.engine import simulate
from causalpos.simulation.variant import Variant
args = json.loads(sys.argv[1])
v = Variant(d=args["d"], seq_len=args["seq_len"], n_layers=4, n_samples=args["n_samples"], seed=0, pe=args["pe"])
times = []
for _ in range(args["repeat"]):
    start = time.perf_counter()
    r = simulate(v, device="cpu", backend="numba", threads=1)
    times.append(time.perf_counter() - start)
bits = hashlib.sha256(b"".join(a.tobytes() for a in vars(r).values() if isinstance(a, np.ndarray))).hexdigest()
print(json.dumps({"seconds": min(times), "bits": bits}))
"""


def side(src: Path, cache: Path, args: dict) -> list[dict]:
    """Two processes on an empty cache: the first compiles the kernels (its time includes no compile: best of the
    repeats after the first call), the second loads them."""
    env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_CACHE_DIR": str(cache)}
    found = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", RUN, json.dumps(args)], env=env, capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(out.stderr[-3000:])
        found.append(json.loads(out.stdout.splitlines()[-1]))
    return found


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-samples", type=int, default=20000)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--pe", default="none")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)
    args = {"n_samples": a.n_samples, "seq_len": a.seq_len, "d": a.d, "pe": a.pe, "repeat": a.repeat}
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "src"
        shutil.copytree(ROOT / "src", old, ignore=shutil.ignore_patterns("__pycache__"))
        kernel = old / "causalpos" / "simulation" / "cpu_vectors.py"
        text = kernel.read_text()
        line = next(line for line in text.splitlines() if line.startswith("FASTMATH = "))
        kernel.write_text(text.replace(line, OLD_FLAGS))
        now = side(ROOT / "src", Path(tmp) / "cache_now", args)
        before = side(old, Path(tmp) / "cache_before", args)
    print(f"variant: d {a.d}, seq_len {a.seq_len}, 4 layers, pe {a.pe}, {a.n_samples:,} samples, one thread")
    for name, runs, flags in (("as built", now, line), ("before issue 40", before, OLD_FLAGS)):
        same = "same bits" if runs[0]["bits"] == runs[1]["bits"] else "DIFFERENT bits"
        print(f"{name:16s} {flags:52s} compiled {runs[0]['seconds']:.3f} s, cached {runs[1]['seconds']:.3f} s: {same}")
    ratio = min(r["seconds"] for r in now) / min(r["seconds"] for r in before)
    print(f"time as built / before: {ratio:.2f}")


if __name__ == "__main__":
    main()
