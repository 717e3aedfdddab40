"""Fixtures of the streaming shell's unit tests."""

from __future__ import annotations

import pytest

from streaming.query.validation import InputValidator


@pytest.fixture(scope="module")
def validator() -> InputValidator:
    return InputValidator()
