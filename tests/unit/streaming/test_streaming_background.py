"""One call on a thread of its own (:func:`streaming.runtime.background.in_background`)."""

from __future__ import annotations

import threading

import pytest

from streaming.runtime.background import in_background

pytestmark = pytest.mark.unit


def test_the_calls_result_is_the_futures_and_it_ran_on_its_own_thread() -> None:
    release = threading.Event()
    seen: list[str] = []

    def call() -> int:
        seen.append(threading.current_thread().name)
        release.wait(5)
        return 42

    future = in_background(call, "livectl-test-call")
    assert not future.done()  # the caller goes on while it runs
    release.set()
    assert future.result(5) == 42
    assert seen == ["livectl-test-call"]


def test_the_calls_exception_is_raised_where_the_result_is_taken() -> None:
    def call() -> int:
        raise KeyError("the reason")

    future = in_background(call, "livectl-test-raise")
    with pytest.raises(KeyError, match="the reason"):
        future.result(5)
