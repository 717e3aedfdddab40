"""The log fabric: how followers' fetches reach leaders.

In one process the brokers share a :class:`LocalFabric` (a registry of :class:`SimBroker` objects): a fetch
is a direct call on the leader, under the leader's lock. Across processes, a fetch to a broker that is
not in the registry goes over TCP loopback to the leader's registered endpoint (see
:mod:`simbrokers.fetchnet`); the registry answers "not here" and the shell falls back to the network.

:func:`acknowledged_lost` is the audit a test runs after elections: which acknowledged records are not in
the current leader's log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from core.model import TopicPartition
from simbrokers.broker import FetchRequest, FetchResponse, SimBroker
from simbrokers.log import Record
from simbrokers.partition import Role

#: sends one fetch to a broker that is not in this process; returns None when it cannot be reached
RemoteFetch = Callable[[int, FetchRequest], FetchResponse | None]


class LocalFabric:
    """Brokers of one process, each with its lock. ``step`` runs every due fetch once."""

    def __init__(self, remote: RemoteFetch | None = None) -> None:
        self.brokers: dict[int, SimBroker] = {}
        self.locks: dict[int, threading.RLock] = {}
        self.remote = remote

    def add(self, broker: SimBroker) -> None:
        self.brokers[broker.broker_id] = broker
        self.locks.setdefault(broker.broker_id, threading.RLock())

    def remove(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)

    def serve(self, leader_id: int, req: FetchRequest, now_ms: int) -> FetchResponse | None:
        """Answer a fetch addressed to ``leader_id`` if it lives here."""
        leader = self.brokers.get(leader_id)
        if leader is None:
            return None
        with self.locks[leader_id]:
            return leader.handle_fetch(req, now_ms)

    def step(self, now_ms: int, max_rounds: int = 4) -> None:
        """Every broker sends its due fetches and applies the answers; a follower that got data fetches again
        at once, up to ``max_rounds`` fetches per call."""
        for _ in range(max_rounds):
            busy = False
            for bid, broker in list(self.brokers.items()):
                with self.locks[bid]:
                    due = broker.fetch_requests(now_ms)
                for leader_id, req in due.items():
                    busy = True
                    resp = self.serve(leader_id, req, now_ms)
                    if resp is None and self.remote is not None:
                        resp = self.remote(leader_id, req)
                    if resp is not None:
                        with self.locks[bid]:
                            broker.on_fetch_response(leader_id, resp, now_ms)
            if not busy:
                return


@dataclass(frozen=True)
class LossReport:
    topic_partition: TopicPartition
    leader: int | None
    acknowledged: int
    lost: tuple[tuple[int, Record], ...]


def acknowledged_lost(brokers: Iterable[SimBroker], tp: TopicPartition) -> LossReport:
    """Acknowledged records of ``tp`` (from every replica that ever led it) missing from the current leader's
    log at their offset. The current leader is the leading replica with the highest leader epoch."""
    brokers = list(brokers)
    acked: set[tuple[int, Record]] = set()
    leader: SimBroker | None = None
    leader_epoch = -1
    for b in brokers:
        part = b.partitions.get(tp)
        if part is None:
            continue
        acked.update(part.acked.items())
        if part.role is Role.LEADER and part.leader_epoch > leader_epoch:
            leader, leader_epoch = b, part.leader_epoch
    if leader is None:
        return LossReport(tp, None, len(acked), tuple(sorted(acked)))
    log = leader.partitions[tp].log
    lost = tuple((off, rec) for off, rec in sorted(acked) if log.record_at(off) != rec)
    return LossReport(tp, leader.broker_id, len(acked), lost)
