"""The brokers' own requests to their controller, as livectl's events, and livectl's answers as Kafka's responses.

A ZooKeeper-mode Kafka broker sends its controller ControlledShutdown (on SIGTERM), AlterPartition (ISR
changes, IBP 2.7+) and AllocateProducerIds (IBP 3.0+). This module, pure apart from ``kio``:

* :func:`alter_partition_events`: an AlterPartition request (v0-3) as one :class:`core.events.AlterPartition`
  per partition, as the simulated brokers publish them, all carrying one ``correlation_id`` that the
  controller echoes in each partition's answer; partitions whose topic id the channel cannot name are
  answered ``UNKNOWN_TOPIC_ID`` here (Kafka's controller answers them so, without a change);
* :func:`alter_partition_response`: the answers to one request, in Kafka's response of the request's version
  (topic names up to v1, topic ids from v2);
* :func:`controlled_shutdown_response`, :func:`allocate_producer_ids_response`, :func:`api_versions_response`.
"""

from __future__ import annotations

import datetime
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from types import MappingProxyType
from typing import Any

from channel.admin_apis import ADMIN_SERVED, admin_request_type
from channel.convert import _uuid, _uuid_text
from core.events import AlterPartition
from core.kafka.requests import ZERO_UUID, AlterPartitionResult
from core.model import TopicPartition

__all__ = [
    "ALLOCATE_PRODUCER_IDS",
    "ALTER_PARTITION",
    "API_VERSIONS",
    "BROKER_ID_NOT_REGISTERED",
    "CONTROLLED_SHUTDOWN",
    "SERVED",
    "AlterPartitionAsked",
    "allocate_producer_ids_response",
    "alter_partition_events",
    "alter_partition_response",
    "api_versions_response",
    "controlled_shutdown_response",
    "request_type",
]

CONTROLLED_SHUTDOWN, API_VERSIONS, ALTER_PARTITION, ALLOCATE_PRODUCER_IDS = 7, 18, 56, 67
#: Kafka's error codes used here
UNSUPPORTED_VERSION, UNKNOWN_TOPIC_ID, BROKER_ID_NOT_REGISTERED = 35, 100, 102

#: the versions the controller's endpoint reads and answers, by api key (what its ApiVersions advertises): the
#: brokers' own requests and the Admin client's that go to the controller (:mod:`channel.admin_apis`)
SERVED: Mapping[int, range] = MappingProxyType(
    {
        API_VERSIONS: range(0, 5),
        CONTROLLED_SHUTDOWN: range(0, 4),
        ALTER_PARTITION: range(0, 4),
        ALLOCATE_PRODUCER_IDS: range(0, 1),
        **ADMIN_SERVED,
    }
)
_NAMES: Mapping[int, str] = MappingProxyType(
    {
        API_VERSIONS: "api_versions",
        CONTROLLED_SHUTDOWN: "controlled_shutdown",
        ALTER_PARTITION: "alter_partition",
        ALLOCATE_PRODUCER_IDS: "allocate_producer_ids",
    }
)
_CLASSES: Mapping[int, str] = MappingProxyType(
    {
        API_VERSIONS: "ApiVersions",
        CONTROLLED_SHUTDOWN: "ControlledShutdown",
        ALTER_PARTITION: "AlterPartition",
        ALLOCATE_PRODUCER_IDS: "AllocateProducerIds",
    }
)
_NO_THROTTLE = datetime.timedelta(0)


