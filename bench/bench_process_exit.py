"""How long a stage's process takes to exit, with and without causalpos.runtime.processes.skip_final_collection.

Each side is a fresh interpreter that imports what a job imports (`--imports`, by default what training
imports) and exits; the time is wall and CPU of the whole process, so the difference is the exit's final
garbage collection. The sides alternate, `--repeats` times each, and the medians are compared.

    python bench/bench_process_exit.py
    python bench/bench_process_exit.py --imports causalpos.jobs.figure,seaborn --repeats 7
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time


def one_process(imports: list[str], skip: bool) -> tuple[float, float]:
    code = "".join(f"import {name}\n" for name in imports)
    if skip:
        code += "from causalpos.runtime.processes import skip_final_collection\nskip_final_collection()\n"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--imports", default="causalpos.models.train", help="modules the process imports (comma-separated)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    imports = args.imports.split(",")
    one_process(imports, False)  # warm the file cache
    runs = {False: [], True: []}
    for _ in range(args.repeats):
        for skip in (False, True):
            runs[skip].append(one_process(imports, skip))
    print(f"a process importing {', '.join(imports)}, median of {args.repeats}:")
    med = {skip: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for skip, r in runs.items()}
    for skip, label in ((False, "plain exit"), (True, "skip_final_collection")):
        print(f"  {label:22s} wall {med[skip][0]:.2f} s  CPU {med[skip][1]:.2f} s")
    print(f"  ratio (plain / skipped): wall {med[False][0] / med[True][0]:.2f}, CPU {med[False][1] / med[True][1]:.2f}")


if __name__ == "__main__":
    main()
