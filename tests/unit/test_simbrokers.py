"""Simulated brokers, pure: Kafka's broker-side checks, replication, HW, truncation, controlled shutdown.

The tests play the controller with :class:`MiniController`, a fake that keeps each partition's leader,
epochs and ISR the way ZooKeeper would, sends LeaderAndIsr to the replicas and commits AlterPartition.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.codec.events import event_from_json, event_to_json
from core.errors import FormatError
from core.events import (
    AlterPartition,
    ControlledShutdown,
    Event,
    LeaderAndIsrResponse,
    LogDirFailure,
    StopReplicaResponse,
)
from core.kafka.envelope import Envelope, encode_request, parse_request
from core.kafka.error_codes import KafkaError
from core.kafka.requests import RequestApi
from core.model import TopicPartition
from simbrokers.broker import BrokerConfig, Faults, SimBroker
from simbrokers.fabric import LocalFabric, acknowledged_lost
from simbrokers.log import Record, ReplicaLog
from simbrokers.partition import Role
from simbrokers.shutdown import ShutdownPhase

pytestmark = pytest.mark.unit

T = "orders"
TP = TopicPartition(T, 0)


def envelope(broker: int, api: RequestApi, body: dict[str, Any], *, epoch: int = 1, batch: int = 0) -> Envelope:
    key, value = encode_request(broker, api, epoch, batch, body)
    return parse_request(key, value)


def lisr_body(
    *, leader: int, leader_epoch: int, isr: list[int], replicas: list[int], partition_epoch: int = 0, c_epoch: int = 1
) -> dict[str, Any]:
    return {
        "controllerId": 0,
        "controllerEpoch": c_epoch,
        "brokerEpoch": -1,
        "type": 0,
        "topicStates": [
            {
                "topicName": T,
                "topicId": "AAAAAAAAAAAAAAAAAAAAAA",
                "partitionStates": [
                    {
                        "partitionIndex": 0,
                        "controllerEpoch": c_epoch,
                        "leader": leader,
                        "leaderEpoch": leader_epoch,
                        "isr": isr,
                        "partitionEpoch": partition_epoch,
                        "replicas": replicas,
                        "addingReplicas": [],
                        "removingReplicas": [],
                        "isNew": leader_epoch == 0,
                        "leaderRecoveryState": 0,
                    }
                ],
            }
        ],
        "liveLeaders": [{"brokerId": leader, "hostName": "127.0.0.1", "port": 9000 + leader}],
    }


@dataclass
class MiniController:
    """A fake controller for one partition: ZooKeeper's view plus request delivery, no Kafka semantics beyond
    what the tests need."""

    brokers: dict[int, SimBroker]
    replicas: list[int]
    leader: int = -1
    leader_epoch: int = -1
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = 0
    batch: int = 0
    responses: list[Event] = field(default_factory=list)

    def elect(self, leader: int, isr: list[int], alive: list[int] | None = None, now: int = 0) -> None:
        self.leader, self.isr = leader, isr
        self.leader_epoch += 1
        self.partition_epoch += 1
        self.batch += 1
        for b in alive if alive is not None else self.replicas:
            body = lisr_body(
                leader=leader,
                leader_epoch=self.leader_epoch,
                isr=isr,
                replicas=self.replicas,
                partition_epoch=self.partition_epoch,
            )
            env = envelope(b, RequestApi.LEADER_AND_ISR, body, batch=self.batch)
            self.responses += self.brokers[b].handle(env, now)

    def alter_partition(self, ev: AlterPartition, *, accept: bool = True) -> None:
        """Kafka's controller checks: leader epoch and partition epoch must match."""
        self.batch += 1
        if accept and ev.leader_epoch == self.leader_epoch and ev.partition_epoch == self.partition_epoch:
            self.isr = list(ev.new_isr)
            self.partition_epoch += 1
            err = KafkaError.NONE
        else:
            err = KafkaError.INVALID_UPDATE_VERSION if accept else KafkaError.FENCED_LEADER_EPOCH
        body = {
            "errorCode": 0,
            "topics": [
                {
                    "topicName": ev.topic,
                    "partitions": [
                        {
                            "partitionIndex": ev.partition,
                            "errorCode": err,
                            "leaderId": self.leader,
                            "leaderEpoch": self.leader_epoch,
                            "isr": self.isr,
                            "partitionEpoch": self.partition_epoch,
                            "leaderRecoveryState": 0,
                            "correlationId": ev.correlation_id,
                        }
                    ],
                }
            ],
        }
        b = ev.broker_id
        self.brokers[b].handle(envelope(b, RequestApi.ALTER_PARTITION_RESPONSE, body, batch=self.batch), 0)


