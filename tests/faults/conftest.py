"""Fixtures of the fault suite (helpers in fault_helpers.py)."""

from __future__ import annotations

import pytest
from fault_helpers import fault_overrides


@pytest.fixture
def fault_run(tiny) -> list[str]:
    return fault_overrides(tiny)
