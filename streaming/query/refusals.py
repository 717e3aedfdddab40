"""What a write ZooKeeper refused means for the rest of the micro-batch, znode kind by znode kind.

Kafka's controller sends LeaderAndIsr / UpdateMetadata only for ZooKeeper writes that succeeded, and
takes ZooKeeper's content again for the rest. The buckets decided a whole micro-batch at once, so the
dispatcher holds back what was built on a refused write, and asks the buckets to redo what can be redone:

* ``/brokers/topics/<t>/partitions/<p>/state`` (create, compare-and-set), any refusal: the LeaderAndIsr
  and UpdateMetadata of ``t-p`` are withheld; on ``BadVersion`` or ``NodeExists`` the znode is re-read
  and its bucket redoes the partition from ZooKeeper's content (:mod:`streaming.query.refresh`).
* ``/brokers/topics/<t>`` (create) refused ``NodeExists``: someone else created the topic. Every request
  of ``t`` is withheld, the sink writes nothing beneath it, and the command is answered as Kafka's
  CreateTopics answers it, ``TOPIC_ALREADY_EXISTS``.
* ``/brokers/topics/<t>`` (set: a reassignment, added partitions) refused ``NoNode``: the topic was
  deleted underneath; every request of ``t`` is withheld (Kafka's write throws before its requests go).
* ``/config/topics/<t>`` (upsert): Kafka's set-or-create, never refused for existing or missing; on a
  race the sink re-reads and redoes it.
* ``/admin/delete_topics/<t>`` (create) refused ``NodeExists``: already marked (a tool did): done.
* any delete refused ``NoNode``: already gone: done.
* ``/brokers/topics/<t>`` (delete tree) refused ``NotEmpty``: re-read and redone by the sink; if it still
  fails, logged (no request depends on it).

Writes the sink did not attempt (beneath a refused creation) count as refused for their znode kind.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from core import decisions as dc
from core.controller import topic_id_for
from core.events import CreateTopic
from core.kafka import zkdata
from core.kafka.error_codes import KafkaError
from core.kafka.requests import (
    AnyBody,
    LeaderAndIsrRequest,
    RequestApi,
    SplicedBody,
    StopReplicaRequest,
    UpdateMetadataRequest,
    WireBody,
)
from sinks.ports import NOT_ATTEMPTED, FailedWrite, ZkCode

log = logging.getLogger("livectl.refusals")

#: requests that carry partition states (Kafka's ``topicStates[].partitionStates[].partitionIndex``)
PARTITION_APIS = (RequestApi.LEADER_AND_ISR, RequestApi.UPDATE_METADATA, RequestApi.STOP_REPLICA)


@dataclass
class Refusals:
    """The consequences of one micro-batch's refused writes (see the module docstring)."""

    #: (topic, partition) whose requests are withheld
    partitions: set[tuple[str, int]] = field(default_factory=set)
    #: topics all of whose requests are withheld
    topics: set[str] = field(default_factory=set)
    #: topic -> the topic id the refused creation carried (someone else's topic exists)
    existing_topics: dict[str, str | None] = field(default_factory=dict)
    #: refusals whose intended effect holds anyway (already marked, already gone)
    done: list[FailedWrite] = field(default_factory=list)
    #: refusals nothing depends on that could not be redone
    unresolved: list[FailedWrite] = field(default_factory=list)

    def withholds(self, api: RequestApi, topic: str, partition: int) -> bool:
        """Whether the state of ``topic``-``partition`` in a request of ``api`` is held back: every request
        of a topic-level refusal; LeaderAndIsr / UpdateMetadata of a refused partition state (a
        StopReplica is sent before its partition's state write, in Kafka as here)."""
        if topic in self.topics:
            return True
        return api is not RequestApi.STOP_REPLICA and (topic, partition) in self.partitions