def cluster(n: int = 3, **cfg: Any) -> tuple[dict[int, SimBroker], LocalFabric]:
    config = BrokerConfig(**{"produce_rate": 0.0, "fetch_interval_ms": 10, **cfg})
    brokers = {i: SimBroker(i, config, broker_epoch=100 + i) for i in range(1, n + 1)}
    fabric = LocalFabric()
    for b in brokers.values():
        fabric.add(b)
    return brokers, fabric


def run(
    brokers: dict[int, SimBroker], fabric: LocalFabric, ctl: MiniController, start: int, end: int, *, step: int = 10
) -> list[Event]:
    """Advance time: ticks, fetches, and the controller commits every AlterPartition it sees."""
    seen: list[Event] = []
    for now in range(start, end, step):
        for b in list(brokers.values()):
            for ev in b.tick(now):
                seen.append(ev)
                if isinstance(ev, AlterPartition):
                    ctl.alter_partition(ev)
        fabric.step(now)
    return seen


def part(b: SimBroker) -> Any:
    return b.partitions[TP]


# ----------------------------------------------------------------------------- request parsing


def test_parse_request_names_the_field_and_reason() -> None:
    key, value = encode_request(
        1, RequestApi.LEADER_AND_ISR, 3, 7, lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1])
    )
    env = parse_request(key, value)
    assert (env.broker_id, env.controller_epoch, env.batch_id) == (1, 3, 7)
    bad = json.loads(value)
    del bad["body"]["topicStates"][0]["partitionStates"][0]["leader"]
    with pytest.raises(FormatError) as e:
        parse_request(key, json.dumps(bad))
    assert e.value.field == "body.topicStates[0].partitionStates[0].leader"
    assert e.value.reason == "is required"
    with pytest.raises(FormatError) as e:
        parse_request(b"x", value)
    assert e.value.field == "key"
    with pytest.raises(FormatError) as e:
        parse_request(key, json.dumps({**json.loads(value), "api": "Produce"}))
    assert e.value.field == "api"


def test_body_given_as_json_text_is_accepted() -> None:
    body = lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1])
    value = json.dumps({"api": "LeaderAndIsr", "controllerEpoch": 1, "batchId": 1, "body": json.dumps(body)})
    assert (
        parse_request(b"1", value).body == parse_request(*encode_request(1, RequestApi.LEADER_AND_ISR, 1, 1, body)).body
    )


# ----------------------------------------------------------------------------- broker-side checks


def test_leader_and_isr_makes_leader_and_follower_and_answers_in_core_json() -> None:
    brokers, _ = cluster()
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    assert part(brokers[1]).role is Role.LEADER
    assert part(brokers[2]).role is Role.FOLLOWER and part(brokers[2]).leader == 1
    resp = ctl.responses[0]
    assert isinstance(resp, LeaderAndIsrResponse)
    assert event_from_json(event_to_json(resp)) == resp
    assert [p.error_code for p in resp.partitions] == [KafkaError.NONE]


def test_stale_controller_epoch_is_refused() -> None:
    b = SimBroker(1)
    b.handle(
        envelope(1, RequestApi.LEADER_AND_ISR, lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1], c_epoch=5)), 0
    )
    [resp] = b.handle(
        envelope(1, RequestApi.LEADER_AND_ISR, lisr_body(leader=1, leader_epoch=1, isr=[1], replicas=[1], c_epoch=4)), 0
    )
    assert isinstance(resp, LeaderAndIsrResponse)
    assert resp.error_code == KafkaError.STALE_CONTROLLER_EPOCH
    assert [p.error_code for p in resp.partitions] == [KafkaError.STALE_CONTROLLER_EPOCH]
    assert part(b).leader_epoch == 0


