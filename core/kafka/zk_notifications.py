"""Kafka's sequential notification znodes' JSON, both ways (their paths are :mod:`core.kafka.zkdata`'s):

* ``/config/changes/config_change_<10 digits>`` — ``{"version":2,"entity_path":"<type>/<name>"}`` (Kafka's
  ``ConfigEntityChangeNotificationSequenceZNode``);
* ``/isr_change_notification/isr_change_<10 digits>`` — ``{"version":1,"partitions":[{"topic","partition"}]}``
  (Kafka's ``IsrChangeNotificationSequenceZNode``, written by leaders below IBP 2.7).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from core.errors import FormatError
from core.kafka.zkdata import CONFIG_CHANGE_PREFIX, json_object
from core.model import TopicPartition


def encode_config_change(entity_type: str, name: str) -> bytes:
    """Kafka's version-2 config change notification."""
    return json.dumps({"version": 2, "entity_path": f"{entity_type}/{name}"}, separators=(",", ":")).encode()


def decode_config_change(data: bytes | str) -> tuple[str, str] | None:
    """``(entity type, name)`` of a version-2 notification, or ``None`` for anything else."""
    try:
        o = json.loads(data)
    except ValueError:
        return None
    path = o.get("entity_path") if isinstance(o, dict) and o.get("version") == 2 else None
    if not isinstance(path, str) or "/" not in path:
        return None
    kind, _, name = path.partition("/")
    return kind, name


def config_change_sequence(child: str) -> int | None:
    """The sequence number of a ``/config/changes`` child, or ``None`` when it is not a notification."""
    if not child.startswith(CONFIG_CHANGE_PREFIX):
        return None
    digits = child[len(CONFIG_CHANGE_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def encode_isr_change_notification(tps: Iterable[TopicPartition]) -> bytes:
    """An ISR-change notification as a leader below IBP 2.7 writes it (Kafka's version 1)."""
    parts = [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(tps)]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":")).encode()


def decode_isr_change_notification(data: bytes | str) -> tuple[TopicPartition, ...]:
    """The partitions an ISR-change notification lists (distinct, in its order). Raises
    :class:`FormatError` naming the field for anything but Kafka's JSON."""
    o = json_object(data, "isr change notification")
    raw = o.get("partitions")
    if not isinstance(raw, list):
        raise FormatError("partitions", "must be a list of {topic, partition}")
    out: dict[TopicPartition, None] = {}
    for i, e in enumerate(raw):
        topic = e.get("topic") if isinstance(e, dict) else None
        partition = e.get("partition") if isinstance(e, dict) else None
        if not isinstance(topic, str) or not topic:
            raise FormatError(f"partitions[{i}].topic", "must be a topic name")
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise FormatError(f"partitions[{i}].partition", "must be a partition number")
        out[TopicPartition(topic, partition)] = None
    return tuple(out)
