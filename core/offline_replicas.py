"""Replicas the controller holds offline because their log dir failed, recorded in ZooKeeper for the CLI.

Kafka's ``kafka-topics --describe`` learns offline replicas from the brokers' Metadata, which the
controller feeds through UpdateMetadata ``offlineReplicas``. livectl's CLI has no broker Metadata to ask,
and ZooKeeper holds only half of the fact (which brokers are registered): a replica on a failed log dir
of a live broker is known to the controller alone (Kafka's ``replicasOnOfflineDirs``, learnt from
``KAFKA_STORAGE_ERROR`` in LeaderAndIsr responses). So the controller writes it down, per topic:

* ``/livectl/offline_replicas/<topic>`` — ``{"version":1,"partitions":{"0":[3]}}``: for each partition
  the brokers (sorted) whose replica of it is in the partition's replica set and on a failed log dir of a
  live broker. Partitions without such replicas are left out; a topic without any has no znode.

The znodes are written by the ordinary ZooKeeper sink with the rest of a step's decisions (fenced,
exactly-once): :func:`writes` compares the record before and after a step. A dead broker's offline dirs
are forgotten (its replicas are offline because the broker is, which ZooKeeper shows by itself); a
restarted broker re-registers with its dirs online; a reassignment that removes the replica drops it;
a deleted topic loses its znode. A new controller knows no offline dirs until brokers answer its
LeaderAndIsr requests, so on failover it deletes the records the snapshot lists (its own topics' only:
the streaming job's buckets each own their topics) and writes what it learns afresh.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.context import ControllerContext
from core.decisions import ZkOp, ZkWrite
from core.errors import FormatError
from core.kafka.zkdata import OFFLINE_REPLICAS

__all__ = ["OFFLINE_REPLICAS", "OfflineRecord", "decode", "encode", "offline_replicas_path", "record", "writes"]
OFFLINE_REPLICAS_VERSION = 1

#: topic -> partition -> brokers (sorted) whose replica is on a failed log dir
OfflineRecord = dict[str, dict[int, tuple[int, ...]]]


def offline_replicas_path(topic: str) -> str:
    return f"{OFFLINE_REPLICAS}/{topic}"


def record(ctx: ControllerContext) -> OfflineRecord:
    """The replicas ``ctx`` holds offline on failed log dirs of live brokers, limited to the replicas
    still in their partition's replica set (Kafka's UpdateMetadata ``offlineReplicas`` minus dead
    brokers)."""
    out: dict[str, dict[int, set[int]]] = {}
    for broker, tps in ctx.replicas_on_offline_dirs.items():
        if broker not in ctx.live_brokers:
            continue
        for tp in tps:
            if broker in ctx.replicas(tp):
                out.setdefault(tp.topic, {}).setdefault(tp.partition, set()).add(broker)
    return {t: {p: tuple(sorted(bs)) for p, bs in ps.items()} for t, ps in out.items()}


def encode(partitions: Mapping[int, tuple[int, ...]]) -> str:
    body = {
        "version": OFFLINE_REPLICAS_VERSION,
        "partitions": {str(p): list(partitions[p]) for p in sorted(partitions)},
    }
    return json.dumps(body, separators=(",", ":"))


def decode(data: str | bytes) -> dict[int, tuple[int, ...]]:
    """Parse a ``/livectl/offline_replicas/<topic>`` znode; :class:`FormatError` names the bad field."""
    try:
        raw: Any = json.loads(data)
    except ValueError as e:
        raise FormatError("$", f"not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise FormatError("$", "expected a JSON object")
    if raw.get("version") != OFFLINE_REPLICAS_VERSION:
        raise FormatError("version", f"expected {OFFLINE_REPLICAS_VERSION}, got {raw.get('version')!r}")
    parts = raw.get("partitions")
    if not isinstance(parts, dict):
        raise FormatError("partitions", "expected an object of partition -> broker ids")
    out: dict[int, tuple[int, ...]] = {}
    for key, brokers in parts.items():
        field = f"partitions.{key}"
        try:
            p = int(key)
        except ValueError:
            raise FormatError(field, "partition id is not an integer") from None
        if p < 0:
            raise FormatError(field, "partition id is negative")
        if not isinstance(brokers, list) or not all(type(b) is int and b >= 0 for b in brokers):
            raise FormatError(field, "expected a list of non-negative broker ids")
        out[p] = tuple(sorted(brokers))
    return out


def writes(
    before: Mapping[str, Mapping[int, tuple[int, ...]]],
    after: Mapping[str, Mapping[int, tuple[int, ...]]],
    reset: frozenset[str] | None = None,
) -> list[ZkWrite]:
    """The ZooKeeper writes that take the recorded znodes from ``before`` to ``after``.

    With ``reset`` (a failover: the topics ZooKeeper holds a record of, whatever the old controller
    wrote) ``before`` is not trusted: those records not in ``after`` are deleted and every one in
    ``after`` is written. Only per-topic znodes are touched, never the parent, so that the buckets of
    the streaming job (each owning its topics, each running the failover) cannot undo each other."""
    out: list[ZkWrite] = []
    if reset is not None:
        gone = sorted(reset - after.keys())
        changed = sorted(after)
    else:
        gone = sorted(before.keys() - after.keys())
        changed = sorted(t for t in after if before.get(t) != after[t])
    for topic in gone:
        out.append(ZkWrite(ZkOp.DELETE_TREE, offline_replicas_path(topic)))
    for topic in changed:
        out.append(ZkWrite(ZkOp.UPSERT, offline_replicas_path(topic), encode(after[topic]), make_parents=True))
    return out