@pytest.mark.parametrize("epoch", [2, 3])
def test_leader_epoch_not_newer_is_ignored(epoch: int) -> None:
    b = SimBroker(1)
    b.handle(
        envelope(1, RequestApi.LEADER_AND_ISR, lisr_body(leader=1, leader_epoch=3, isr=[1, 2], replicas=[1, 2])), 0
    )
    [resp] = b.handle(
        envelope(
            1, RequestApi.LEADER_AND_ISR, lisr_body(leader=2, leader_epoch=epoch, isr=[2], replicas=[1, 2]), batch=1
        ),
        0,
    )
    assert isinstance(resp, LeaderAndIsrResponse)
    assert resp.error_code == KafkaError.NONE
    assert [p.error_code for p in resp.partitions] == [KafkaError.STALE_CONTROLLER_EPOCH]
    assert part(b).role is Role.LEADER and part(b).leader_epoch == 3


def test_partition_not_assigned_here_is_unknown() -> None:
    b = SimBroker(1)
    [resp] = b.handle(
        envelope(1, RequestApi.LEADER_AND_ISR, lisr_body(leader=2, leader_epoch=0, isr=[2], replicas=[2, 3])), 0
    )
    assert isinstance(resp, LeaderAndIsrResponse)
    assert [p.error_code for p in resp.partitions] == [KafkaError.UNKNOWN_TOPIC_OR_PARTITION]
    assert TP not in b.partitions


def test_stale_broker_epoch_is_refused() -> None:
    b = SimBroker(1, broker_epoch=50)
    body = lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1]) | {"brokerEpoch": 49}
    [resp] = b.handle(envelope(1, RequestApi.LEADER_AND_ISR, body), 0)
    assert isinstance(resp, LeaderAndIsrResponse)
    assert resp.error_code == KafkaError.STALE_BROKER_EPOCH
    assert TP not in b.partitions


def test_replayed_request_is_dropped_but_other_bucket_messages_apply() -> None:
    b = SimBroker(1)
    env = envelope(1, RequestApi.LEADER_AND_ISR, lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1]), batch=9)
    assert len(b.handle(env, 0)) == 1
    assert b.handle(env, 0) == []
    other = lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1])
    other["topicStates"][0]["topicName"] = "other"
    assert len(b.handle(envelope(1, RequestApi.LEADER_AND_ISR, other, batch=9), 0)) == 1
    older = lisr_body(leader=1, leader_epoch=5, isr=[1], replicas=[1])
    assert b.handle(envelope(1, RequestApi.LEADER_AND_ISR, older, batch=8), 0) == []  # an older batch
    assert part(b).leader_epoch == 0
    assert len(b.handle(envelope(1, RequestApi.LEADER_AND_ISR, older, batch=1, epoch=2), 0)) == 1  # newer controller


def test_request_for_another_broker_is_ignored() -> None:
    b = SimBroker(1)
    assert (
        b.handle(envelope(2, RequestApi.LEADER_AND_ISR, lisr_body(leader=2, leader_epoch=0, isr=[2], replicas=[2])), 0)
        == []
    )


def stop_body(*, delete: bool, leader_epoch: int = -2) -> dict[str, Any]:
    return {
        "controllerId": 0,
        "controllerEpoch": 1,
        "brokerEpoch": -1,
        "topicStates": [
            {
                "topicName": T,
                "partitionStates": [{"partitionIndex": 0, "leaderEpoch": leader_epoch, "deletePartition": delete}],
            }
        ],
    }


def test_stop_replica_delete_reports_success() -> None:
    brokers, _ = cluster(2)
    MiniController(brokers, [1, 2]).elect(1, [1, 2])
    [resp] = brokers[2].handle(envelope(2, RequestApi.STOP_REPLICA, stop_body(delete=True), batch=5), 0)
    assert isinstance(resp, StopReplicaResponse)
    assert [p.error_code for p in resp.partitions] == [KafkaError.NONE]
    assert TP not in brokers[2].partitions


