"""One partition replica on one simulated broker: Kafka's ``Partition`` reduced to replication.

Leader side (``Partition.makeLeader``, ``updateFollowerFetchState``, ``maybeShrinkIsr`` / ``maybeExpandIsr``,
``maybeIncrementLeaderHW``):

* produced records are appended with the leader epoch; acks=all: a record is acknowledged when the HW
  passes it, and only records appended in the current leadership are acknowledged (a produce request
  pending when leadership is lost fails, as ``DelayedProduce`` does);
* the HW is the smallest LEO over the *maximal* ISR (committed ISR plus a pending expansion; during a
  pending shrink the committed, larger ISR), and never moves back on the leader;
* a follower is caught up when it fetches from the leader's LEO, or from the LEO the leader had at its
  previous fetch (then caught up as of that fetch); it leaves the ISR when not caught up for
  ``replica.lag.time.max.ms``, and joins again once its LEO reaches the HW and the start of the current
  leader epoch;
* ISR changes are proposals (AlterPartition) until the controller's AlterPartitionResponse commits them;
  one proposal at a time, never timed out while it waits for its answer. Each proposal has a correlation id
  that the controller echoes per partition; an answer to anything but the proposal in flight (one a
  LeaderAndIsr overtook, a duplicate of one already settled) is ignored, as Kafka's ``Partition`` ignores an
  AlterPartition answer once its state has moved on.

Follower side (``ReplicaFetcherThread`` with KIP-320/KIP-595 fetch validation): fetch from the LEO with the
latest epoch of the log; on a diverging epoch returned by the leader, truncate to the end of the common
epoch and fetch again; HW := min(leader HW, own LEO).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from enum import Enum

from core.kafka.error_codes import KafkaError
from core.kafka.requests import AlterPartitionResult, LisrPartitionState
from core.model import TopicPartition
from simbrokers.log import UNDEFINED_EPOCH, UNDEFINED_OFFSET, EpochEndOffset, Record, ReplicaLog

#: AlterPartition errors after which only a new LeaderAndIsr can help (Kafka's ``Partition``
#: ``handleAlterPartitionError``: no retry, the proposal stays pending until metadata overrides it);
#: OPERATION_NOT_ATTEMPTED and INELIGIBLE_REPLICA reset to the committed ISR, anything else is retried
_WAIT_FOR_LEADER_AND_ISR = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PARTITION,
        KafkaError.UNKNOWN_TOPIC_ID,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.INVALID_UPDATE_VERSION,
        KafkaError.INVALID_REQUEST,
        KafkaError.NEW_LEADER_ELECTED,
    }
)


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    #: hosted but neither leading nor fetching (after StopReplica without delete, or no leader)
    STOPPED = "stopped"


@dataclass(frozen=True)
class FetchPartitionRequest:
    topic: str
    partition: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int


@dataclass(frozen=True)
class FetchPartitionResponse:
    topic: str
    partition: int
    error_code: int = KafkaError.NONE
    high_watermark: int = -1
    log_end_offset: int = -1
    records: tuple[Record, ...] = ()
    diverging: EpochEndOffset | None = None


@dataclass
class RemoteReplica:
    """The leader's view of one follower (Kafka's ``Replica``)."""

    leo: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = 0


#: correlation ids of ISR proposals: unique in a process, and a random start keeps a restarted broker
#: from taking an answer meant for its previous incarnation
_CORRELATION_IDS = itertools.count(random.randrange(1 << 30))


@dataclass
class PendingIsr:
    """An ISR change proposed to the controller: sent when the clock reaches ``send_at_ms``, then left to wait
    for its answer (``send_at_ms`` None) however long that takes, as Kafka's ``DefaultAlterPartitionManager``
    never times an AlterPartition out. The broker schedules it again only when the request cannot have
    reached a controller that will answer it (:class:`simbrokers.broker.SimBroker`)."""

    isr: tuple[int, ...]
    #: when to (re)send it; None while the request carrying it waits for its answer
    send_at_ms: int | None = 0
    #: how many times it was sent
    sent: int = 0
    #: the controller epoch the broker knew when it last sent it (-1: never sent)
    sent_controller_epoch: int = -1
    #: carried by every (re)send and echoed in the controller's answer
    correlation_id: int = field(default_factory=lambda: next(_CORRELATION_IDS))


@dataclass
class SimPartition:
    tp: TopicPartition
    broker_id: int
    log: ReplicaLog = field(default_factory=ReplicaLog)
    role: Role = Role.STOPPED
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    controller_epoch: int = -1
    replicas: tuple[int, ...] = ()
    #: the reassignment the latest LeaderAndIsr named (KIP-455's adding / removing replicas)
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    remote: dict[int, RemoteReplica] = field(default_factory=dict)
    pending: PendingIsr | None = None
    #: after FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION: no proposals until the next LeaderAndIsr
    await_leader_and_isr: bool = False
    #: offsets appended in this leadership, not yet acknowledged
    pending_acks: list[int] = field(default_factory=list)
    #: every record this replica acknowledged while leader: offset -> record
    acked: dict[int, Record] = field(default_factory=dict)
    #: acknowledgements that replaced an earlier one at the same offset (a later leadership of this replica
    #: acknowledged the offset again after its log was truncated)
    reacked: int = 0
    produce_credit: float = 0.0
    last_produce_ms: int | None = None
    next_fetch_ms: int = 0

    # ------------------------------------------------------------------ controller-driven transitions

    def make_leader(self, st: LisrPartitionState, now_ms: int) -> None:
        """Kafka's ``Partition.makeLeader``: take the assignment and ISR, start a new epoch at the LEO and reset
        the followers' state (those in the ISR count as caught up now)."""
        self._take_state(st)
        self.role = Role.LEADER
        self.leader = self.broker_id
        self.log.assign_epoch(st.leader_epoch, self.log.log_end_offset)
        self.remote = {
            r: RemoteReplica(last_caught_up_ms=now_ms if r in st.isr else 0) for r in st.replicas if r != self.broker_id
        }
        self.pending_acks = []
        self.last_produce_ms = now_ms
        self.produce_credit = 0.0
        self.maybe_advance_hw()

    def make_follower(self, st: LisrPartitionState, now_ms: int) -> None:
        """Kafka's ``Partition.makeFollower``; truncation happens through the next fetch."""
        self._take_state(st)
        self.leader = st.leader
        self.role = Role.FOLLOWER if st.leader >= 0 else Role.STOPPED
        self.remote = {}
        self.pending_acks = []
        self.next_fetch_ms = now_ms

    def _take_state(self, st: LisrPartitionState) -> None:
        self.leader_epoch = st.leader_epoch
        self.partition_epoch = st.partition_epoch
        self.controller_epoch = st.controller_epoch
        self.replicas = st.replicas
        self.adding = st.adding_replicas
        self.removing = st.removing_replicas
        self.isr = st.isr
        self.pending = None
        self.await_leader_and_isr = False

    def stop(self) -> None:
        self.role = Role.STOPPED
        self.remote = {}
        self.pending = None
        self.pending_acks = []

    # ------------------------------------------------------------------ leader

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending is None:
            return self.isr
        return tuple(dict.fromkeys(self.isr + self.pending.isr))

    def produce(self, now_ms: int, rate_per_s: float, min_insync_replicas: int) -> int:
        """Append what ``rate_per_s`` produced since the last call; returns how many records were appended.

        Refused (nothing appended) when the ISR is smaller than ``min.insync.replicas``, as acks=all is."""
        if self.role is not Role.LEADER:
            return 0
        last = self.last_produce_ms if self.last_produce_ms is not None else now_ms
        self.last_produce_ms = now_ms
        self.produce_credit += rate_per_s * max(0, now_ms - last) / 1000.0
        n = int(self.produce_credit)
        self.produce_credit -= n
        if len(self.isr) < min_insync_replicas:
            return 0
        return self.append(n)

    def append(self, n: int) -> int:
        """Append ``n`` records as leader (a produce request with acks=all)."""
        if self.role is not Role.LEADER:
            return 0
        for _ in range(n):
            offset = self.log.log_end_offset
            self.log.append(Record(self.leader_epoch, offset))
            self.pending_acks.append(offset)
        self.maybe_advance_hw()
        return n

    def maybe_advance_hw(self) -> bool:
        """HW := min LEO over the maximal ISR, if that is higher; acknowledge what it passes."""
        if self.role is not Role.LEADER:
            return False
        leos = [self.log.log_end_offset]
        for r in self.maximal_isr:
            if r != self.broker_id:
                rr = self.remote.get(r)
                leos.append(rr.leo if rr is not None else -1)
        new_hw = min(leos)
        if new_hw <= self.log.high_watermark:
            return False
        self.log.high_watermark = new_hw
        still = []
        for off in self.pending_acks:
            if off < new_hw:
                rec = self.log.record_at(off)
                if rec is not None:
                    if off in self.acked:
                        self.reacked += 1
                    self.acked[off] = rec
            else:
                still.append(off)
        self.pending_acks = still
        return True

    def handle_fetch(
        self, replica_id: int, req: FetchPartitionRequest, now_ms: int, max_records: int
    ) -> FetchPartitionResponse:
        """Serve one follower fetch (Kafka's ``Partition.fetchRecords`` with epoch validation)."""
        t, p = self.tp.topic, self.tp.partition
        if self.role is not Role.LEADER:
            return FetchPartitionResponse(t, p, KafkaError.NOT_LEADER_OR_FOLLOWER)
        if req.current_leader_epoch < self.leader_epoch:
            return FetchPartitionResponse(t, p, KafkaError.FENCED_LEADER_EPOCH)
        if req.current_leader_epoch > self.leader_epoch:
            return FetchPartitionResponse(t, p, KafkaError.UNKNOWN_LEADER_EPOCH)
        if replica_id not in self.remote:
            return FetchPartitionResponse(t, p, KafkaError.NOT_LEADER_OR_FOLLOWER)
        leo = self.log.log_end_offset
        if req.last_fetched_epoch != UNDEFINED_EPOCH:
            eeo = self.log.end_offset_for_epoch(req.last_fetched_epoch)
            if eeo.epoch < req.last_fetched_epoch or eeo.end_offset < req.fetch_offset:
                return FetchPartitionResponse(t, p, KafkaError.NONE, self.log.high_watermark, leo, (), eeo)
        if req.fetch_offset > leo:
            return FetchPartitionResponse(t, p, KafkaError.OFFSET_OUT_OF_RANGE, self.log.high_watermark, leo)
        self._update_follower(replica_id, req.fetch_offset, now_ms)
        records = tuple(self.log.records[req.fetch_offset : req.fetch_offset + max_records])
        return FetchPartitionResponse(t, p, KafkaError.NONE, self.log.high_watermark, leo, records)

    def _update_follower(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        rr = self.remote[replica_id]
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            rr.last_caught_up_ms = max(rr.last_caught_up_ms, now_ms)
        elif fetch_offset >= rr.last_fetch_leader_leo:
            rr.last_caught_up_ms = max(rr.last_caught_up_ms, rr.last_fetch_ms)
        rr.leo = fetch_offset
        rr.last_fetch_ms = now_ms
        rr.last_fetch_leader_leo = leo
        self._maybe_expand_isr(replica_id)
        self.maybe_advance_hw()

    def _maybe_expand_isr(self, replica_id: int) -> None:
        if self.pending is not None or self.await_leader_and_isr or replica_id in self.isr:
            return
        if replica_id not in self.replicas:
            return
        rr = self.remote[replica_id]
        start = self.log.epoch_start_offset(self.leader_epoch)
        if rr.leo >= self.log.high_watermark and start is not None and rr.leo >= start:
            self.pending = PendingIsr(tuple(r for r in self.replicas if r in self.isr or r == replica_id))

    def maybe_shrink_isr(self, now_ms: int, lag_max_ms: int) -> None:
        """Propose removing followers that were not caught up for ``lag_max_ms``."""
        if self.role is not Role.LEADER or self.pending is not None or self.await_leader_and_isr:
            return
        out = {
            r
            for r in self.isr
            if r != self.broker_id and (r not in self.remote or now_ms - self.remote[r].last_caught_up_ms > lag_max_ms)
        }
        if out:
            self.pending = PendingIsr(tuple(r for r in self.isr if r not in out))

    def apply_alter_result(self, res: AlterPartitionResult, now_ms: int) -> None:
        """Kafka's ``handleAlterPartitionUpdate`` / error handling for one partition."""
        if self.role is not Role.LEADER or self.pending is None:
            return  # settled already (answered, or overtaken by a LeaderAndIsr): this answer is stale
        if res.correlation_id >= 0 and res.correlation_id != self.pending.correlation_id:
            return  # the answer to a proposal a LeaderAndIsr overtook, not to the one in flight
        if res.error_code != KafkaError.NONE:
            self.pending = None
            if res.error_code in _WAIT_FOR_LEADER_AND_ISR:
                self.await_leader_and_isr = True
            return
        if res.leader_epoch != self.leader_epoch or res.partition_epoch < self.partition_epoch:
            return
        self.isr = res.isr
        self.partition_epoch = res.partition_epoch
        self.pending = None
        self.maybe_advance_hw()

    # ------------------------------------------------------------------ follower

    def fetch_request(self) -> FetchPartitionRequest:
        return FetchPartitionRequest(
            self.tp.topic, self.tp.partition, self.log.log_end_offset, self.log.latest_epoch, self.leader_epoch
        )

    def apply_fetch(self, resp: FetchPartitionResponse) -> int:
        """Apply the leader's answer; returns how many records were truncated (0 normally)."""
        if self.role is not Role.FOLLOWER:
            return 0
        if resp.error_code == KafkaError.OFFSET_OUT_OF_RANGE and 0 <= resp.log_end_offset < self.log.log_end_offset:
            return self.log.truncate_to(resp.log_end_offset)
        if resp.error_code != KafkaError.NONE:
            return 0
        if resp.diverging is not None:
            return self.log.truncate_to(self._truncation_offset(resp.diverging))
        for rec in resp.records:
            self.log.append(rec)
        self.log.high_watermark = max(self.log.high_watermark, min(resp.high_watermark, self.log.log_end_offset))
        return 0

    def _truncation_offset(self, leader: EpochEndOffset) -> int:
        """Kafka's ``AbstractFetcherThread.getOffsetTruncationState`` for a diverging epoch."""
        leo = self.log.log_end_offset
        if leader.end_offset == UNDEFINED_OFFSET:
            return min(self.log.high_watermark, leo)
        if leader.epoch == UNDEFINED_EPOCH:
            return min(leader.end_offset, leo)
        mine = self.log.end_offset_for_epoch(leader.epoch)
        if mine.end_offset == UNDEFINED_OFFSET:
            return min(leader.end_offset, leo)
        if mine.epoch != leader.epoch:
            # we do not know the leader's epoch: cut back to the end of ours and ask again
            return min(mine.end_offset, leo)
        return min(leader.end_offset, mine.end_offset, leo)
