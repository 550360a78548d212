"""The opt-in suite of real agent CLIs driven through gitswarm.

    GITSWARM_REAL_CLIS=1 python -m pytest tests/realclis [-k claude]

Without GITSWARM_REAL_CLIS=1 every test here is marked skipped at collection
(no fixture runs: nothing is started, no directory made), so the default
`python -m pytest` and CI pass over it. The CLIs are the ones
/work/shared/realclis/install.sh puts in /tmp/realclis (GITSWARM_REALCLIS_DIR
to change it); a missing one skips its tests, naming the path looked in.

At the end the results table is printed (and written to
realclis-table.md under pytest's basetemp).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.realclis.table import TABLE, render_table

ENABLED = os.environ.get("GITSWARM_REAL_CLIS") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if ENABLED:
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="real agent CLIs: opt-in, set GITSWARM_REAL_CLIS=1 (see tests/realclis/conftest.py)")
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not TABLE:
        return
    text = render_table()
    try:
        path = Path(str(config._tmp_path_factory.getbasetemp())) / "realclis-table.md"  # type: ignore[attr-defined]
        path.write_text(text)
        where = f" (also in {path})"
    except Exception:  # the table is still printed
        where = ""
    terminalreporter.section(f"real CLIs through gitswarm{where}")
    terminalreporter.write(text)
