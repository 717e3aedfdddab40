"""Playing the controller for the simulated brokers' tests: :class:`MiniController` keeps each partition's
leader, epochs and ISR the way ZooKeeper would, sends LeaderAndIsr to the replicas and commits
AlterPartition; ``cluster`` builds brokers on a local fabric, ``run`` advances them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.events import (
    AlterPartition,
    Event,
)
from core.kafka.envelope import Envelope, encode_request, parse_request
from core.kafka.error_codes import KafkaError
from core.kafka.requests import RequestApi
from core.model import TopicPartition
from simbrokers.broker import BrokerConfig, SimBroker
from simbrokers.fabric import LocalFabric

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
