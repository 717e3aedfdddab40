"""Fetches between simulated broker processes (:mod:`simbrokers.fetchnet`) over loopback: each connection is a
fetch session (KIP-227's incremental fetches), so a message carries only what changed, and the follower still
gets every answer the leader gave, whole."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from simbrokers.broker import FetchRequest, FetchResponse
from simbrokers.fetchnet import FetchClient, FetchServer, FollowerSession, LeaderSession, SessionError
from simbrokers.log import EpochEndOffset, Record
from simbrokers.partition import FetchPartitionRequest, FetchPartitionResponse

pytestmark = pytest.mark.unit


class Leader:
    """A leader that answers each partition from its own table and records every request it was served."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hw: dict[tuple[str, int], int] = {}
        self.records: dict[tuple[str, int], tuple[Record, ...]] = {}
        self.served: list[FetchRequest] = []

    def serve(self, leader_id: int, req: FetchRequest) -> FetchResponse | None:
        if leader_id != 1:
            return None
        with self.lock:
            self.served.append(req)
            return FetchResponse(tuple(self.answer(p) for p in req.partitions))

    def answer(self, p: FetchPartitionRequest) -> FetchPartitionResponse:
        key = (p.topic, p.partition)
        hw = self.hw.get(key, 0)
        div = EpochEndOffset(2, 7) if p.partition == 99 else None
        return FetchPartitionResponse(p.topic, p.partition, 0, hw, hw, self.records.get(key, ()), div)


@pytest.fixture
def leader() -> Iterator[tuple[Leader, FetchServer]]:
    model = Leader()
    server = FetchServer("127.0.0.1", 0, model.serve)
    server.start()
    try:
        yield model, server
    finally:
        server.stop()


def _request(n: int, offset: int = 0) -> FetchRequest:
    return FetchRequest(2, tuple(FetchPartitionRequest("t", i, offset, 0, 1) for i in range(n)), 500)


def test_every_answer_arrives_whole_and_an_unchanged_fetch_is_small(leader: tuple[Leader, FetchServer]) -> None:
    model, server = leader
    client = FetchClient()
    try:
        req = _request(1000)
        first = client.fetch("127.0.0.1", server.port, 1, req)
        assert first == model.serve(1, req)
        full_request, full_answer = client.last_bytes
        # the same fetch again: every partition served, every answer the same, a few bytes each way
        again = client.fetch("127.0.0.1", server.port, 1, req)
        assert again == first and model.served[-2] == req
        small_request, small_answer = client.last_bytes
        assert small_request * 3 < full_request and small_answer * 50 < full_answer

        # one partition moves on (its request changes) and another gets records and a new high watermark
        with model.lock:
            model.hw[("t", 7)] = 3
            model.records[("t", 7)] = (Record(1, 1), Record(1, 2), Record(1, 3))
        moved = FetchRequest(
            2, tuple(p if p.partition != 5 else FetchPartitionRequest("t", 5, 4, 1, 1) for p in req.partitions), 500
        )
        got = client.fetch("127.0.0.1", server.port, 1, moved)
        assert model.served[-1] == moved
        assert got == FetchResponse(tuple(model.answer(p) for p in moved.partitions))
        assert got is not None and got.partitions[7].records == (Record(1, 1), Record(1, 2), Record(1, 3))

        # fewer partitions, in another order, one new (a diverging epoch in its answer): still whole
        fewer = FetchRequest(2, (req.partitions[9], FetchPartitionRequest("t", 99, 0, 0, 1), req.partitions[3]), 500)
        got = client.fetch("127.0.0.1", server.port, 1, fewer)
        assert model.served[-1] == fewer
        assert got == FetchResponse(tuple(model.answer(p) for p in fewer.partitions))
    finally:
        client.close()


def test_a_leader_not_served_there_ends_the_session_and_the_next_fetch_starts_afresh(
    leader: tuple[Leader, FetchServer],
) -> None:
    model, server = leader
    client = FetchClient()
    try:
        req = _request(10)
        assert client.fetch("127.0.0.1", server.port, 1, req) is not None
        assert client.fetch("127.0.0.1", server.port, 3, req) is None  # broker 3 does not live there
        full = client.last_bytes
        assert client.fetch("127.0.0.1", server.port, 1, req) == model.serve(1, req)
        assert client.last_bytes[0] > full[0]  # a new session: every partition sent in full again
    finally:
        client.close()


def test_a_message_that_does_not_fit_its_session_is_refused() -> None:
    with pytest.raises(SessionError, match="slot 4 was never sent"):
        LeaderSession().decode_request({"leaderId": 1, "replicaId": 2, "maxRecords": 5, "partitions": [4]})
    follower = FollowerSession()
    _, order = follower.encode_request(1, _request(2))
    with pytest.raises(SessionError, match="no answer for slot 0"):
        follower.decode_response({"partitions": [[1, 0, 0, 0, [], None]]}, order)
    with pytest.raises(SessionError, match="partition 5 of a request of 2"):
        follower.decode_response({"partitions": [[5, 0, 0, 0, [], None]]}, order)