def test_stop_replica_without_delete_stops_and_sends_no_response() -> None:
    brokers, _ = cluster(2)
    MiniController(brokers, [1, 2]).elect(1, [1, 2])
    assert (
        brokers[2].handle(envelope(2, RequestApi.STOP_REPLICA, stop_body(delete=False, leader_epoch=1), batch=5), 0)
        == []
    )
    assert part(brokers[2]).role is Role.STOPPED


def test_stop_replica_with_older_leader_epoch_is_fenced() -> None:
    brokers, _ = cluster(2)
    ctl = MiniController(brokers, [1, 2])
    ctl.elect(1, [1, 2])
    ctl.elect(1, [1, 2])
    [resp] = brokers[2].handle(envelope(2, RequestApi.STOP_REPLICA, stop_body(delete=True, leader_epoch=0), batch=5), 0)
    assert isinstance(resp, StopReplicaResponse)
    assert [p.error_code for p in resp.partitions] == [KafkaError.FENCED_LEADER_EPOCH]


def test_disk_failure_fails_stop_replica_and_leader_and_isr_and_is_reported_once() -> None:
    brokers, _ = cluster(2)
    MiniController(brokers, [1, 2]).elect(1, [1, 2])
    assert brokers[2].inject(Faults(disk_failed=True)) == [LogDirFailure(2)]
    assert brokers[2].inject(Faults(disk_failed=True)) == []
    assert brokers[2].inject(Faults()) == [] and brokers[2].faults.disk_failed  # sticks until restart
    [resp] = brokers[2].handle(envelope(2, RequestApi.STOP_REPLICA, stop_body(delete=True), batch=5), 0)
    assert isinstance(resp, StopReplicaResponse)
    assert [p.error_code for p in resp.partitions] == [KafkaError.KAFKA_STORAGE_ERROR]
    [lisr] = brokers[2].handle(
        envelope(2, RequestApi.LEADER_AND_ISR, lisr_body(leader=2, leader_epoch=5, isr=[2], replicas=[1, 2]), batch=6),
        0,
    )
    assert isinstance(lisr, LeaderAndIsrResponse)
    assert [p.error_code for p in lisr.partitions] == [KafkaError.KAFKA_STORAGE_ERROR]


def test_update_metadata_fills_the_cache_and_stale_one_is_ignored() -> None:
    b = SimBroker(1)
    body = {
        "controllerId": 0,
        "controllerEpoch": 2,
        "brokerEpoch": -1,
        "topicStates": [
            {
                "topicName": T,
                "topicId": "x",
                "partitionStates": [
                    {
                        "partitionIndex": 0,
                        "controllerEpoch": 2,
                        "leader": 2,
                        "leaderEpoch": 4,
                        "isr": [2],
                        "zkVersion": 7,
                        "replicas": [1, 2],
                        "offlineReplicas": [1],
                    }
                ],
            }
        ],
        "liveBrokers": [
            {
                "id": 2,
                "endpoints": [{"port": 9093, "host": "h2", "listener": "PLAINTEXT", "securityProtocol": "PLAINTEXT"}],
                "rack": None,
            }
        ],
    }
    b.handle(envelope(1, RequestApi.UPDATE_METADATA, body), 0)
    assert b.metadata.partitions[TP].leader == 2
    assert b.leader_address(2) is not None and b.leader_address(2).port == 9093  # type: ignore[union-attr]
    stale = body | {"controllerEpoch": 1, "liveBrokers": []}
    b.handle(envelope(1, RequestApi.UPDATE_METADATA, stale, batch=1), 0)
    assert 2 in b.metadata.brokers


# ----------------------------------------------------------------------------- replication and HW


def test_high_watermark_is_the_smallest_leo_in_the_isr_and_acks_follow_it() -> None:
    brokers, fabric = cluster()
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    leader = part(brokers[1])
    leader.append(5)
    assert leader.log.high_watermark == 0 and not leader.acked  # followers have not fetched
    brokers[3].inject(Faults(stuck=True))
    run(brokers, fabric, ctl, 0, 100)
    assert part(brokers[2]).log.log_end_offset == 5
    assert leader.log.high_watermark == 0  # broker 3 is in the ISR and has nothing
    brokers[3].inject(Faults())
    run(brokers, fabric, ctl, 100, 200)
    assert leader.log.high_watermark == 5
    assert sorted(leader.acked) == [0, 1, 2, 3, 4]
    assert part(brokers[3]).log.high_watermark == 5


