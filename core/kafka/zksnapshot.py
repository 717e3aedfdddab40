"""The :class:`core.snapshot.ZkSnapshot` a new controller reads (Kafka's ``initializeControllerContext``), built
from ZooKeeper's znodes in Kafka's layout (:mod:`core.kafka.zkdata`) given as a map path -> (data, version);
the driver (:mod:`streaming.zk_snapshot`) and the tests' fake ZooKeeper use it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from core.kafka.zkdata import (
    BROKER_TOPICS,
    CONFIG_TOPICS,
    DELETE_TOPICS,
    OFFLINE_REPLICAS,
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    decode_partition_state,
    decode_preferred_election,
    decode_reassignment,
    decode_topic_config,
    decode_topic_znode,
)
from core.model import Broker, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot


def snapshot_from_znodes(
    znodes: Mapping[str, tuple[str | None, int]],
    brokers: Iterable[Broker],
    controller_epoch: int,
    controller_epoch_zk_version: int,
    memo: MutableMapping[str, tuple[str, int, Any]] | None = None,
) -> ZkSnapshot:
    """What a controller elected with ``controller_epoch`` reads from ZooKeeper, given every znode's
    ``(data, version)`` by path.

    ``memo`` (path -> the data, version and value decoded from them by an earlier call) spares decoding a
    topic or partition-state znode read again unchanged: decoding is a function of the path, the data and
    the version alone, so the result is the same with or without it. On return it holds this call's
    entries only (a znode gone since is forgotten)."""
    used: dict[str, tuple[str, int, Any]] = {}
    known = memo if memo is not None else {}

    topics: list[TopicZnode] = []
    states: list[tuple[TopicPartition, PartitionStateZnode]] = []
    to_delete: list[str] = []
    configs: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    pending: tuple[PartitionTarget, ...] = ()
    preferred: tuple[TopicPartition, ...] = ()
    offline_topics: list[str] = []
    prefix = BROKER_TOPICS + "/"
    for path, (data, version) in sorted(znodes.items()):
        hit = known.get(path)
        if hit is not None and hit[1] == version and hit[0] == data:
            # read again unchanged (a standby's reads: nearly every znode): the memo holds only topic znodes'
            # values and partition states' (topic-partition, state) pairs, each under its own path
            used[path] = hit
            value = hit[2]
            if type(value) is tuple:
                states.append(value)
            else:
                topics.append(value)
            continue
        if path.startswith(prefix):
            rest = path[len(prefix) :].split("/")
            if len(rest) == 1 and data:
                topic = decode_topic_znode(rest[0], data, version)
                used[path] = (data, version, topic)
                topics.append(topic)
            elif len(rest) == 4 and rest[1] == "partitions" and rest[3] == "state" and data:
                state = (TopicPartition(rest[0], int(rest[2])), decode_partition_state(data, version))
                used[path] = (data, version, state)
                states.append(state)
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
    if memo is not None:
        memo.clear()
        memo.update(used)
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
