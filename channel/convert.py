"""livectl's requests (:mod:`core.kafka.requests`) as Kafka's own RPCs, and Kafka's answers as livectl's events.

:func:`to_kafka` builds the kio entity of a LeaderAndIsr (v2-7), UpdateMetadata (v5-8) or StopReplica
(v3-4) request at a chosen version; :func:`to_events` turns the broker's response into the events the
simulated brokers publish for it (``simbrokers.broker``): a LeaderAndIsr answer is a
:class:`core.events.LeaderAndIsrResponse` with every partition's error; a StopReplica answer is a
:class:`core.events.StopReplicaResponse` naming only the partitions being deleted (none: no event); an
UpdateMetadata answer is no event.

The older versions (LeaderAndIsr v0-1, UpdateMetadata v0-4, StopReplica v0-2: brokers on an
``inter.broker.protocol.version`` below 2.2 / 2.2 / 2.6) are laid out differently and are not built here:
:class:`UnsupportedVersionError` says so.
"""

from __future__ import annotations

import base64
import importlib
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from itertools import groupby
from types import MappingProxyType
from typing import Any, TypeVar

from core.events import Event, LeaderAndIsrResponse, PartitionError, StopReplicaResponse
from core.kafka.requests import (
    ZERO_UUID,
    LeaderAndIsrRequest,
    MetadataBroker,
    MetadataEndpoint,
    RequestBody,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

__all__ = [
    "API_KEYS",
    "OUR_VERSIONS",
    "KafkaCall",
    "UnsupportedVersionError",
    "advertise_controller",
    "ibp_cap",
    "kafka_uuid",
    "to_events",
    "to_kafka",
    "unadvertised",
    "uuid_text",
]

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6

#: Kafka's api key of each request body type
API_KEYS: Mapping[type, int] = MappingProxyType(
    {LeaderAndIsrRequest: LEADER_AND_ISR, StopReplicaRequest: STOP_REPLICA, UpdateMetadataRequest: UPDATE_METADATA}
)
#: the versions this module builds, by api key
OUR_VERSIONS: Mapping[int, range] = MappingProxyType(
    {LEADER_AND_ISR: range(2, 8), UPDATE_METADATA: range(5, 9), STOP_REPLICA: range(3, 5)}
)

#: per api key, (inter.broker.protocol.version, version Kafka 3.9's ZooKeeper controller sends from it on),
#: newest first (``ControllerChannelManager``'s choice of request versions, read from Kafka 3.9's source)
_IBP_VERSIONS: Mapping[int, tuple[tuple[tuple[int, int, int], int], ...]] = MappingProxyType(
    {
        LEADER_AND_ISR: (
            ((3, 4, 0), 7),
            ((3, 2, 0), 6),
            ((2, 8, 1), 5),
            ((2, 4, 1), 4),
            ((2, 4, 0), 3),
            ((2, 2, 0), 2),
        ),
        UPDATE_METADATA: (((3, 4, 0), 8), ((2, 8, 1), 7), ((2, 4, 1), 6), ((2, 2, 0), 5)),
        STOP_REPLICA: (((3, 4, 0), 4), ((2, 6, 0), 3)),
    }
)


class UnsupportedVersionError(ValueError):
    """No version of the API both sides speak is one this module builds."""


def _ibp_key(ibp: str) -> tuple[int, int, int]:
    head, _, iv = ibp.partition("-IV")
    major, minor = (int(x) for x in head.split(".")[:2])
    return major, minor, int(iv) if iv else 99


def ibp_cap(api_key: int, inter_broker_protocol: str) -> int:
    """The newest version of ``api_key`` Kafka 3.9's controller sends a broker whose
    ``inter.broker.protocol.version`` is ``inter_broker_protocol`` (e.g. ``3.9``, ``2.8-IV1``); -1 when it is
    older than every version built here."""
    key = _ibp_key(inter_broker_protocol)
    for since, version in _IBP_VERSIONS[api_key]:
        if key >= since:
            return version
    return -1


@dataclass(frozen=True)
class KafkaCall:
    """One Kafka RPC ready to send: the request entity and the type its answer is read as."""

    request: Any
    response_type: type


def kafka_uuid(topic_id: str) -> uuid.UUID | None:
    """A topic id as livectl writes it (Kafka's base64 text, as in the topic znode) as kio's UUID; ``None`` for
    none or the zero id."""
    if not topic_id or topic_id == ZERO_UUID:
        return None
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


def uuid_text(value: uuid.UUID | None) -> str:
    """The reverse of :func:`kafka_uuid`: the zero id's text for ``None``."""
    if value is None or value.int == 0:
        return ZERO_UUID
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _module(api: str, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def _make(cls: Any, **values: Any) -> Any:
    """``cls`` built from the ``values`` it has fields for (Kafka's versions add and drop fields)."""
    names = set(cls.__dataclass_fields__)
    return cls(**{k: v for k, v in values.items() if k in names})


T = TypeVar("T")


def _by_topic(items: Iterable[T], topic: Callable[[T], str]) -> list[tuple[str, list[T]]]:
    # the wire form groups consecutive entries of one topic, as livectl's own encoding does
    return [(name, list(group)) for name, group in groupby(items, key=topic)]


def advertise_controller(body: UpdateMetadataRequest, endpoints: tuple[MetadataEndpoint, ...]) -> UpdateMetadataRequest:
    """``body`` listing its controller (``controllerId``) among the live brokers with ``endpoints`` only: a
    ZooKeeper-mode broker sends its own requests to the live broker its last UpdateMetadata names as
    controller, and clients see that broker on each listener it has an endpoint of. An endpoint under a
    listener name the live brokers use with another security protocol than the endpoint's (:func:`unadvertised`:
    the channel speaks PLAINTEXT or SSL, each endpoint one of them) is left out. Unchanged without endpoints
    left, without a controller id, or when a broker of that id is live (the brokers then talk to that broker,
    not to the channel)."""
    dropped = set(unadvertised(body, endpoints))
    mine = tuple(e for e in endpoints if e.listener not in dropped)
    if not mine or body.controller_id < 0 or any(b.broker_id == body.controller_id for b in body.live_brokers):
        return body
    return replace(body, live_brokers=(*body.live_brokers, MetadataBroker(body.controller_id, mine)))


def unadvertised(body: UpdateMetadataRequest, endpoints: tuple[MetadataEndpoint, ...]) -> dict[str, int]:
    """The listener names of ``endpoints`` that :func:`advertise_controller` leaves out of ``body``: those a live
    broker registered with another security protocol (name -> the brokers' protocol id). A client there speaks
    that protocol first (TLS, SASL), which the endpoint does not: it would fail to connect, so it had better
    not see the controller at all."""
    theirs = {e.listener: e.security_protocol for b in body.live_brokers for e in b.endpoints}
    return {
        e.listener: theirs[e.listener]
        for e in endpoints
        if e.listener in theirs and theirs[e.listener] != e.security_protocol
    }


def to_kafka(body: RequestBody, version: int, *, broker_epoch: int) -> KafkaCall:
    """``body`` as Kafka's request at ``version`` (one of :data:`OUR_VERSIONS`), carrying ``broker_epoch``."""
    key = API_KEYS.get(type(body))
    if key is None:
        raise UnsupportedVersionError(f"{type(body).__name__} is not a request the controller channel sends")
    if version not in OUR_VERSIONS[key]:
        raise UnsupportedVersionError(
            f"{type(body).__name__} v{version} is not built here (versions {OUR_VERSIONS[key].start}-"
            f"{OUR_VERSIONS[key].stop - 1} are)"
        )
    if isinstance(body, LeaderAndIsrRequest):
        return _leader_and_isr(body, version, broker_epoch)
    if isinstance(body, UpdateMetadataRequest):
        return _update_metadata(body, version, broker_epoch)
    assert isinstance(body, StopReplicaRequest)
    return _stop_replica(body, version, broker_epoch)


def _leader_and_isr(body: LeaderAndIsrRequest, version: int, broker_epoch: int) -> KafkaCall:
    m = _module("leader_and_isr", version, "request")
    topics = [
        _make(
            m.LeaderAndIsrTopicState,
            topic_name=name,
            topic_id=kafka_uuid(states[0].topic_id),
            partition_states=tuple(
                _make(
                    m.LeaderAndIsrPartitionState,
                    partition_index=s.partition,
                    controller_epoch=s.controller_epoch,
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                    isr=tuple(s.isr),
                    partition_epoch=s.partition_epoch,
                    replicas=tuple(s.replicas),
                    adding_replicas=tuple(s.adding_replicas),
                    removing_replicas=tuple(s.removing_replicas),
                    is_new=s.is_new,
                    leader_recovery_state=s.leader_recovery_state,
                )
                for s in states
            ),
        )
        for name, states in _by_topic(body.partitions, lambda s: s.topic)
    ]
    leaders = tuple(
        m.LeaderAndIsrLiveLeader(broker_id=a.broker_id, host_name=a.host, port=a.port) for a in body.live_leaders
    )
    request = _make(
        m.LeaderAndIsrRequest,
        controller_id=body.controller_id,
        is_k_raft_controller=False,
        controller_epoch=body.controller_epoch,
        broker_epoch=broker_epoch,
        type_=body.type,
        topic_states=tuple(topics),
        live_leaders=leaders,
    )
    return KafkaCall(request, _module("leader_and_isr", version, "response").LeaderAndIsrResponse)


def _update_metadata(body: UpdateMetadataRequest, version: int, broker_epoch: int) -> KafkaCall:
    m = _module("update_metadata", version, "request")
    topics = [
        _make(
            m.UpdateMetadataTopicState,
            topic_name=name,
            topic_id=kafka_uuid(states[0].topic_id),
            partition_states=tuple(
                m.UpdateMetadataPartitionState(
                    partition_index=s.partition,
                    controller_epoch=s.controller_epoch,
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                    isr=tuple(s.isr),
                    zk_version=s.zk_version,
                    replicas=tuple(s.replicas),
                    offline_replicas=tuple(s.offline_replicas),
                )
                for s in states
            ),
        )
        for name, states in _by_topic(body.partitions, lambda s: s.topic)
    ]
    brokers = tuple(
        m.UpdateMetadataBroker(
            id_=b.broker_id,
            endpoints=tuple(
                m.UpdateMetadataEndpoint(
                    port=e.port, host=e.host, listener=e.listener, security_protocol=e.security_protocol
                )
                for e in b.endpoints
            ),
            rack=b.rack,
        )
        for b in body.live_brokers
    )
    request = _make(
        m.UpdateMetadataRequest,
        controller_id=body.controller_id,
        is_k_raft_controller=False,
        type_=0,
        controller_epoch=body.controller_epoch,
        broker_epoch=broker_epoch,
        topic_states=tuple(topics),
        live_brokers=brokers,
    )
    return KafkaCall(request, _module("update_metadata", version, "response").UpdateMetadataResponse)


def _stop_replica(body: StopReplicaRequest, version: int, broker_epoch: int) -> KafkaCall:
    m = _module("stop_replica", version, "request")
    topics = tuple(
        m.StopReplicaTopicState(
            topic_name=name,
            partition_states=tuple(
                m.StopReplicaPartitionState(
                    partition_index=p.partition, leader_epoch=p.leader_epoch, delete_partition=p.delete_partition
                )
                for p in parts
            ),
        )
        for name, parts in _by_topic(body.partitions, lambda p: p.topic)
    )
    request = _make(
        m.StopReplicaRequest,
        controller_id=body.controller_id,
        is_k_raft_controller=False,
        controller_epoch=body.controller_epoch,
        broker_epoch=broker_epoch,
        topic_states=topics,
    )
    return KafkaCall(request, _module("stop_replica", version, "response").StopReplicaResponse)


def to_events(broker_id: int, body: RequestBody, response: Any) -> list[Event]:
    """The events the answer ``response`` to ``body`` makes, as the simulated brokers publish them."""
    top = int(response.error_code.value)
    if isinstance(body, LeaderAndIsrRequest):
        return [LeaderAndIsrResponse(broker_id, _lisr_errors(body, response, top), top)]
    if isinstance(body, StopReplicaRequest):
        deleting = [p for p in body.partitions if p.delete_partition]
        if not deleting:
            return []
        answered = {
            (str(e.topic_name), int(e.partition_index)): int(e.error_code.value) for e in response.partition_errors
        }
        # a top-level error answers no partition: every one carries it, as a broker refusing the request does
        errors = tuple(
            PartitionError(p.topic, p.partition, answered.get((p.topic, p.partition), top)) for p in deleting
        )
        return [StopReplicaResponse(broker_id, errors, top)]
    return []


def _lisr_errors(body: LeaderAndIsrRequest, response: Any, top: int) -> tuple[PartitionError, ...]:
    answered: dict[tuple[str, int], int] = {}
    if hasattr(response, "topics"):
        names = {s.topic_id: s.topic for s in body.partitions}
        for t in response.topics:
            name = names.get(uuid_text(t.topic_id))
            if name is None:
                continue
            for e in t.partition_errors:
                answered[(name, int(e.partition_index))] = int(e.error_code.value)
    else:
        for e in response.partition_errors:
            answered[(str(e.topic_name), int(e.partition_index))] = int(e.error_code.value)
    return tuple(
        PartitionError(s.topic, s.partition, answered.get((s.topic, s.partition), top)) for s in body.partitions
    )