def _module(api_key: int, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{_NAMES[api_key]}.v{version}.{kind}")


def request_type(api_key: int, version: int) -> Any:
    """The kio request class of ``api_key`` at ``version`` (one of :data:`SERVED`)."""
    if api_key in ADMIN_SERVED:
        return admin_request_type(api_key, version)
    return getattr(_module(api_key, version, "request"), _CLASSES[api_key] + "Request")


def _error(code: int) -> Any:
    from kio.schema.errors import ErrorCode

    return ErrorCode(code)


def api_versions_response(version: int) -> Any:
    """Kafka's answer to ApiVersions at ``version``: the ranges of :data:`SERVED`; a version newer than ours is
    answered at v0 with ``UNSUPPORTED_VERSION`` and the ranges, so that the client asks again (Kafka's rule)."""
    error = 0
    if version not in SERVED[API_VERSIONS]:
        version, error = 0, UNSUPPORTED_VERSION
    m = _module(API_VERSIONS, version, "response")
    keys = tuple(m.ApiVersion(api_key=k, min_version=r.start, max_version=r.stop - 1) for k, r in SERVED.items())
    fields: dict[str, Any] = {"error_code": _error(error), "api_keys": keys, "throttle_time": _NO_THROTTLE}
    if version >= 3:
        fields |= {
            "supported_features": (),
            "finalized_features_epoch": -1,
            "finalized_features": (),
            "zk_migration_ready": False,
        }
    return _make(m.ApiVersionsResponse, **fields)


def _make(cls: Any, **values: Any) -> Any:
    names = set(cls.__dataclass_fields__)
    return cls(**{k: v for k, v in values.items() if k in names})


def controlled_shutdown_response(version: int, error_code: int, remaining: Sequence[TopicPartition]) -> Any:
    """Kafka's ControlledShutdownResponse at ``version``: the error and the partitions the broker still leads."""
    m = _module(CONTROLLED_SHUTDOWN, version, "response")
    parts = tuple(m.RemainingPartition(topic_name=tp.topic, partition_index=tp.partition) for tp in remaining)
    return m.ControlledShutdownResponse(error_code=_error(error_code), remaining_partitions=parts)


def allocate_producer_ids_response(error_code: int, start: int = -1, length: int = 0) -> Any:
    """Kafka's AllocateProducerIdsResponse (v0): a block of ``length`` producer ids from ``start``, or an error."""
    m = _module(ALLOCATE_PRODUCER_IDS, 0, "response")
    return m.AllocateProducerIdsResponse(
        throttle_time=_NO_THROTTLE, error_code=_error(error_code), producer_id_start=start, producer_id_len=length
    )


@dataclass(frozen=True)
class AlterPartitionAsked:
    """One AlterPartition request as the channel holds it until it is answered: the partitions in the
    request's order, with the topic id each named (v2+), and the answers the channel gave itself."""

    version: int
    partitions: tuple[tuple[TopicPartition, str], ...]
    own_answers: Mapping[TopicPartition, AlterPartitionResult]


def alter_partition_events(
    broker_id: int, version: int, request: Any, topic_names: Callable[[str], str | None], correlation_id: int
) -> tuple[list[AlterPartition], AlterPartitionAsked]:
    """The events of one AlterPartition request (``request``, a kio entity of ``version``) and what to keep of it
    to build the answer. ``topic_names``: topic id (base64) -> name, or None when no topic has that id."""
    events: list[AlterPartition] = []
    partitions: list[tuple[TopicPartition, str]] = []
    own: dict[TopicPartition, AlterPartitionResult] = {}
    for topic in request.topics:
        if version >= 2:
            topic_id = _uuid_text(topic.topic_id)
            name = topic_names(topic_id)
        else:
            topic_id, name = ZERO_UUID, str(topic.topic_name)
        for p in topic.partitions:
            index = int(p.partition_index)
            if name is None:
                # no topic has that id: the whole topic is answered here, as Kafka's controller answers it
                tp = TopicPartition(topic_id, index)
                own[tp] = AlterPartitionResult(
                    tp.topic, index, UNKNOWN_TOPIC_ID, -1, -1, (), -1, 0, correlation_id, topic_id
                )
                partitions.append((tp, topic_id))
                continue
            if version >= 3:
                isr = tuple(int(b.broker_id) for b in p.new_isr_with_epochs)
            else:
                isr = tuple(int(b) for b in p.new_isr)
            partitions.append((TopicPartition(name, index), topic_id))
            events.append(
                AlterPartition(
                    broker_id,
                    int(request.broker_epoch),
                    name,
                    index,
                    int(p.leader_epoch),
                    int(p.partition_epoch),
                    isr,
                    int(p.leader_recovery_state) if version >= 1 else 0,
                    correlation_id,
                    topic_id if version >= 2 else None,
                )
            )
    return events, AlterPartitionAsked(version, tuple(partitions), MappingProxyType(own))


def alter_partition_response(
    asked: AlterPartitionAsked, error_code: int, answers: Mapping[TopicPartition, AlterPartitionResult]
) -> Any:
    """Kafka's AlterPartitionResponse to ``asked``: a top-level ``error_code`` alone, or every partition's
    answer (``answers`` and the channel's own), grouped by topic in the request's order."""
    version = asked.version
    m = _module(ALTER_PARTITION, version, "response")
    if error_code:
        return m.AlterPartitionResponse(throttle_time=_NO_THROTTLE, error_code=_error(error_code), topics=())
    merged = {**answers, **asked.own_answers}
    topics = []
    for (_, topic_id), group in groupby(asked.partitions, key=lambda e: (e[0].topic, e[1])):
        entries = []
        name = ""
        for tp, _tid in group:
            r = merged[tp]
            name = tp.topic
            entries.append(
                _make(
                    m.PartitionData,
                    partition_index=tp.partition,
                    error_code=_error(r.error_code),
                    leader_id=r.leader_id,
                    leader_epoch=r.leader_epoch,
                    isr=tuple(r.isr),
                    leader_recovery_state=r.leader_recovery_state,
                    partition_epoch=r.partition_epoch,
                )
            )
        topics.append(_make(m.TopicData, topic_name=name, topic_id=_uuid(topic_id), partitions=tuple(entries)))
    return m.AlterPartitionResponse(throttle_time=_NO_THROTTLE, error_code=_error(0), topics=tuple(topics))
