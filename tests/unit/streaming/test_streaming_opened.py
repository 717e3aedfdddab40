"""What a controller's run opened is closed in order, its query listeners first
(``streaming.driver.side_threads.Opened``)."""

from __future__ import annotations

from typing import Any

import pytest

from streaming.driver.side_threads import Opened

pytestmark = pytest.mark.unit


class Calls:
    def __init__(self) -> None:
        self.made: list[str] = []


class Closable:
    def __init__(self, calls: Calls, name: str) -> None:
        self.calls, self.name = calls, name

    def __getattr__(self, method: str) -> Any:
        return lambda *_args, **_kwargs: self.calls.made.append(f"{self.name}.{method}")


class Streams:
    def __init__(self, calls: Calls, *, fails: bool = False) -> None:
        self.calls, self.fails = calls, fails

    def removeListener(self, listener: str) -> None:
        if self.fails:
            raise RuntimeError("SparkContext was shut down")
        self.calls.made.append(f"removeListener {listener}")


class Spark:
    def __init__(self, streams: Streams) -> None:
        self.streams = streams


def test_the_listeners_go_first_then_the_threads_sinks_lease_and_session() -> None:
    calls = Calls()
    opened = Opened(Closable(calls, "zk"), Closable(calls, "lease"), producer=Closable(calls, "producer"))
    opened.bridge, opened.request_sink = Closable(calls, "bridge"), Closable(calls, "sink")
    opened.spark, opened.listeners = Spark(Streams(calls)), ["metrics", "progress"]
    opened.close()
    assert calls.made == [
        "removeListener metrics",
        "removeListener progress",
        "bridge.stop",
        "sink.close",
        "producer.close",
        "lease.release",
        "zk.stop",
        "zk.close",
    ]
    assert opened.listeners == []


def test_a_listener_that_cannot_be_removed_does_not_keep_the_lease(caplog: pytest.LogCaptureFixture) -> None:
    calls = Calls()
    opened = Opened(Closable(calls, "zk"), Closable(calls, "lease"))
    opened.spark, opened.listeners = Spark(Streams(calls, fails=True)), ["metrics"]
    opened.close()
    assert calls.made == ["lease.release", "zk.stop", "zk.close"]
    assert "could not remove the query listener str: SparkContext was shut down" in caplog.text
