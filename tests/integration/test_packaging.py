"""The project as a wheel: every sub-package and the config schema inside, and a non-editable install that works."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT

SOURCE_FILES = sorted(
    str(p.relative_to(ROOT / "src"))
    for p in (ROOT / "src" / "causalpos").rglob("*")
    if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    project = out / "project"  # a copy: setuptools writes build/ and *.egg-info beside the sources
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, project / name)
    # --no-build-isolation: the setuptools of this environment, no download
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(project)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (path,) = out.glob("causalpos-*.whl")
    return path


def test_wheel_carries_every_module_and_the_schema(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "causalpos/schemas/config.schema.yaml" in names
    assert [f for f in SOURCE_FILES if f not in names] == []


def test_installed_wheel_validates_the_config(wheel, tmp_path):
    """Installed (not editable) into a folder of its own and imported from there, away from the checkout."""
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    script = (
        "import causalpos, sys; from causalpos.workflow.config import load_config; "
        f"config = load_config({str(ROOT / 'config.yaml')!r}); "
        "print(causalpos.__file__); print(sorted(config['simulation']['variants'])[0])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert proc.returncode == 0, proc.stderr
    location, _ = proc.stdout.splitlines()
    assert Path(location).is_relative_to(site)
