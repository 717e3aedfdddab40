"""Kafka's ZooKeeper layout (``kafka.zk.ZkData``): paths and JSON codecs, plus a snapshot builder.

* ``/brokers/topics/<t>`` — ``{"version":3,"topic_id":…,"partitions":{"0":[1,2]},"adding_replicas":{…},
  "removing_replicas":{…}}`` (version 2 without ``topic_id``); adding / removing list only partitions
  being reassigned.
* ``/brokers/topics/<t>/partitions/<p>/state`` — ``{"version":1,"leader":…,"leader_epoch":…,
  "controller_epoch":…,"isr":[…]}`` plus ``"leader_recovery_state":1`` only while RECOVERING.
* ``/admin/reassign_partitions`` — ``{"version":1,"partitions":[{"topic","partition","replicas"}]}``.
* ``/admin/delete_topics/<t>`` — no data.
* ``/admin/preferred_replica_election`` — ``{"version":1,"partitions":[{"topic","partition"}]}``.
* ``/config/topics/<t>`` — ``{"version":1,"config":{…}}``.

:func:`snapshot_from_znodes` builds the :class:`core.snapshot.ZkSnapshot` a new controller reads, from a
map path -> (data, version); the driver (and the tests' fake ZooKeeper) use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from core.model import RECOVERED, Broker, LeaderAndIsr, PartitionTarget, ReplicaAssignment, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot

BROKER_TOPICS = "/brokers/topics"
#: livectl's own record of replicas on failed log dirs (:mod:`core.offline_replicas` owns its format)
OFFLINE_REPLICAS = "/livectl/offline_replicas"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
#: Kafka's ``LogDirEventNotificationZNode``; children ``log_dir_event_<10 digits>`` (sequential)
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
#: ``LogDirEventNotificationHandler.LogDirFailureEvent``
LOG_DIR_FAILURE_EVENT = 1


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def _ints(xs: Iterable[int]) -> str:
    return "[" + ",".join(map(str, xs)) + "]"


def encode_partition_state(lai: LeaderAndIsr, controller_epoch: int) -> str:
    extra = "" if lai.leader_recovery_state == RECOVERED else f',"leader_recovery_state":{lai.leader_recovery_state}'
    return (
        f'{{"version":1,"leader":{lai.leader},"leader_epoch":{lai.leader_epoch},'
        f'"controller_epoch":{controller_epoch},"isr":{_ints(lai.isr)}{extra}}}'
    )


def decode_partition_state(data: str, zk_version: int) -> PartitionStateZnode:
    o = json.loads(data)
    return PartitionStateZnode(
        int(o["leader"]),
        int(o["leader_epoch"]),
        tuple(int(x) for x in o["isr"]),
        int(o["controller_epoch"]),
        zk_version,
        int(o.get("leader_recovery_state", RECOVERED)),
    )


def encode_topic_znode(assignment: Mapping[int, ReplicaAssignment], topic_id: str | None) -> str:
    parts = sorted(assignment.items())
    body: dict[str, Any] = {"version": 3 if topic_id else 2}
    if topic_id:
        body["topic_id"] = topic_id
    body["partitions"] = {str(p): list(ra.replicas) for p, ra in parts}
    body["adding_replicas"] = {str(p): list(ra.adding_replicas) for p, ra in parts if ra.adding_replicas}
    body["removing_replicas"] = {str(p): list(ra.removing_replicas) for p, ra in parts if ra.removing_replicas}
    return json.dumps(body, separators=(",", ":"))


def decode_topic_znode(topic: str, data: str, zk_version: int = 0) -> TopicZnode:
    o = json.loads(data)

    def pairs(m: Mapping[str, Any] | None) -> tuple[tuple[int, tuple[int, ...]], ...]:
        return tuple(sorted((int(k), tuple(int(x) for x in v)) for k, v in (m or {}).items()))

    return TopicZnode(
        topic,
        pairs(o.get("partitions")),
        pairs(o.get("adding_replicas")),
        pairs(o.get("removing_replicas")),
        o.get("topic_id"),
        zk_version,
    )


def encode_reassignment(targets: Iterable[PartitionTarget]) -> str:
    parts = [
        {"topic": t.topic, "partition": t.partition, "replicas": list(t.replicas)}
        for t in sorted(targets, key=lambda t: (t.topic, t.partition))
    ]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def decode_reassignment(data: str) -> tuple[PartitionTarget, ...]:
    o = json.loads(data)
    return tuple(
        PartitionTarget(str(e["topic"]), int(e["partition"]), tuple(int(x) for x in e["replicas"]))
        for e in o.get("partitions", ())
    )


def encode_preferred_election(tps: Iterable[TopicPartition]) -> str:
    parts = [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(tps)]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def decode_preferred_election(data: str) -> tuple[TopicPartition, ...]:
    o = json.loads(data)
    return tuple(TopicPartition(str(e["topic"]), int(e["partition"])) for e in o.get("partitions", ()))


def encode_topic_config(configs: Mapping[str, str]) -> str:
    return json.dumps({"version": 1, "config": dict(sorted(configs.items()))}, separators=(",", ":"))


def decode_topic_config(data: str) -> dict[str, str]:
    o = json.loads(data)
    return {str(k): str(v) for k, v in (o.get("config") or {}).items()}


def snapshot_from_znodes(
    znodes: Mapping[str, tuple[str | None, int]],
    brokers: Iterable[Broker],
    controller_epoch: int,
    controller_epoch_zk_version: int,
) -> ZkSnapshot:
    """What a controller elected with ``controller_epoch`` reads from ZooKeeper, given every znode's
    ``(data, version)`` by path."""
    topics: list[TopicZnode] = []
    states: list[tuple[TopicPartition, PartitionStateZnode]] = []
    to_delete: list[str] = []
    configs: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    pending: tuple[PartitionTarget, ...] = ()
    preferred: tuple[TopicPartition, ...] = ()
    offline_topics: list[str] = []
    prefix = BROKER_TOPICS + "/"
    for path, (data, version) in sorted(znodes.items()):
        if path.startswith(prefix):
            rest = path[len(prefix) :].split("/")
            if len(rest) == 1 and data:
                topics.append(decode_topic_znode(rest[0], data, version))
            elif len(rest) == 4 and rest[1] == "partitions" and rest[3] == "state" and data:
                states.append((TopicPartition(rest[0], int(rest[2])), decode_partition_state(data, version)))
        elif path.startswith(DELETE_TOPICS + "/"):
            to_delete.append(path[len(DELETE_TOPICS) + 1 :])
        elif path.startswith(CONFIG_TOPICS + "/") and data:
            configs.append((path[len(CONFIG_TOPICS) + 1 :], tuple(sorted(decode_topic_config(data).items()))))
        elif path == REASSIGN_PARTITIONS and data:
            pending = decode_reassignment(data)
        elif path == PREFERRED_REPLICA_ELECTION and data:
            preferred = decode_preferred_election(data)
        elif path.startswith(OFFLINE_REPLICAS + "/"):
            offline_topics.append(path[len(OFFLINE_REPLICAS) + 1 :])
    return ZkSnapshot(
        controller_epoch,
        controller_epoch_zk_version,
        tuple(brokers),
        tuple(topics),
        tuple(states),
        pending,
        tuple(to_delete),
        preferred,
        tuple(configs),
        tuple(offline_topics),
    )