def test_stuck_follower_leaves_the_isr_after_lag_time_and_rejoins_when_caught_up() -> None:
    brokers, fabric = cluster(replica_lag_time_max_ms=1000, produce_rate=100.0)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    run(brokers, fabric, ctl, 0, 500)
    brokers[3].inject(Faults(stuck=True))
    events = run(brokers, fabric, ctl, 500, 2000)
    shrinks = [e for e in events if isinstance(e, AlterPartition)]
    assert shrinks and shrinks[0].new_isr == (1, 2)
    assert shrinks[0].broker_id == 1 and shrinks[0].broker_epoch == 101
    assert shrinks[0].leader_epoch == 0 and shrinks[0].partition_epoch == 1
    assert part(brokers[1]).isr == (1, 2) and ctl.isr == [1, 2]
    leader = part(brokers[1])
    assert leader.log.high_watermark >= leader.log.log_end_offset - 5  # no longer held back by broker 3
    brokers[3].inject(Faults())
    events = run(brokers, fabric, ctl, 2000, 3000)
    expands = [e for e in events if isinstance(e, AlterPartition)]
    assert expands and expands[0].new_isr == (1, 2, 3)
    assert part(brokers[1]).isr == (1, 2, 3)


def test_slow_follower_that_never_catches_up_leaves_the_isr() -> None:
    brokers, fabric = cluster(replica_lag_time_max_ms=1000, produce_rate=200.0)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    brokers[2].inject(Faults(slow_fetch_interval_ms=50, slow_fetch_max_records=1))
    run(brokers, fabric, ctl, 0, 3000)
    assert ctl.isr == [1, 3]


def test_one_isr_change_in_flight_and_fenced_answer_waits_for_leader_and_isr() -> None:
    brokers, _ = cluster(replica_lag_time_max_ms=100)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    [ev] = brokers[1].tick(500)
    assert isinstance(ev, AlterPartition) and ev.new_isr == (1,)
    assert brokers[1].tick(600) == []  # in flight
    [again] = brokers[1].tick(500 + 5000)  # unanswered: resent
    assert again == ev
    ctl.alter_partition(ev, accept=False)
    assert part(brokers[1]).pending is None and part(brokers[1]).isr == (1, 2, 3)
    assert brokers[1].tick(20_000) == []
    ctl.elect(1, [1, 2, 3])
    assert [type(e) for e in brokers[1].tick(30_000)] == [AlterPartition]


def test_answer_overtaken_by_leader_and_isr_is_ignored() -> None:
    """The controller fences a shrink proposal because it has just elected anew; its LeaderAndIsr reaches the
    leader first. The late FENCED answer belongs to the old proposal: the leader must not stop proposing."""
    brokers, fabric = cluster(replica_lag_time_max_ms=100)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    [old] = brokers[1].tick(500)
    assert isinstance(old, AlterPartition) and old.new_isr == (1,)
    ctl.elect(1, [1, 2], alive=[1, 2])  # broker 3 failed: a new leader epoch, ISR shrunk by the controller
    assert part(brokers[1]).pending is None
    [new] = brokers[1].tick(1000)  # broker 2 still does not fetch: a new proposal
    assert new.new_isr == (1,) and new.correlation_id != old.correlation_id
    ctl.alter_partition(old, accept=False)  # the stale answer arrives now
    assert part(brokers[1]).pending is not None and not part(brokers[1]).await_leader_and_isr
    ctl.alter_partition(new)
    assert part(brokers[1]).isr == (1,) and ctl.isr == [1]
    # a duplicate answer to a settled proposal changes nothing either
    ctl.alter_partition(old, accept=False)
    assert not part(brokers[1]).await_leader_and_isr
    run(brokers, fabric, ctl, 1000, 1500)  # broker 2 catches up and is proposed back
    assert part(brokers[1]).isr == (1, 2) and ctl.isr == [1, 2]


def test_min_insync_replicas_refuses_produce() -> None:
    brokers, _ = cluster(1, min_insync_replicas=2, produce_rate=1000.0)
    MiniController(brokers, [1]).elect(1, [1])
    brokers[1].tick(0)
    brokers[1].tick(1000)
    assert part(brokers[1]).log.log_end_offset == 0


