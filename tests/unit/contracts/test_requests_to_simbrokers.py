"""One table of Kafka's error codes, and the contract from the core's requests to the simulated brokers.

The core builds request bodies (:mod:`core.request_batch`), the request sink wraps them into
``livectl.requests`` messages (:func:`sinks.requests.request_messages`), the simulated brokers parse them
(:func:`core.kafka.envelope.parse_request`). Every field the core sends must arrive as the core meant it,
and every error code must be the one Kafka gives that name."""

from __future__ import annotations

from typing import Any

import pytest
from core_support import Cluster, every_api_requests

from core.decisions import BrokerRequest
from core.events import (
    AlterPartition,
    BrokerFailure,
    ControlledShutdown,
    CreateTopic,
    DeleteTopic,
    ReassignPartitions,
    StopReplicaResponse,
)
from core.kafka.envelope import encode_request, parse_request
from core.kafka.error_codes import KafkaError, error_name
from core.kafka.requests import (
    AlterPartitionResponse,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    RequestApi,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.model import PartitionTarget, TopicPartition
from simbrokers.broker import SimBroker
from simbrokers.partition import PendingIsr, SimPartition
from sinks.ports import Fence
from sinks.requests import request_messages

pytestmark = pytest.mark.unit


def _pending(part: SimPartition) -> PendingIsr | None:
    """The partition's ISR proposal in flight now (mypy keeps an attribute narrowed by an assignment)."""
    return part.pending


def test_codes_are_kafkas() -> None:
    # org.apache.kafka.common.protocol.Errors
    assert int(KafkaError.INVALID_UPDATE_VERSION) == 95
    assert int(KafkaError.UNKNOWN_TOPIC_ID) == 100
    assert int(KafkaError.INELIGIBLE_REPLICA) == 107
    assert int(KafkaError.NEW_LEADER_ELECTED) == 108
    assert int(KafkaError.UNKNOWN_SERVER_ERROR) == -1
    assert int(KafkaError.STALE_BROKER_EPOCH) == 77
    assert error_name(95) == "INVALID_UPDATE_VERSION"
    assert error_name(9999) == "ERROR_9999"


def test_simbrokers_admin_and_core_share_the_table() -> None:
    # admin's former broker_shutdown is simbrokers.shutdown_watch (livectl-simbrokers shutdown --wait)
    from simbrokers import broker, partition, shutdown, shutdown_watch

    for module in (broker, partition, shutdown, shutdown_watch):
        assert module.KafkaError is KafkaError, module.__name__
    assert len(KafkaError), "core.kafka.error_codes lists no codes"
    # one name per code: an IntEnum would silently make a second name for a code an alias of the first
    assert len(KafkaError.__members__) == len({int(e) for e in KafkaError})
    for e in KafkaError:
        assert KafkaError[e.name] is e and error_name(int(e)) == e.name
    assert error_name(KafkaError.INVALID_UPDATE_VERSION) == "INVALID_UPDATE_VERSION"


def _check(req: BrokerRequest, parsed: Any) -> None:
    body = req.body_json()
    sent: list[tuple[Any, ...]]
    got: list[tuple[Any, ...]]
    if req.api is RequestApi.LEADER_AND_ISR:
        assert isinstance(parsed, LeaderAndIsrRequest)
        assert (parsed.controller_id, parsed.controller_epoch, parsed.broker_epoch, parsed.type) == (
            body["controllerId"],
            body["controllerEpoch"],
            body["brokerEpoch"],
            body["type"],
        )
        sent = [
            (t["topicName"], s["partitionIndex"], s["controllerEpoch"], s["leader"], s["leaderEpoch"],
             tuple(s["isr"]), s["partitionEpoch"], tuple(s["replicas"]), tuple(s["addingReplicas"]),
             tuple(s["removingReplicas"]), s["isNew"], s["leaderRecoveryState"])
            for t in body["topicStates"] for s in t["partitionStates"]
        ]  # fmt: skip
        got = [
            (p.topic, p.partition, p.controller_epoch, p.leader, p.leader_epoch, p.isr, p.partition_epoch,
             p.replicas, p.adding_replicas, p.removing_replicas, p.is_new, p.leader_recovery_state)
            for p in parsed.partitions
        ]  # fmt: skip
        assert got == sent
        assert [(b.broker_id, b.host, b.port) for b in parsed.live_leaders] == [
            (b["brokerId"], b["hostName"], b["port"]) for b in body["liveLeaders"]
        ]
    elif req.api is RequestApi.UPDATE_METADATA:
        assert isinstance(parsed, UpdateMetadataRequest)
        sent = [
            (t["topicName"], s["partitionIndex"], s["controllerEpoch"], s["leader"], s["leaderEpoch"],
             tuple(s["isr"]), s["zkVersion"], tuple(s["replicas"]), tuple(s["offlineReplicas"]))
            for t in body["topicStates"] for s in t["partitionStates"]
        ]  # fmt: skip
        got = [
            (p.topic, p.partition, p.controller_epoch, p.leader, p.leader_epoch, p.isr, p.zk_version,
             p.replicas, p.offline_replicas)
            for p in parsed.partitions
        ]  # fmt: skip
        assert got == sent
        assert [b.broker_id for b in parsed.live_brokers] == [b["id"] for b in body["liveBrokers"]]
        assert list(parsed.racks) == [(b["id"], b.get("rack")) for b in body["liveBrokers"]]
    elif req.api is RequestApi.STOP_REPLICA:
        assert isinstance(parsed, StopReplicaRequest)
        sent = [
            (t["topicName"], s["partitionIndex"], s["leaderEpoch"], s["deletePartition"])
            for t in body["topicStates"]
            for s in t["partitionStates"]
        ]
        assert [(p.topic, p.partition, p.leader_epoch, p.delete_partition) for p in parsed.partitions] == sent
        assert parsed.broker_epoch == body["brokerEpoch"]
    elif req.api is RequestApi.CONTROLLED_SHUTDOWN_RESPONSE:
        assert isinstance(parsed, ControlledShutdownResponse)
        assert parsed.error_code == body["errorCode"]
        assert [(tp.topic, tp.partition) for tp in parsed.remaining] == [
            (r["topicName"], r["partitionIndex"]) for r in body["remainingPartitions"]
        ]
    else:
        assert isinstance(parsed, AlterPartitionResponse)
        assert parsed.error_code == body["errorCode"]
        sent = [
            (t["topicName"], s["partitionIndex"], s["errorCode"], s["leaderId"], s["leaderEpoch"], tuple(s["isr"]),
             s["partitionEpoch"], s["leaderRecoveryState"], s.get("correlationId", -1))
            for t in body["topics"] for s in t["partitions"]
        ]  # fmt: skip
        got = [
            (r.topic, r.partition, r.error_code, r.leader_id, r.leader_epoch, r.isr, r.partition_epoch,
             r.leader_recovery_state, r.correlation_id)
            for r in parsed.partitions
        ]  # fmt: skip
        assert got == sent


def test_every_request_the_core_sends_reaches_the_simulated_brokers_intact() -> None:
    requests = every_api_requests()
    assert {r.api for r in requests} == set(RequestApi)
    fence = Fence(4, 3)
    for req in requests:
        (msg,) = request_messages("livectl.requests", fence, 12, [req])
        env = parse_request(msg.key, msg.value)
        assert (env.broker_id, env.api, env.controller_epoch, env.batch_id) == (req.broker_id, req.api, 4, 12)
        _check(req, env.body)
    answers = [r for r in requests if r.api is RequestApi.ALTER_PARTITION_RESPONSE]
    codes_sent = {p["errorCode"] for r in answers for t in r.body_json()["topics"] for p in t["partitions"]}
    # the accepted proposal and the one from the future (Kafka: NOT_CONTROLLER), by Kafka's numbers
    assert codes_sent == {KafkaError.NONE, KafkaError.NOT_CONTROLLER}


def _variants(req: BrokerRequest) -> set[str]:
    """The shapes of one request that the brokers' parser must read differently."""
    body = req.body_json()
    if req.api is RequestApi.LEADER_AND_ISR:
        states = [s for t in body["topicStates"] for s in t["partitionStates"]]
        return (
            {f"LeaderAndIsr isNew={s['isNew']}" for s in states}
            | {"LeaderAndIsr addingReplicas" for s in states if s["addingReplicas"]}
            | {"LeaderAndIsr removingReplicas" for s in states if s["removingReplicas"]}
        )
    if req.api is RequestApi.UPDATE_METADATA:
        states = [s for t in body["topicStates"] for s in t["partitionStates"]]
        return {"UpdateMetadata offlineReplicas" for s in states if s["offlineReplicas"]} | {"UpdateMetadata"}
    if req.api is RequestApi.STOP_REPLICA:
        return {
            f"StopReplica deletePartition={s['deletePartition']}"
            for t in body["topicStates"]
            for s in t["partitionStates"]
        }
    if req.api is RequestApi.CONTROLLED_SHUTDOWN_RESPONSE:
        return {f"ControlledShutdownResponse remaining={bool(body['remainingPartitions'])}"}
    return {req.api.value}


def test_every_variant_of_each_request_reaches_the_simulated_brokers_intact() -> None:
    """Beyond one request per API: a reassignment in flight (adding and removing replicas), a dead broker
    (offline replicas), a controlled shutdown that leaves a partition behind (its only replica), and a
    deletion (StopReplica with and without deletePartition), each parsed by the simulated brokers as sent."""
    c = Cluster.start([1, 2, 3, 4])
    c.run(CreateTopic("r1", "t", replica_assignment=((1, 2), (2, 1))))
    c.run(CreateTopic("r2", "solo", replica_assignment=((2,),)))
    c.run(CreateTopic("r3", "gone", replica_assignment=((1, 3),)))
    requests = c.requests()
    c.run(ReassignPartitions("r4", (PartitionTarget("t", 0, (3, 4)),)))
    requests += c.requests()
    c.run(BrokerFailure(4, c.ctx.live_brokers[4].epoch))
    requests += c.requests()
    c.run(ControlledShutdown(2, c.ctx.live_brokers[2].epoch))
    requests += c.requests()
    c.run(DeleteTopic("r5", "gone"))
    requests += c.requests()
    seen: set[str] = set()
    fence = Fence(2, 1)
    for batch, req in enumerate(requests):
        seen |= _variants(req)
        (msg,) = request_messages("livectl.requests", fence, batch, [req])
        env = parse_request(msg.key, msg.value)
        assert (env.broker_id, env.api, env.controller_epoch, env.batch_id) == (req.broker_id, req.api, 2, batch)
        _check(req, env.body)
    assert seen >= {
        "LeaderAndIsr isNew=True",
        "LeaderAndIsr isNew=False",
        "LeaderAndIsr addingReplicas",
        "LeaderAndIsr removingReplicas",
        "UpdateMetadata",
        "UpdateMetadata offlineReplicas",
        "StopReplica deletePartition=True",
        "StopReplica deletePartition=False",
        "ControlledShutdownResponse remaining=True",
    }, seen


def _lisr_body(epoch: int) -> dict[str, Any]:
    return {
        "controllerId": 0,
        "controllerEpoch": 1,
        "brokerEpoch": 101,
        "type": 0,
        "topicStates": [
            {
                "topicName": "t",
                "topicId": "AAAAAAAAAAAAAAAAAAAAAA",
                "partitionStates": [
                    {"partitionIndex": 0, "controllerEpoch": 1, "leader": 1, "leaderEpoch": epoch, "isr": [1],
                     "partitionEpoch": 0, "replicas": [1], "addingReplicas": [], "removingReplicas": [],
                     "isNew": True, "leaderRecoveryState": 0}
                ],
            }
        ],
        "liveLeaders": [{"brokerId": 1, "hostName": "localhost", "port": 9093}],
    }  # fmt: skip


def _stop_body(epoch: int, delete: bool = True) -> dict[str, Any]:
    return {
        "controllerId": 0,
        "controllerEpoch": 1,
        "brokerEpoch": 101,
        "topicStates": [
            {
                "topicName": "t",
                "partitionStates": [{"partitionIndex": 0, "leaderEpoch": epoch, "deletePartition": delete}],
            }
        ],
    }


@pytest.mark.parametrize(
    ("stop_epoch", "expected", "hosted_after"),
    [(3, KafkaError.NONE, False), (4, KafkaError.NONE, False), (2, KafkaError.FENCED_LEADER_EPOCH, True)],
    ids=["equal-epoch-applied", "newer-epoch-applied", "older-epoch-fenced"],
)
def test_stop_replica_follows_kafkas_epoch_rule(stop_epoch: int, expected: int, hosted_after: bool) -> None:
    """Kafka's ``ReplicaManager.stopReplicas``: a leader epoch equal to the replica's or newer is applied,
    only an older one is fenced (and the -2 / -1 sentinels always apply)."""
    b = SimBroker(1, broker_epoch=101)
    key, value = encode_request(1, RequestApi.LEADER_AND_ISR, 1, 1, _lisr_body(3))
    b.handle(parse_request(key, value), 0)
    tp = TopicPartition("t", 0)
    assert tp in b.partitions and b.partitions[tp].leader_epoch == 3
    key, value = encode_request(1, RequestApi.STOP_REPLICA, 1, 2, _stop_body(stop_epoch))
    (answer,) = b.handle(parse_request(key, value), 0)
    assert isinstance(answer, StopReplicaResponse)
    assert answer.error_code == KafkaError.NONE
    assert [(p.topic, p.partition, p.error_code) for p in answer.partitions] == [("t", 0, expected)]
    assert (tp in b.partitions) is hosted_after


def test_the_simulated_leader_waits_for_leader_and_isr_after_the_cores_invalid_update_version() -> None:
    """The core answers a proposal made at an old partition epoch with Kafka's INVALID_UPDATE_VERSION (95);
    the simulated leader, reading the same table, stops proposing until a LeaderAndIsr comes (Kafka's
    ``Partition.handleAlterPartitionError``)."""
    c = Cluster.start([1, 2, 3])
    c.run(CreateTopic("r1", "t", replica_assignment=((1, 2, 3),)))
    fence = Fence(1, 0)
    broker = SimBroker(1, broker_epoch=c.ctx.live_brokers[1].epoch)
    for msg in request_messages("livectl.requests", fence, 1, c.requests(broker=1)):
        broker.handle(parse_request(msg.key, msg.value), 0)
    tp = TopicPartition("t", 0)
    part = broker.partitions[tp]
    assert (part.leader_epoch, part.partition_epoch) == (0, 0)
    # the ISR moved on at the controller (partition epoch 1) without this broker hearing of it
    c.run(AlterPartition(1, c.ctx.live_brokers[1].epoch, "t", 0, 0, 0, (1, 2), 0, 1))
    assert c.leader_and_isr(tp).partition_epoch == 1
    part.pending = PendingIsr((1,))
    (proposal,) = [e for e in broker.tick(10) if isinstance(e, AlterPartition)]
    assert proposal.partition_epoch == 0
    c.run(proposal)
    (answer,) = c.requests(RequestApi.ALTER_PARTITION_RESPONSE)
    assert (
        answer.body_json()["topics"][0]["partitions"][0]["errorCode"] == KafkaError.INVALID_UPDATE_VERSION.value == 95
    )
    (msg,) = request_messages("livectl.requests", fence, 2, [answer])
    broker.handle(parse_request(msg.key, msg.value), 20)
    assert _pending(part) is None and part.await_leader_and_isr
    assert not [e for e in broker.tick(10_000) if isinstance(e, AlterPartition)]


@pytest.mark.parametrize("deregistered", [True, False], ids=["failure-then-startup", "bounce"])
def test_a_broker_restarted_after_its_controlled_shutdown_follows_not_stopped(deregistered: bool) -> None:
    """Issue 41, the broker's own view: broker 2 shut down cleanly, then failed (or bounced) and registered
    again within one step of a controller that took over. What that step sends, as the request sink writes it,
    leaves the restarted simulated broker following both partitions — not stopped, as the failure's
    StopReplica after the startup's LeaderAndIsr left it — and it is taken back into the ISR once caught up."""
    from core_support import startup

    c = Cluster.start([2, 3, 4, 5])
    c.run(CreateTopic("r1", "t", replica_assignment=((2, 3, 4), (2, 4, 5))))
    c.failover(7)
    old = c.ctx.live_brokers[2].epoch
    c.run(ControlledShutdown(2, old))
    back = startup(2, epoch=900)
    c.run(*([BrokerFailure(2, old)] if deregistered else []), back)
    restarted = SimBroker(2, broker_epoch=back.broker_epoch)
    for msg in request_messages("livectl.requests", Fence(2, 1), 9, c.requests()):
        restarted.handle(parse_request(msg.key, msg.value), 0)
    views = {tp.partition: (p.role.value, p.leader) for tp, p in restarted.partitions.items()}
    assert views == {0: ("follower", 3), 1: ("follower", 4)}
    for p in (0, 1):
        c.catch_up(TopicPartition("t", p))
        assert 2 in c.leader_and_isr(TopicPartition("t", p)).isr
