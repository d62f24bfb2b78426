"""Rule environment's record: a row per package with the version the job was given, as importlib finds it."""

from __future__ import annotations

from importlib import metadata

import pandas as pd

from causalpos.catalogue.tables import table
from causalpos.workflow.job import Job, run_job
from causalpos.workflow.settings import PACKAGES, software_versions


def test_the_record_holds_every_package_at_its_installed_version(tmp_path):
    versions = software_versions()
    assert {name: versions[name] for name in PACKAGES} == {name: metadata.version(name) for name in PACKAGES}
    output = tmp_path / "environment.parquet"
    run_job(Job("environment", output={"table": str(output)}, params={"versions": versions}))
    frame = pd.read_parquet(output)
    assert list(frame.columns) == list(table("environment").columns)
    assert dict(zip(frame["name"], frame["version"])) == {k: str(v) for k, v in versions.items()}
    assert {"python", "platform", "gpu", "torch", "transformers"} <= set(frame["name"])
