"""The log fabric: how followers' fetches reach leaders.

In one process the brokers share a :class:`LocalFabric` (a registry of :class:`SimBroker` objects): a fetch
is a direct call on the leader, under the leader's lock. Across processes, a fetch to a broker that is
not in the registry goes over TCP loopback to the leader's registered endpoint (see
:mod:`simbrokers.fetchnet`); the registry answers "not here" and the shell falls back to the network.

:func:`acknowledged_lost` is the audit a test runs after elections: which acknowledged records are not in
the current leader's log. :class:`LossTracker` gives the same report for the brokers' status file every
second, at the cost of what changed since its last call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice

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


def current_leader(brokers: Iterable[SimBroker], tp: TopicPartition) -> SimBroker | None:
    """The broker whose replica of ``tp`` leads with the highest leader epoch, or ``None``."""
    leader: SimBroker | None = None
    leader_epoch = -1
    for b in brokers:
        part = b.partitions.get(tp)
        if part is not None and part.role is Role.LEADER and part.leader_epoch > leader_epoch:
            leader, leader_epoch = b, part.leader_epoch
    return leader


def acknowledged_lost(brokers: Iterable[SimBroker], tp: TopicPartition) -> LossReport:
    """Acknowledged records of ``tp`` (from every replica that ever led it) missing from the current leader's
    log at their offset. The current leader is the leading replica with the highest leader epoch."""
    brokers = list(brokers)
    acked: set[tuple[int, Record]] = set()
    for b in brokers:
        part = b.partitions.get(tp)
        if part is not None:
            acked.update(part.acked.items())
    leader = current_leader(brokers, tp)
    if leader is None:
        return LossReport(tp, None, len(acked), tuple(sorted(acked)))
    log = leader.partitions[tp].log
    lost = tuple((off, rec) for off, rec in sorted(acked) if log.record_at(off) != rec)
    return LossReport(tp, leader.broker_id, len(acked), lost)


@dataclass
class _Checked:
    """What :class:`LossTracker` knows of one partition."""

    #: what a full check depended on: the leader (broker id, replica object, leader epoch, its log's
    #: truncations, its re-acknowledgements) and every other replica (broker id, replica object, acknowledged count)
    key: tuple[object, ...]
    #: the replica objects named in ``key`` (held so that their ids stay theirs)
    parts: tuple[object, ...]
    #: entries of the leader's ``acked`` already counted
    leader_seen: int
    acked: set[tuple[int, Record]]
    lost: list[tuple[int, Record]]


class LossTracker:
    """:func:`acknowledged_lost`, kept per partition between calls: the status file asks every second, and
    a full check costs time in the number of records ever acknowledged (which grows with the run).

    The report can change without a full check in one way only: the leader acknowledged more records at
    offsets it had not acknowledged before, which it appends to its ``acked`` in order and which are in its
    log at their offsets when acknowledged. While the leader, its leader epoch, its log's truncations and its
    re-acknowledgements (an offset acknowledged again replaces its entry in place) stay the same and no
    other replica's ``acked`` changes, those new entries are the only ones to add (and the lost ones are
    looked at again); anything else is a full check."""

    def __init__(self) -> None:
        self._checked: dict[TopicPartition, _Checked] = {}

    def report(self, brokers: Iterable[SimBroker], tp: TopicPartition) -> LossReport:
        """The same report as ``acknowledged_lost(brokers, tp)``."""
        brokers = list(brokers)
        leader = current_leader(brokers, tp)
        if leader is None:
            self._checked.pop(tp, None)
            return acknowledged_lost(brokers, tp)
        lead = leader.partitions[tp]
        log = lead.log
        others = [(b.broker_id, b.partitions[tp]) for b in brokers if b is not leader and tp in b.partitions]
        if not lead.acked and not any(p.acked for _, p in others):
            # nothing acknowledged on any replica (a partition never produced to): nothing to lose
            self._checked.pop(tp, None)
            return LossReport(tp, leader.broker_id, 0, ())
        key: tuple[object, ...] = (
            leader.broker_id,
            id(lead),
            lead.leader_epoch,
            log.truncations,
            lead.reacked,
            *((bid, id(p), len(p.acked)) for bid, p in others),
        )
        got = self._checked.get(tp)
        if got is None or got.key != key or len(lead.acked) < got.leader_seen:
            acked: set[tuple[int, Record]] = set(lead.acked.items())
            for _, p in others:
                acked.update(p.acked.items())
            lost = [(off, rec) for off, rec in acked if log.record_at(off) != rec]
            got = _Checked(key, (lead, *(p for _, p in others)), len(lead.acked), acked, lost)
            self._checked[tp] = got
        else:
            for off, rec in islice(lead.acked.items(), got.leader_seen, None):
                if (off, rec) not in got.acked:
                    got.acked.add((off, rec))
                    if log.record_at(off) != rec:
                        got.lost.append((off, rec))
            got.leader_seen = len(lead.acked)
            got.lost = [(off, rec) for off, rec in got.lost if log.record_at(off) != rec]
        return LossReport(tp, leader.broker_id, len(got.acked), tuple(sorted(got.lost)))

    def forget(self, keep: Iterable[TopicPartition]) -> None:
        """Drops what it knows of partitions not in ``keep`` (deleted, or no longer on these brokers)."""
        kept = set(keep)
        for tp in [tp for tp in self._checked if tp not in kept]:
            del self._checked[tp]
