"""Re-reading what ZooKeeper refused to update, for the buckets that hold it.

When ZooKeeper refuses a compare-and-set on ``/brokers/topics/<t>/partitions/<p>/state`` with
``BadVersion``, the znode changed under the version the controller holds (for example, written by a
micro-batch applied between a takeover's snapshot and its failover reference); when it refuses the
creation of a new partition's state with ``NodeExists``, someone else initialised the partition (Kafka
then leaves the partition to be elected from the state it reads). Kafka's controller then
reads the partition state again and retries. Here the driver reads the refused znodes (pipelined) and
publishes one :class:`core.events.PartitionStatesRead` per topic to the broker-events topic, keyed by
topic; the topic's bucket takes the state as read and does again what the partition still needs.
When it refuses the creation of ``/brokers/topics/<t>`` with ``NodeExists``, someone else created the
topic: the driver reads the topic whole (znode, partition states, config) and publishes one
:class:`core.events.TopicCreationRefused`; the bucket drops its own creation and takes that topic.
Other refusals (``NoNode`` of a deleted partition, writes to other paths) are handled by the
dispatcher (:mod:`streaming.query.refusals`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from core.codec.events import event_to_json
from core.events import Event, PartitionStatesRead, TopicCreationRefused
from core.kafka import zkdata
from core.snapshot import PartitionStateZnode
from sinks.ports import FailedWrite, ZkCode
from streaming.query.refusals import classify
from streaming.zk.snapshot_reader import read_znodes

log = logging.getLogger("livectl.refresh")


def refused_states(failed: Sequence[FailedWrite]) -> dict[str, list[int]]:
    """Topic -> partitions whose state znode ZooKeeper refused because it holds something else: a
    compare-and-set answered ``BadVersion`` or a creation answered ``NodeExists`` (sorted, distinct)."""
    out: dict[str, set[int]] = {}
    for f in failed:
        tp = zkdata.partition_of_state_path(f.write.path)
        if tp is not None and f.error in (ZkCode.BAD_VERSION, ZkCode.NODE_EXISTS):
            out.setdefault(tp[0], set()).add(tp[1])
    return {t: sorted(ps) for t, ps in sorted(out.items())}


def read_states(zk: Any, refused: dict[str, list[int]]) -> list[PartitionStatesRead]:
    """The refused znodes as they are now, one event per topic; znodes that are gone are left out."""
    wanted = [(t, p, zkdata.partition_state_path(t, p)) for t, ps in refused.items() for p in ps]
    got = read_znodes(zk, [path for _, _, path in wanted])
    by_topic: dict[str, list[tuple[int, PartitionStateZnode]]] = {}
    for topic, p, path in wanted:
        if path in got:
            data, stat = got[path]
            by_topic.setdefault(topic, []).append((p, zkdata.decode_partition_state(data.decode(), stat.version)))
    return [PartitionStatesRead(topic, tuple(states)) for topic, states in by_topic.items()]


def read_topics(zk: Any, refused: dict[str, str]) -> list[TopicCreationRefused]:
    """Topic -> the id of this controller's refused creation: each topic as ZooKeeper holds it now (its
    znode, the state znodes of its partitions, its config), one event per topic."""
    out = []
    for topic in sorted(refused):
        path = zkdata.topic_path(topic)
        got = read_znodes(zk, [path, zkdata.topic_config_path(topic)])
        if path not in got:
            out.append(TopicCreationRefused(topic, refused[topic], None))
            continue
        data, stat = got[path]
        znode = zkdata.decode_topic_znode(topic, data.decode(), stat.version)
        state_paths = {p: zkdata.partition_state_path(topic, p) for p, _ in znode.partitions}
        states_got = read_znodes(zk, list(state_paths.values()))
        states = tuple(
            (p, zkdata.decode_partition_state(states_got[sp][0].decode(), states_got[sp][1].version))
            for p, sp in sorted(state_paths.items())
            if sp in states_got
        )
        cfg_raw = got.get(zkdata.topic_config_path(topic))
        configs = tuple(sorted(zkdata.decode_topic_config(cfg_raw[0].decode()).items())) if cfg_raw else ()
        out.append(TopicCreationRefused(topic, refused[topic], znode, states, configs))
    return out


class StatesRefresher:
    """The dispatcher's ``on_refused`` hook: read what was refused, publish it to ``topic``."""

    def __init__(self, zk: Any, producer: Any, topic: str) -> None:
        self.zk = zk
        self.producer = producer
        self.topic = topic

    def __call__(self, failed: Sequence[FailedWrite]) -> list[Event]:
        refused = refused_states(failed)
        existing = {t: tid for t, tid in classify(failed).existing_topics.items() if tid is not None}
        if not refused and not existing:
            return []
        # a topic someone else created is read whole; its partition states are part of that
        states = read_states(self.zk, {t: ps for t, ps in refused.items() if t not in existing})
        topics = read_topics(self.zk, existing)
        events: list[Event] = [*states, *topics]
        for e in events:
            (topic,) = e.topics()
            self.producer.send(self.topic, key=topic.encode(), value=event_to_json(e).encode())
        self.producer.flush()
        log.info(
            "re-read %d refused partition state(s) and %d topic(s) created by someone else, sent to their buckets",
            sum(len(e.states) for e in states),
            len(topics),
        )
        return events
