"""Kafka's ISR-change notifications (``/isr_change_notification``, written by leaders below IBP 2.7), read as the
admin-path watcher (:mod:`streaming.zk.admin_watch`) publishes them: the partition states they list, by topic."""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from core.errors import FormatError
from core.kafka import zk_notifications, zkdata
from core.model import TopicPartition
from core.snapshot import PartitionStateZnode
from streaming.zk.snapshot_reader import read_znodes

log = logging.getLogger(__name__)


def read_isr_changes(
    zk: KazooClient, children: list[str]
) -> tuple[list[str], dict[str, dict[int, PartitionStateZnode]]]:
    """The notifications of ``children`` still there (to delete once their events are published) and the
    partition states they list, by topic and partition. A notification that is not Kafka's JSON lists
    nothing (Kafka reads it so, and deletes it); a listed partition that is gone is left out."""
    handles = [(c, zk.get_async(f"{zkdata.ISR_CHANGE_NOTIFICATION}/{c}")) for c in children]
    handled: list[str] = []
    listed: dict[TopicPartition, None] = {}
    for name, handle in handles:
        try:
            data, _ = handle.get()
        except NoNodeError:
            continue
        handled.append(name)
        try:
            listed.update(dict.fromkeys(zk_notifications.decode_isr_change_notification(data)))
        except FormatError as e:
            log.error("deleting %s/%s: not Kafka's ISR change JSON: %s", zkdata.ISR_CHANGE_NOTIFICATION, name, e)
    paths = {tp: zkdata.partition_state_path(tp.topic, tp.partition) for tp in listed}
    got = read_znodes(zk, list(paths.values())) if paths else {}
    by_topic: dict[str, dict[int, PartitionStateZnode]] = {}
    for tp, path in paths.items():
        if path not in got:
            continue
        data, stat = got[path]
        try:
            state = zkdata.decode_partition_state(data.decode(), stat.version)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.error("ignoring %s: not Kafka's partition state JSON: %s", path, e)
            continue
        by_topic.setdefault(tp.topic, {})[tp.partition] = state
    return handled, by_topic
