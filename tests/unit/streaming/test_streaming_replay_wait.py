"""``wait_committed``: the wait for the replay of the micro-batch a previous controller planned. A query
that stops first is no error of the wait's own (the caller reports the query's outcome, which names its
failure); only a replay that outlasts the timeout is refused."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from streaming.driver.wiring import wait_committed
from streaming.errors import StreamingError
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore, child

pytestmark = pytest.mark.unit


@dataclass
class _Query:
    isActive: bool = True  # noqa: N815 - Spark's name


def _store(*committed: int) -> MemoryCheckpointStore:
    store = MemoryCheckpointStore("memory:/ckpt")
    for b in committed:
        store.write_text(child(store.root, "commits", str(b)), "v1\n{}")
    return store


class _WatchedQuery:
    """An active query that tells when the wait has looked at it: the wait does so after each look at the
    checkpoint that did not find the batch committed."""

    def __init__(self) -> None:
        self.looked = threading.Event()

    @property
    def isActive(self) -> bool:
        self.looked.set()
        return True


def test_a_committed_replay_is_waited_for() -> None:
    store = _store(25)
    query = _WatchedQuery()

    def replay() -> None:
        # the replay commits once the wait has found batch 26 missing: it waits, it did not return at once
        if query.looked.wait(10):
            store.write_text(child(store.root, "commits", "26"), "v1\n{}")

    done = threading.Thread(target=replay, daemon=True)
    done.start()
    try:
        assert wait_committed(store, query, 26, threading.Event(), timeout=10) is True
        assert query.looked.is_set()
    finally:
        done.join(10)


def test_a_query_that_stopped_in_the_replay_is_left_to_the_outcome() -> None:
    assert wait_committed(_store(25), _Query(isActive=False), 26, threading.Event(), timeout=10) is False


def test_a_stop_request_ends_the_wait() -> None:
    stop = threading.Event()
    stop.set()
    assert wait_committed(_store(), _Query(), 26, stop, timeout=10) is False


def test_a_replay_past_the_timeout_is_refused_with_the_batch_and_the_time() -> None:
    with pytest.raises(StreamingError, match=r"micro-batch 26 was not committed within 0.2 s"):
        wait_committed(_store(25), _Query(), 26, threading.Event(), timeout=0.2)