# ----------------------------------------------------------------------------- truncation and elections


def test_new_follower_truncates_to_the_leaders_epoch_boundary() -> None:
    brokers, fabric = cluster(2)
    ctl = MiniController(brokers, [1, 2])
    ctl.elect(1, [1, 2])
    part(brokers[1]).append(3)
    run(brokers, fabric, ctl, 0, 100)
    brokers[2].inject(Faults(stuck=True))
    part(brokers[1]).append(4)  # offsets 3..6 only on broker 1, not acknowledged
    assert part(brokers[1]).log.high_watermark == 3
    ctl.elect(2, [2], alive=[2])  # broker 1 "failed"; 2 was in the ISR: a clean election
    brokers[2].inject(Faults())
    part(brokers[2]).append(2)  # epoch 1 writes offsets 3, 4
    ctl.elect(2, [2, 1])  # broker 1 comes back as follower
    run(brokers, fabric, ctl, 100, 300)
    log1 = part(brokers[1]).log
    assert log1.records == part(brokers[2]).log.records
    assert log1.records[3] == Record(1, 3)
    assert brokers[1].truncated_records == 4
    assert acknowledged_lost(brokers.values(), TP).lost == ()


def test_no_acknowledged_record_is_lost_by_clean_elections() -> None:
    brokers, fabric = cluster(replica_lag_time_max_ms=500, produce_rate=100.0)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    now = 0
    for round_ in range(6):
        if round_ % 2:
            brokers[3].inject(Faults(stuck=True))
        else:
            brokers[3].inject(Faults())
        run(brokers, fabric, ctl, now, now + 1500)
        now += 1500
        # the leader "fails": the controller picks the first other live replica in the ISR (clean)
        old = ctl.leader
        new = next(r for r in ctl.replicas if r != old and r in ctl.isr)
        ctl.elect(new, [r for r in ctl.isr if r != old], alive=[r for r in ctl.replicas if r != old], now=now)
        run(brokers, fabric, ctl, now, now + 200)
        now += 200
        ctl.elect(new, ctl.isr, now=now)  # old leader restarts as follower
        report = acknowledged_lost(brokers.values(), TP)
        assert report.lost == (), f"round {round_}: lost {report.lost[:5]}"
    assert acknowledged_lost(brokers.values(), TP).acknowledged > 100


def test_unclean_election_loses_acknowledged_records_and_they_are_counted() -> None:
    brokers, fabric = cluster(2, replica_lag_time_max_ms=200, produce_rate=100.0)
    ctl = MiniController(brokers, [1, 2])
    ctl.elect(1, [1, 2])
    run(brokers, fabric, ctl, 0, 300)
    synced = part(brokers[2]).log.log_end_offset
    brokers[2].inject(Faults(stuck=True))
    run(brokers, fabric, ctl, 300, 1300)  # ISR shrinks to [1]; 1 acknowledges alone
    assert ctl.isr == [1]
    acked_alone = [o for o in part(brokers[1]).acked if o >= synced]
    assert acked_alone
    brokers[1].partitions[TP].stop()  # broker 1 dies
    brokers[2].inject(Faults())
    ctl.elect(2, [2], alive=[2])  # unclean: 2 was not in the ISR
    part(brokers[2]).append(3)
    ctl.elect(2, [2, 1])  # broker 1 returns and follows
    run(brokers, fabric, ctl, 1300, 1600)
    report = acknowledged_lost(brokers.values(), TP)
    assert report.leader == 2
    assert len(report.lost) >= len(acked_alone) - 1 > 0
    assert part(brokers[1]).log.records == part(brokers[2]).log.records


def test_epoch_cache_end_offsets_follow_kafka() -> None:
    log = ReplicaLog()
    for e, n in ((0, 3), (2, 2), (5, 1)):
        for _ in range(n):
            log.append(Record(e, log.log_end_offset))
    assert log.epochs == [(0, 0), (2, 3), (5, 5)]
    assert (log.end_offset_for_epoch(5).epoch, log.end_offset_for_epoch(5).end_offset) == (5, 6)
    assert (log.end_offset_for_epoch(3).epoch, log.end_offset_for_epoch(3).end_offset) == (2, 5)
    assert (log.end_offset_for_epoch(0).epoch, log.end_offset_for_epoch(0).end_offset) == (0, 3)
    assert log.end_offset_for_epoch(9).end_offset == -1
    log.truncate_to(4)
    assert log.epochs == [(0, 0), (2, 3)]