def classify(failed: Sequence[FailedWrite]) -> Refusals:
    """Sort each refused write by znode kind and error (the module docstring's table)."""
    out = Refusals()
    for f in failed:
        w = f.write
        state = zkdata.partition_of_state_path(w.path)
        topic = zkdata.topic_of_path(w.path)
        if state is not None:
            out.partitions.add(state)
        elif topic is not None and w.op is dc.ZkOp.CREATE and f.error == ZkCode.NODE_EXISTS:
            out.topics.add(topic)
            out.existing_topics[topic] = zkdata.topic_znode_id(w.data)
        elif topic is not None and w.op is dc.ZkOp.SET:
            out.topics.add(topic)
        elif (w.op in (dc.ZkOp.DELETE, dc.ZkOp.DELETE_TREE) and f.error == ZkCode.NO_NODE) or (
            zkdata.topic_of_path(w.path, zkdata.DELETE_TOPICS) is not None
            and w.op is dc.ZkOp.CREATE
            and f.error == ZkCode.NODE_EXISTS
        ):
            out.done.append(f)
        elif f.error == NOT_ATTEMPTED and w.path.startswith(zkdata.BROKER_TOPICS + "/"):
            out.topics.add(w.path.split("/")[3])
        else:
            out.unresolved.append(f)
    return out


def withhold(requests: Sequence[dc.BrokerRequest], refusals: Refusals) -> list[dc.BrokerRequest]:
    """``requests`` without the partition states built on refused writes. A request left without
    partitions is dropped, unless it had none to begin with (an UpdateMetadata that only announces the
    live brokers). Bodies are filtered in the form they come in (the driver's parsed wire objects, or
    typed values), never serialised or parsed again."""
    if not refusals.partitions and not refusals.topics:
        return list(requests)
    kept: list[dc.BrokerRequest] = []
    for r in requests:
        if r.api not in PARTITION_APIS:
            kept.append(r)
            continue
        before, left, body = _filtered(r, refusals)
        if before and not left:
            log.info(
                "withheld %s to broker%s %s: every partition in it was refused by ZooKeeper",
                r.api.value,
                "s" if r.shared else "",
                ",".join(map(str, r.recipients())),
            )
            continue
        kept.append(r if left == before else replace(r, body=body))
    return kept


def _filtered(r: dc.BrokerRequest, refusals: Refusals) -> tuple[int, int, AnyBody]:
    """(partitions before, partitions left, the body with only those left), in the body's own form: the
    driver's parsed wire object or a typed value."""
    if isinstance(r.body, WireBody):
        if isinstance(r.body.obj, SplicedBody):
            # entries as text (core.kafka.requests.SplicedBody): parsed only when a refusal names their topic
            touched = refusals.topics | {t for t, _ in refusals.partitions}
            if touched.isdisjoint(r.body.obj.names):
                n = r.body.obj.partition_count
                return n, n, r.body
        states = r.body.obj.get("topicStates") or []
        before = left = 0
        entries: list[Any] = []
        for ts in states:
            parts = ts["partitionStates"]
            kept = [p for p in parts if not refusals.withholds(r.api, ts["topicName"], int(p["partitionIndex"]))]
            before += len(parts)
            left += len(kept)
            if kept:
                entries.append(ts if len(kept) == len(parts) else {**ts, "partitionStates": kept})
        return before, left, WireBody({**r.body.obj, "topicStates": entries})
    typed = r.body
    assert isinstance(typed, LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest)
    partitions = tuple(p for p in typed.partitions if not refusals.withholds(r.api, p.topic, p.partition))
    return len(typed.partitions), len(partitions), replace(typed, partitions=partitions)  # type: ignore[arg-type]


def answer_existing_topics(results: Sequence[dc.AdminResult], refusals: Refusals) -> list[dc.AdminResult]:
    """A ``create_topic`` whose topic znode someone else had created is answered as Kafka's CreateTopics
    answers it: ``TOPIC_ALREADY_EXISTS`` (matched by the topic id the command's creation carried)."""
    if not refusals.existing_topics:
        return list(results)
    out = []
    for r in results:
        if r.command == CreateTopic.TYPE and r.status is dc.AdminStatus.OK:
            topic = next(
                (t for t, tid in refusals.existing_topics.items() if tid == topic_id_for(t, r.request_id)), None
            )
            if topic is not None:
                message = f"Topic '{topic}' already exists."
                out.append(
                    dc.AdminResult(
                        r.request_id, r.command, dc.AdminStatus.ERROR, KafkaError.TOPIC_ALREADY_EXISTS.name, message
                    )
                )
                continue
        out.append(r)
    return out
