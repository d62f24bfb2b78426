"""The docs' pandas snippets run against a finished run, and `all_figures` makes every table they read."""

import re
import subprocess
import sys
from pathlib import Path

from helpers import planned_jobs

ROOT = Path(__file__).resolve().parents[2]

# After a snippet: every DataFrame it made must have rows (a read of the wrong file, or a folder of several
# tables merged into one schema, shows up as a missing column or an empty frame).
CHECK = """
import pandas as _pd
_empty = [name for name, value in dict(globals()).items()
          if isinstance(value, _pd.DataFrame) and not name.startswith("_") and value.empty]
assert not _empty, f"empty frames: {_empty}"
"""


def snippets(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / page).read_text(), flags=re.S)


def test_results_page_snippets_run_on_a_finished_run(finished_run):
    blocks = snippets("results.md")
    assert len(blocks) >= 2
    code = "\n".join(blocks) + CHECK  # the second block uses the first's import
    done = subprocess.run([sys.executable, "-c", code], cwd=finished_run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_every_table_the_docs_read_is_made_by_all_figures(finished_run, finished_copy):
    """all_figures is all: a finished `all` leaves it nothing to do, and the docs' tables are among its files;
    without the summary tables it makes them again."""
    assert planned_jobs(finished_copy, "all_figures") == set()
    read = set(re.findall(r'read_parquet\("(results/[^"]+)"\)', "\n".join(snippets("results.md"))))
    assert "results/summary/nonrelativeness.parquet" in read
    for path in read:
        assert (finished_run / path).exists(), path
    (finished_copy / "results/summary/nonrelativeness.parquet").unlink()
    assert ("summary", "") in planned_jobs(finished_copy, "all_figures")