# ----------------------------------------------------------------------------- controlled shutdown


def csr_body(remaining: list[tuple[str, int]], error: int = 0) -> dict[str, Any]:
    return {"errorCode": error, "remainingPartitions": [{"topicName": t, "partitionIndex": p} for t, p in remaining]}


def test_controlled_shutdown_succeeds_when_every_bucket_says_nothing_remains() -> None:
    b = SimBroker(1, BrokerConfig(controlled_shutdown_settle_ms=100), broker_epoch=7)
    assert b.start_controlled_shutdown(0) == [ControlledShutdown(1, 7)]
    assert b.start_controlled_shutdown(1) == []
    b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([]), batch=3), 10)
    b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([("t", 1)]), batch=3), 20)
    b.tick(200)
    assert b.shutdown_phase is ShutdownPhase.BACKOFF  # one bucket still had a partition: the sum is not empty
    assert b.shutdown.last_remaining == (TopicPartition("t", 1),)
    [retry] = b.tick(200 + 5000)
    assert retry == ControlledShutdown(1, 7)
    b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([]), batch=4), 5300)
    b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([], 0) | {"x": 1}, batch=4), 5310)
    b.tick(5500)
    assert b.shutdown_phase is ShutdownPhase.SUCCEEDED


def test_controlled_shutdown_retries_three_times_then_gives_up() -> None:
    b = SimBroker(1, BrokerConfig(controlled_shutdown_timeout_ms=1000, controlled_shutdown_retry_backoff_ms=500))
    sent = b.start_controlled_shutdown(0)
    now = 0
    while not b.shutdown.done and now < 60_000:
        now += 100
        sent += [e for e in b.tick(now) if isinstance(e, ControlledShutdown)]
        if len(sent) == 2 and b.shutdown_phase is ShutdownPhase.AWAITING:
            b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([], error=41), batch=len(sent)), now)
    assert len(sent) == 3
    assert b.shutdown_phase is ShutdownPhase.FAILED
    assert b.shutdown.last_error == KafkaError.REQUEST_TIMED_OUT


def test_controlled_shutdown_answer_while_not_waiting_is_ignored() -> None:
    b = SimBroker(1)
    b.handle(envelope(1, RequestApi.CONTROLLED_SHUTDOWN_RESPONSE, csr_body([])), 0)
    assert b.shutdown_phase is ShutdownPhase.IDLE


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([1, 2, 3]), st.booleans(), st.integers(50, 1500), st.booleans()),
        min_size=1,
        max_size=8,
    )
)
def test_property_clean_elections_never_lose_acknowledged_records(schedule: list[tuple[int, bool, int, bool]]) -> None:
    """Followers stall and recover at random; the leader dies at random and the controller elects a live
    in-ISR replica (clean); the dead leader returns as a follower. No acknowledged record is ever lost."""
    brokers, fabric = cluster(replica_lag_time_max_ms=300, produce_rate=50.0)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    now = 0
    for broker, stuck, dt, leader_dies in schedule:
        if broker != ctl.leader:
            brokers[broker].inject(Faults(stuck=stuck))
        run(brokers, fabric, ctl, now, now + dt)
        now += dt
        candidates = [r for r in ctl.replicas if r != ctl.leader and r in ctl.isr]
        if leader_dies and candidates:
            old = ctl.leader
            brokers[old].partitions[TP].stop()
            survivors = [r for r in ctl.replicas if r != old]
            ctl.elect(candidates[0], [r for r in ctl.isr if r != old], alive=survivors, now=now)
            run(brokers, fabric, ctl, now, now + 100)
            now += 100
            ctl.elect(ctl.leader, ctl.isr, now=now)
        report = acknowledged_lost(brokers.values(), TP)
        assert report.lost == (), report.lost[:5]
