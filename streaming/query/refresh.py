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
When it refuses a rewrite of ``/brokers/topics/<t>`` with ``BadVersion`` (the controller's repair of a
replica a broker placed on its id, :func:`core.controller.topics.zk_topic_change`, written at the version
read, and someone wrote the znode in between), the driver reads the znode again and publishes it as a new
:class:`core.zk_path_events.ZkTopicChange` at the version now read: the bucket redoes the repair from what
ZooKeeper holds and sends again what the refusal withheld. A retry refused again is read again, at most
:data:`MAX_TOPIC_REREADS` times in a row for one topic (a refusal of the rewrite the last reading led to
counts as in a row); past that an error is logged and the topic is left to its next topic change or to the
next takeover, which repairs it too.
Other refusals (``NoNode`` of a deleted partition, writes to other paths) are handled by the
dispatcher (:mod:`streaming.query.refusals`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from core.codec.events import event_to_json
from core.decisions import ZkOp
from core.events import Event, PartitionStatesRead, TopicCreationRefused
from core.kafka import zkdata
from core.snapshot import PartitionStateZnode
from core.zk_path_events import ZkTopicChange
from sinks.ports import FailedWrite, ZkCode
from streaming.query.refusals import classify
from streaming.zk.snapshot_reader import read_znodes

log = logging.getLogger("livectl.refresh")

#: how many times in a row one topic's refused znode rewrite is read again and handed back to its bucket
MAX_TOPIC_REREADS = 5


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


def refused_rewrites(failed: Sequence[FailedWrite]) -> dict[str, int]:
    """Topic -> the version expected by its ``/brokers/topics/<t>`` rewrite (a compare-and-set) that ZooKeeper
    refused with ``BadVersion`` (the highest, if several)."""
    out: dict[str, int] = {}
    for f in failed:
        topic = zkdata.topic_of_path(f.write.path)
        if topic is not None and f.write.op is ZkOp.SET and f.error == ZkCode.BAD_VERSION:
            out[topic] = max(out.get(topic, -1), f.write.expected_version)
    return dict(sorted(out.items()))


def read_topic_changes(zk: Any, topics: Sequence[str], controller_epoch: int) -> list[ZkTopicChange]:
    """Each topic's znode (and config) as ZooKeeper holds it now, as the admin watcher reads a changed topic
    (:class:`streaming.zk.admin_watch.AdminPathWatcher`): one event per topic, with the version read; a topic
    whose znode is gone or holds no data is left out."""
    paths = [p for t in topics for p in (zkdata.topic_path(t), zkdata.topic_config_path(t))]
    got = read_znodes(zk, paths)
    out = []
    for topic in topics:
        raw = got.get(zkdata.topic_path(topic))
        if raw is None or not raw[0]:
            continue
        znode = zkdata.decode_topic_znode(topic, raw[0].decode(), raw[1].version)
        cfg_raw = got.get(zkdata.topic_config_path(topic))
        configs = tuple(sorted(zkdata.decode_topic_config(cfg_raw[0].decode()).items())) if cfg_raw else ()
        out.append(ZkTopicChange(controller_epoch, topic, znode.partitions, znode.topic_id, configs, znode.zk_version))
    return out


class StatesRefresher:
    """The dispatcher's ``on_refused`` hook: read what was refused, publish it to ``topic``. Its topic changes
    carry ``controller_epoch``, the epoch of the lease its dispatcher writes under."""

    def __init__(self, zk: Any, producer: Any, topic: str, *, controller_epoch: int) -> None:
        self.zk = zk
        self.producer = producer
        self.topic = topic
        self.controller_epoch = controller_epoch
        #: topic -> (the version its last reading published, readings in a row)
        self._rereads: dict[str, tuple[int, int]] = {}

    def __call__(self, failed: Sequence[FailedWrite]) -> list[Event]:
        refused = refused_states(failed)
        existing = {t: tid for t, tid in classify(failed).existing_topics.items() if tid is not None}
        rewrites = self._to_read_again(refused_rewrites(failed))
        if not refused and not existing and not rewrites:
            return []
        # a topic someone else created is read whole; its partition states are part of that
        states = read_states(self.zk, {t: ps for t, ps in refused.items() if t not in existing})
        topics = read_topics(self.zk, existing)
        changes = read_topic_changes(self.zk, rewrites, self.controller_epoch)
        for change in changes:
            assert change.zk_version is not None
            self._rereads[change.topic] = (change.zk_version, self._rereads[change.topic][1])
            log.warning(
                "ZooKeeper refused the rewrite of topic %s's znode (written in between): read again at version "
                "%d (%d in a row), sent to its bucket to redo",
                change.topic,
                change.zk_version,
                self._rereads[change.topic][1],
            )
        events: list[Event] = [*states, *topics, *changes]
        if not events:
            return []
        for e in events:
            (topic,) = e.topics()
            self.producer.send(self.topic, key=topic.encode(), value=event_to_json(e).encode())
        self.producer.flush()
        if states or topics:
            log.info(
                "re-read %d refused partition state(s) and %d topic(s) created by someone else, sent to their buckets",
                sum(len(e.states) for e in states),
                len(topics),
            )
        return events

    def _to_read_again(self, rewrites: dict[str, int]) -> list[str]:
        """The topics of ``rewrites`` (topic -> the version the refused write expected) to read again: a
        refusal of the write the last reading led to (at the version it published) counts one more in a row,
        any other starts again at one; past :data:`MAX_TOPIC_REREADS` the topic is given up, with an error."""
        out = []
        for topic, expected in rewrites.items():
            last = self._rereads.get(topic)
            n = last[1] + 1 if last is not None and last[0] == expected else 1
            if n > MAX_TOPIC_REREADS:
                del self._rereads[topic]
                log.error(
                    "ZooKeeper refused the rewrite of topic %s's znode %d times in a row (written in between each "
                    "time): not read again; its partitions' requests stay withheld until its next topic change "
                    "or the next takeover",
                    topic,
                    MAX_TOPIC_REREADS + 1,
                )
                continue
            self._rereads[topic] = (expected, n)
            out.append(topic)
        return out
