"""Decoders of the events the driver's admin-path watcher publishes when a ZooKeeper-era tool writes
one of the paths Kafka's controller watches; each carries the controller epoch it was read under, except
``zk_isr_change``, whose znode versions order it (:class:`core.zk_path_events.ZkIsrChange`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from core import jsonform as jf
from core import limits as lim
from core.cluster_config import controller_fields
from core.codec.admin import decode_reassign
from core.codec.snapshot import read_states
from core.codec.values import read_configs, read_topic, read_tp_list
from core.errors import FormatError
from core.events import Event, ReassignPartitions
from core.kafka.replicas import read_replica_list
from core.zk_path_events import (
    BrokersCordoned,
    ClusterConfigChanged,
    ZkIsrChange,
    ZkLogDirEvents,
    ZkPreferredElection,
    ZkReassignment,
    ZkTopicChange,
    ZkTopicDeletion,
)


def _controller_epoch(o: Mapping[str, Any]) -> int:
    return jf.integer(o, "controller_epoch", minimum=0, maximum=lim.INT32_MAX)


def _zk_reassignment(o: Mapping[str, Any]) -> Event:
    parsed = decode_reassign({**o, "request_id": "zk"})
    assert isinstance(parsed, ReassignPartitions)
    return ZkReassignment(_controller_epoch(o), parsed.partitions)


def _zk_preferred(o: Mapping[str, Any]) -> Event:
    return ZkPreferredElection(_controller_epoch(o), read_tp_list(o, "partitions", required=True))


def _zk_topic_change(o: Mapping[str, Any]) -> Event:
    topic = read_topic(o)
    raw = jf.req(o, "partitions")
    if not isinstance(raw, list) or len(raw) > lim.MAX_LIST_ITEMS:
        raise FormatError("partitions", f"must be a list of at most {lim.MAX_LIST_ITEMS} [partition, replicas]")
    parts: list[tuple[int, tuple[int, ...]]] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, list) or len(entry) != 2:
            raise FormatError(f"partitions[{i}]", "must be [partition, replicas]")
        p = jf._int_value(entry[0], f"partitions[{i}][0]", 0, lim.INT32_MAX)
        reps = read_replica_list(entry[1], f"partitions[{i}][1]", what=f"partition {topic}-{p}")
        parts.append((p, reps))
    return ZkTopicChange(
        _controller_epoch(o),
        topic,
        tuple(parts),
        jf.opt_string(o, "topic_id", max_length=lim.MAX_NAME_LENGTH),
        read_configs(o),
        None if o.get("zk_version") is None else jf.integer(o, "zk_version", minimum=0, maximum=lim.INT32_MAX),
    )


def _zk_log_dir_events(o: Mapping[str, Any]) -> Event:
    raw = jf.req(o, "notifications")
    if not isinstance(raw, list) or len(raw) > lim.MAX_LIST_ITEMS:
        raise FormatError("notifications", f"must be a list of at most {lim.MAX_LIST_ITEMS} [znode, broker]")
    out: list[tuple[str, int]] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, list) or len(entry) != 2:
            raise FormatError(f"notifications[{i}]", "must be [sequence znode name, broker id]")
        name = jf.text(entry[0], f"notifications[{i}][0]", max_length=lim.MAX_NAME_LENGTH)
        if not re.fullmatch(r"log_dir_event_\d{10}", name):
            raise FormatError(f"notifications[{i}][0]", f"must be log_dir_event_<10 digits>, got {lim.show(name)}")
        out.append((name, jf._int_value(entry[1], f"notifications[{i}][1]", 0, lim.MAX_BROKER_ID)))
    return ZkLogDirEvents(_controller_epoch(o), tuple(out))


def _zk_isr_change(o: Mapping[str, Any]) -> Event:
    topic = read_topic(o)
    raw = o.get("states")
    if isinstance(raw, list) and len(raw) > lim.MAX_LIST_ITEMS:
        raise FormatError("states", f"must list at most {lim.MAX_LIST_ITEMS} partitions, got {len(raw)}")
    states = read_states(o, topic)
    partitions = [p for p, _ in states]
    if len(set(partitions)) != len(partitions):
        raise FormatError("states", f"names a partition of {lim.show(topic)} twice")
    return ZkIsrChange(topic, states)


def _cluster_config(o: Mapping[str, Any]) -> Event:
    configs = read_configs(o)
    controller_fields(configs)  # each value as Kafka parses it; FormatError names the config
    return ClusterConfigChanged(_controller_epoch(o), configs)


def _cordoned(o: Mapping[str, Any]) -> Event:
    brokers = jf.int_seq(
        o.get("brokers") or [], "brokers", minimum=0, maximum=lim.MAX_BROKER_ID, max_items=lim.MAX_LIST_ITEMS
    )
    return BrokersCordoned(_controller_epoch(o), tuple(sorted(set(brokers))))


DECODERS: Mapping[str, Callable[[Mapping[str, Any]], Event]] = MappingProxyType(
    {
        BrokersCordoned.TYPE: _cordoned,
        ZkReassignment.TYPE: _zk_reassignment,
        ZkPreferredElection.TYPE: _zk_preferred,
        ZkTopicDeletion.TYPE: lambda o: ZkTopicDeletion(_controller_epoch(o), read_topic(o)),
        ZkTopicChange.TYPE: _zk_topic_change,
        ZkLogDirEvents.TYPE: _zk_log_dir_events,
        ZkIsrChange.TYPE: _zk_isr_change,
        ClusterConfigChanged.TYPE: _cluster_config,
    }
)
