"""The adapter tests look specs up in the user's folder too: keep them off the real one."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_user_config_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """XDG_CONFIG_HOME unset: the user's folder is ~/.config/gitswarm under the test's own HOME."""
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
