"""Decoders of the admin commands (topic ``livectl.admin``), strict, in Kafka's terms: a refused
command's :class:`core.errors.FormatError` carries Kafka's error name where Kafka has one."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from core import jsonform as jf
from core import limits as lim
from core.codec.values import read_configs, read_partition_id, read_topic, read_tp_list, topic_field
from core.errors import FormatError
from core.events import (
    AlterTopicConfig,
    CancelReassignment,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    ElectLeaders,
    Event,
    ReassignPartitions,
)
from core.kafka.error_codes import KafkaError
from core.kafka.replicas import read_replica_list
from core.model import ElectionType, PartitionTarget, TopicPartition


def _assignment(o: Mapping[str, Any], field_: str) -> tuple[tuple[int, ...], ...]:
    v = o.get(field_)
    if v is None:
        return ()
    m = jf.obj(v, field_)
    bad = KafkaError.INVALID_REPLICA_ASSIGNMENT.name
    parts: dict[int, tuple[int, ...]] = {}
    for k, reps in m.items():
        name = f"{field_}.{k if len(k) <= 40 and k.isascii() and k.isprintable() else lim.show(k, 20)}"
        if not (k.isascii() and k.isdigit() and len(k) <= 10 and int(k) <= lim.INT32_MAX):
            raise FormatError(name, "partition ids must be integers from 0 to 2147483647", bad)
        p = int(k)
        parts[p] = read_replica_list(reps, name, what=f"partition {p}")
    if sorted(parts) != list(range(len(parts))):
        raise FormatError(
            field_, f"partitions must be numbered 0..{len(parts) - 1}, got {lim.show(sorted(parts))}", bad
        )
    rfs = {len(r) for r in parts.values()}
    if len(rfs) > 1:
        raise FormatError(field_, "all partitions must have the same replication factor", bad)
    return tuple(parts[i] for i in range(len(parts)))


def _request_id(o: Mapping[str, Any]) -> str:
    return jf.string(o, "request_id", max_length=lim.MAX_REQUEST_ID_LENGTH)


def _fits_one_znode(partitions: int, rf: int, field_: str, error: str) -> None:
    """Refuse a topic that could never be recorded: its ``/brokers/topics/<t>`` znode, even on the
    smallest broker ids, would be over what ZooKeeper accepts (the core checks the exact size once the
    replicas are placed)."""
    need = lim.min_topic_znode_bytes(partitions, rf)
    if need > lim.MAX_ZNODE_BYTES:
        raise FormatError(
            field_,
            f"{partitions} partitions of {rf} replicas need at least {need} bytes in the topic's znode, over the "
            f"{lim.MAX_ZNODE_BYTES} bytes one znode may hold (ZooKeeper's jute.maxbuffer is {lim.JUTE_MAXBUFFER})",
            error,
        )


def _partitions_count(o: Mapping[str, Any], field_: str, default: int | None = None) -> int:
    if default is not None:
        return jf.opt_integer(o, field_, default, minimum=1, maximum=lim.MAX_PARTITIONS)
    return jf.integer(o, field_, minimum=1, maximum=lim.MAX_PARTITIONS, error=KafkaError.INVALID_PARTITIONS.name)


def _replication_factor(o: Mapping[str, Any], default: int | None = None) -> int:
    field_ = "replication_factor"
    if default is not None and o.get(field_) is None:
        return default
    return jf.integer(
        o, field_, minimum=1, maximum=lim.MAX_REPLICATION_FACTOR, error=KafkaError.INVALID_REPLICATION_FACTOR.name
    )


def _create_topic(o: Mapping[str, Any]) -> Event:
    request_id = _request_id(o)
    topic = read_topic(o)
    assignment = _assignment(o, "replica_assignment")
    if assignment:
        parts = _partitions_count(o, "partitions", len(assignment))
        rf = _replication_factor(o, len(assignment[0]))
        if parts != len(assignment):
            raise FormatError(
                "partitions",
                f"is {parts} but replica_assignment lists {len(assignment)}",
                KafkaError.INVALID_PARTITIONS.name,
            )
        if rf != len(assignment[0]):
            raise FormatError(
                "replication_factor",
                f"is {rf} but replica_assignment has {len(assignment[0])}",
                KafkaError.INVALID_REPLICATION_FACTOR.name,
            )
    else:
        parts = _partitions_count(o, "partitions")
        rf = _replication_factor(o)
    _fits_one_znode(parts, rf, "partitions", KafkaError.INVALID_PARTITIONS.name)
    return CreateTopic(request_id, topic, parts, rf, assignment, read_configs(o))


def _create_partitions(o: Mapping[str, Any]) -> Event:
    request_id = _request_id(o)
    topic = read_topic(o)
    total = _partitions_count(o, "total_count")
    assignment = _assignment(o, "replica_assignment")
    _fits_one_znode(total, len(assignment[0]) if assignment else 1, "total_count", KafkaError.INVALID_PARTITIONS.name)
    return CreatePartitions(request_id, topic, total, assignment)


def decode_reassign(o: Mapping[str, Any]) -> Event:
    targets = []
    seen: set[TopicPartition] = set()
    for i, e in enumerate(jf.obj_list(o, "partitions", max_items=lim.MAX_LIST_ITEMS)):
        pre = f"partitions[{i}]."
        tp = TopicPartition(topic_field(e, "topic", pre), read_partition_id(e, pre))
        if tp in seen:
            raise FormatError(pre + "partition", f"{tp} is listed twice")
        seen.add(tp)
        reps = read_replica_list(
            jf.req(e, "replicas", pre), pre + "replicas", what=f"partition {tp}", hint="use cancel to cancel"
        )
        targets.append(PartitionTarget(tp.topic, tp.partition, reps))
    if not targets:
        raise FormatError("partitions", "must list at least one partition")
    return ReassignPartitions(_request_id(o), tuple(targets))


def _cancel(o: Mapping[str, Any]) -> Event:
    tps = read_tp_list(o, "partitions", required=True)
    if not tps:
        raise FormatError("partitions", "must list at least one partition")
    return CancelReassignment(_request_id(o), tps)


def _elect(o: Mapping[str, Any]) -> Event:
    et = jf.string(o, "election_type", max_length=lim.MAX_NAME_LENGTH).upper()
    try:
        etype = ElectionType(et)
    except ValueError:
        raise FormatError("election_type", f"must be PREFERRED or UNCLEAN, got {lim.show(et)}") from None
    return ElectLeaders(_request_id(o), etype, read_tp_list(o, "partitions", required=False))


def _alter_config(o: Mapping[str, Any]) -> Event:
    configs = read_configs(o)
    deletes: list[str] = []
    raw = o.get("delete_configs")
    if raw is not None:
        if not isinstance(raw, list):
            raise FormatError("delete_configs", f"must be a list of config names, got {lim.show(raw)}")
        for i, name in enumerate(raw):
            deletes.append(jf.text(name, f"delete_configs[{i}]", max_length=lim.MAX_NAME_LENGTH))
    if not configs and not deletes:
        raise FormatError("configs", "must set or delete at least one config")
    both = sorted(set(dict(configs)) & set(deletes))
    if both:
        raise FormatError("delete_configs", f"{both[0]} is both set and deleted")
    return AlterTopicConfig(_request_id(o), read_topic(o), configs, tuple(sorted(set(deletes))))


def _dry_run(decode: Callable[[Mapping[str, Any]], Event]) -> Callable[[Mapping[str, Any]], Event]:
    """``decode``, then the command's optional ``"dry_run": true`` (absent: false)."""

    def read(o: Mapping[str, Any]) -> Event:
        event = decode(o)
        return dataclasses.replace(event, dry_run=True) if jf.boolean(o, "dry_run", False) else event  # type: ignore[type-var]

    return read


DECODERS: Mapping[str, Callable[[Mapping[str, Any]], Event]] = MappingProxyType(
    {
        CreateTopic.TYPE: _dry_run(_create_topic),
        DeleteTopic.TYPE: _dry_run(lambda o: DeleteTopic(_request_id(o), read_topic(o))),
        CreatePartitions.TYPE: _dry_run(_create_partitions),
        ReassignPartitions.TYPE: _dry_run(decode_reassign),
        CancelReassignment.TYPE: _dry_run(_cancel),
        ElectLeaders.TYPE: _dry_run(_elect),
        AlterTopicConfig.TYPE: _dry_run(_alter_config),
    }
)
