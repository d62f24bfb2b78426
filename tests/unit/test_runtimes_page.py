"""The report's run-time page (analysis.runtimes.runtime_html)."""

import pandas as pd

from causalpos.analysis.runtimes import runtime_html
from causalpos.catalogue.tables import RUNTIME_COLUMNS


def test_the_page_names_models_as_people_write_them_and_the_table_keeps_the_keys():
    frame = pd.DataFrame(
        [{column: None for column in RUNTIME_COLUMNS} | {"rule": "extract", "job": "smollm2_135m", "seconds": 12.0}],
        columns=RUNTIME_COLUMNS,
    )
    page = runtime_html(frame, {"smollm2_135m": "SmolLM2-135M"})
    assert "SmolLM2-135M" in page and "smollm2_135m" not in page
    assert frame["job"].tolist() == ["smollm2_135m"]  # the caller's table is left as it is
    assert "smollm2_135m" in runtime_html(frame)  # no labels: the keys
