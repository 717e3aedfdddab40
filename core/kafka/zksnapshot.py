"""The :class:`core.snapshot.ZkSnapshot` a new controller reads (Kafka's ``initializeControllerContext``), built
from ZooKeeper's znodes in Kafka's layout (:mod:`core.kafka.zkdata`) given as a map path -> (data, version);
the driver (:mod:`streaming.zk.snapshot_reader`) and the tests' fake ZooKeeper use it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

from core.cordon import CORDONED_BROKERS, decode_cordoned
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

PartitionStateEntry = tuple[TopicPartition, PartitionStateZnode]


@dataclass(frozen=True)
class TopicBlock:
    """One topic's part of a snapshot as decoded: its topic znode (``None`` when it has none with data) and its
    partition-state znodes in path order."""

    topic: TopicZnode | None
    states: tuple[PartitionStateEntry, ...]


def snapshot_from_znodes(
    znodes: Mapping[str, tuple[str | None, int]],
    brokers: Iterable[Broker],
    controller_epoch: int,
    controller_epoch_zk_version: int,
    memo: MutableMapping[str, tuple[str, int, Any]] | None = None,
    *,
    blocks: MutableMapping[str, TopicBlock] | None = None,
) -> ZkSnapshot:
    """What a controller elected with ``controller_epoch`` reads from ZooKeeper, given every znode's
    ``(data, version)`` by path.

    ``memo`` (path -> the data, version and value decoded from them by an earlier call) spares decoding a
    topic or partition-state znode read again unchanged: decoding is a function of the path, the data and
    the version alone, so the result is the same with or without it. On return it holds an entry for each
    topic and partition-state znode of the snapshot and no other (a znode gone since is forgotten).

    ``blocks`` (topic -> :class:`TopicBlock`) gives topics decoded by an earlier call whose znodes did not
    change since and are *not* in ``znodes`` (none of their paths): the snapshot is the one all the znodes
    would give. On return it holds every topic's block of this snapshot, for the next call (a caller that
    knows which topics are unchanged passes their blocks and reads only the others: a standby's reads).
    With ``blocks``, ``memo`` must be the one the earlier calls were given."""
    known = memo if memo is not None else {}
    decoded = 0

    topics: list[TopicZnode] = []
    states: list[PartitionStateEntry] = []
    to_delete: list[str] = []
    configs: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    pending: tuple[PartitionTarget, ...] = ()
    preferred: tuple[TopicPartition, ...] = ()
    offline_topics: list[str] = []
    cordoned: tuple[int, ...] = ()
    prefix = BROKER_TOPICS + "/"
    for path, (data, version) in sorted(znodes.items()):
        hit = known.get(path)
        if hit is not None and hit[1] == version and hit[0] == data:
            # read again unchanged (a standby's reads: nearly every znode): the memo holds only topic znodes'
            # values and partition states' (topic-partition, state) pairs, each under its own path
            decoded += 1
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
                known[path] = (data, version, topic)
                decoded += 1
                topics.append(topic)
            elif len(rest) == 4 and rest[1] == "partitions" and rest[3] == "state" and data:
                state = (TopicPartition(rest[0], int(rest[2])), decode_partition_state(data, version))
                known[path] = (data, version, state)
                decoded += 1
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
        elif path == CORDONED_BROKERS:
            cordoned = decode_cordoned(data)
    if blocks is None:
        topics_out, states_out = tuple(topics), tuple(states)
    else:
        decoded += sum((b.topic is not None) + len(b.states) for b in blocks.values())
        topics_out, states_out = _with_blocks(topics, states, blocks)
    if memo is not None and len(memo) > decoded:
        # a znode gone since the memo's last call (a changed one's entry was replaced): keep the snapshot's values
        live = {id(v) for v in chain(topics_out, states_out)}
        for path in [p for p, entry in memo.items() if id(entry[2]) not in live]:
            del memo[path]
    return ZkSnapshot(
        controller_epoch,
        controller_epoch_zk_version,
        tuple(brokers),
        topics_out,
        states_out,
        pending,
        tuple(to_delete),
        preferred,
        tuple(configs),
        tuple(offline_topics),
        cordoned,
    )


def _with_blocks(
    topics: list[TopicZnode], states: list[PartitionStateEntry], blocks: MutableMapping[str, TopicBlock]
) -> tuple[tuple[TopicZnode, ...], tuple[PartitionStateEntry, ...]]:
    """The snapshot's topics and states from those decoded now (in path order) and the ``blocks`` given; the
    blocks then hold every topic's. In path order a topic's state znodes are consecutive
    (``/brokers/topics/<t>/partitions/…``) and topics' runs of them are ordered by ``<t>/``."""
    by_topic: dict[str, list[PartitionStateEntry]] = {}
    run: list[PartitionStateEntry] = []
    current: str | None = None
    for entry in states:
        topic = entry[0].topic
        if topic != current:
            run = by_topic.setdefault(topic, [])
            current = topic
        run.append(entry)
    named = {t.topic: t for t in topics}
    for topic in named.keys() | by_topic.keys():
        blocks[topic] = TopicBlock(named.get(topic), tuple(by_topic.get(topic, ())))
    ordered = sorted(blocks.items())
    topics_out = tuple(b.topic for _, b in ordered if b.topic is not None)
    ordered.sort(key=lambda kv: kv[0] + "/")
    return topics_out, tuple(chain.from_iterable(b.states for _, b in ordered))
