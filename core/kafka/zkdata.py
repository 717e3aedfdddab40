"""Kafka's ZooKeeper layout (``kafka.zk.ZkData``): every znode livectl reads or writes, its path and its JSON
codec both ways. Nothing else in livectl spells a znode path or its JSON (but the sequential notifications'
JSON, :mod:`core.kafka.zk_notifications`).

* ``/controller`` — ``{"version":1,"brokerid":…,"timestamp":"<ms>"}`` (ephemeral; Kafka's ``ControllerZNode``);
* ``/controller_epoch`` — the epoch as decimal text (``ControllerEpochZNode``);
* ``/brokers/ids/<id>`` — the broker registration, version 5 (``BrokerIdZNode``): ``endpoints``
  ``["LISTENER://host:port"]`` with ``listener_security_protocol_map``; versions 1-3 give only ``host`` /
  ``port``. The broker epoch is the znode's ``czxid``, not in the JSON.
* ``/brokers/topics/<t>`` — ``{"version":3,"topic_id":…,"partitions":{"0":[1,2]},"adding_replicas":{…},
  "removing_replicas":{…}}`` (version 2 without ``topic_id``); adding / removing list only partitions
  being reassigned.
* ``/brokers/topics/<t>/partitions/<p>/state`` — ``{"version":1,"leader":…,"leader_epoch":…,
  "controller_epoch":…,"isr":[…]}`` plus ``"leader_recovery_state":1`` only while RECOVERING.
* ``/admin/reassign_partitions`` — ``{"version":1,"partitions":[{"topic","partition","replicas"}]}``.
* ``/admin/delete_topics/<t>`` — no data.
* ``/admin/preferred_replica_election`` — ``{"version":1,"partitions":[{"topic","partition"}]}``.
* ``/config/topics/<t>``, ``/config/brokers/<id>|<default>`` — ``{"version":1,"config":{…}}``.
* ``/config/changes/config_change_<10 digits>`` and ``/isr_change_notification/isr_change_<10 digits>`` —
  Kafka's sequential notifications: their paths here, their JSON in :mod:`core.kafka.zk_notifications`.
* ``/livectl/offline_replicas/<t>`` (:mod:`core.offline_replicas` owns its JSON) and ``/livectl/sink/<query>``
  (the ZooKeeper sink's progress, :mod:`sinks.zookeeper` owns its JSON) are livectl's own.

The :class:`core.snapshot.ZkSnapshot` a new controller reads is built from these by :mod:`core.kafka.zksnapshot`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from core.errors import FormatError
from core.model import RECOVERED, Broker, Endpoint, LeaderAndIsr, PartitionTarget, ReplicaAssignment, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode

#: Kafka's ``ControllerZNode.path`` (ephemeral)
CONTROLLER_PATH = "/controller"
#: Kafka's ``ControllerEpochZNode.path``
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
#: livectl's own record of replicas on failed log dirs (:mod:`core.offline_replicas` owns its format)
OFFLINE_REPLICAS = "/livectl/offline_replicas"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
#: Kafka's ``ConfigEntityChangeNotificationZNode``; children ``config_change_<10 digits>`` (sequential)
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
#: parent of the ZooKeeper sink's progress znodes, one per query name (livectl's own)
SINK_PROGRESS_ROOT = "/livectl/sink"
#: Kafka's ``ZkData.SensitiveRootPaths``: not world-readable even with ACLs on
SENSITIVE_ROOT_PATHS = ("/config/users", CONFIG_BROKERS, "/delegation_token")
#: Kafka's old consumer path (``ConsumerPathZNode``), left open for consumers to write under
CONSUMERS_PATH = "/consumers"
#: Kafka's ``LogDirEventNotificationZNode``; children ``log_dir_event_<10 digits>`` (sequential)
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
#: ``LogDirEventNotificationHandler.LogDirFailureEvent``
LOG_DIR_FAILURE_EVENT = 1
#: Kafka's ``IsrChangeNotificationZNode``; children ``isr_change_<10 digits>`` (sequential), written by leaders
#: on an inter-broker protocol below 2.7
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def entity_configs_path(entity_type: str) -> str:
    """``/config/<entity type>`` (Kafka's ``ConfigEntityTypeZNode``): ``topics``, ``brokers``, ..."""
    return f"/config/{entity_type}"


def entity_config_path(entity_type: str, name: str) -> str:
    """``/config/<entity type>/<name>`` (Kafka's ``ConfigEntityZNode``)."""
    return f"{entity_configs_path(entity_type)}/{name}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


_STATE_PATH = re.compile(rf"^{BROKER_TOPICS}/([^/]+)/partitions/(\d+)/state$")
_PARTITION_PATH = re.compile(rf"^{BROKER_TOPICS}/([^/]+)/partitions/(\d+)(?:/state)?$")
_TOPIC_PATHS = MappingProxyType(
    {root: re.compile(rf"^{root}/([^/]+)$") for root in (BROKER_TOPICS, DELETE_TOPICS, CONFIG_TOPICS)}
)


def partition_of_state_path(path: str) -> tuple[str, int] | None:
    """``(topic, partition)`` of a ``/brokers/topics/<t>/partitions/<p>/state`` path, else ``None``."""
    m = _STATE_PATH.match(path)
    return (m.group(1), int(m.group(2))) if m else None


def partition_of_path(path: str) -> tuple[str, int] | None:
    """``(topic, partition)`` of a partition's znode or its state znode, else ``None``."""
    m = _PARTITION_PATH.match(path)
    return (m.group(1), int(m.group(2))) if m else None


def topic_of_path(path: str, root: str = BROKER_TOPICS) -> str | None:
    """The topic of ``<root>/<t>`` (``root``: :data:`BROKER_TOPICS`, :data:`DELETE_TOPICS` or
    :data:`CONFIG_TOPICS`), else ``None``."""
    m = _TOPIC_PATHS[root].match(path)
    return m.group(1) if m else None


def json_object(data: bytes | str, field: str) -> dict[str, Any]:
    try:
        o = json.loads(data)
    except ValueError as e:
        raise FormatError(field, f"not valid JSON: {e}") from None
    if not isinstance(o, dict):
        raise FormatError(field, "must hold a JSON object")
    return o


# ---------------------------------------------------------------------------- the controller's znodes


@dataclass(frozen=True)
class ControllerZnode:
    """``/controller``: the active controller's id and when it was elected (ms since the epoch, as text)."""

    broker_id: int
    timestamp: str | None


def encode_controller(controller_id: int, timestamp_ms: int) -> bytes:
    """Kafka's ``ControllerZNode.encode``."""
    body = {"version": 1, "brokerid": controller_id, "timestamp": str(timestamp_ms)}
    return json.dumps(body, separators=(",", ":")).encode()


def decode_controller(data: bytes | str) -> ControllerZnode:
    """Kafka's ``ControllerZNode.decode``; :class:`FormatError` (field: the path) when it is not Kafka's JSON."""
    o = json_object(data, CONTROLLER_PATH)
    try:
        broker_id = int(o["brokerid"])
    except (KeyError, TypeError, ValueError):
        raise FormatError(CONTROLLER_PATH, f"brokerid must be a broker id, got {o.get('brokerid')!r}") from None
    timestamp = o.get("timestamp")
    return ControllerZnode(broker_id, None if timestamp is None else str(timestamp))


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | str) -> int:
    """``/controller_epoch``'s decimal text; :class:`FormatError` (field: the path) when it is not a number."""
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    try:
        return int(text.strip())
    except ValueError:
        raise FormatError(CONTROLLER_EPOCH_PATH, "does not hold an epoch number") from None


# ---------------------------------------------------------------------------- broker registrations


def endpoint_text(listener: str, host: str, port: int) -> str:
    """``LISTENER://host:port`` (an IPv6 host in brackets), as ``endpoints`` lists it."""
    return f"{listener}://{f'[{host}]' if ':' in host else host}:{port}"


def parse_endpoint(text: str, protocol_map: Mapping[str, str], path: str = "endpoints") -> Endpoint:
    """``PLAINTEXT://host:port`` (IPv6 hosts in brackets) with the listener's security protocol."""
    listener, sep, rest = text.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not colon or not port.isdigit():
        raise FormatError(path, f"endpoint {text!r} is not LISTENER://host:port")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return Endpoint(listener, host, int(port), protocol_map.get(listener, listener))


def encode_broker_registration(host: str, port: int, rack: str | None, timestamp_ms: int) -> str:
    """Kafka's ``BrokerIdZNode`` version 5 JSON with one PLAINTEXT listener."""
    body: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": [endpoint_text("PLAINTEXT", host, port)],
        "jmx_port": -1,
        "port": port,
        "host": host,
        "version": 5,
        "timestamp": str(timestamp_ms),
        "rack": rack,
    }
    return json.dumps(body, separators=(",", ":"))


def decode_broker_registration(broker_id: int, data: bytes | str, czxid: int, path: str = "") -> Broker:
    """Kafka's ``/brokers/ids/<id>`` JSON (``BrokerIdZNode``, versions 1-5) as a :class:`Broker` whose
    broker epoch is ``czxid``. Old registrations without ``endpoints`` use ``host`` / ``port``.
    :class:`FormatError` names ``path`` (by default the znode's) and says what is wrong."""
    path = path or broker_path(broker_id)
    o = json_object(data, path)
    protocols = o.get("listener_security_protocol_map") or {}
    if not isinstance(protocols, dict):
        raise FormatError(path, "listener_security_protocol_map must be an object")
    raw_endpoints = o.get("endpoints")
    if raw_endpoints:
        if not isinstance(raw_endpoints, list):
            raise FormatError(path, "endpoints must be a list")
        endpoints = tuple(parse_endpoint(str(e), protocols, path) for e in raw_endpoints)
    elif o.get("host") and isinstance(o.get("port"), int) and o["port"] >= 0:
        endpoints = (Endpoint("PLAINTEXT", str(o["host"]), int(o["port"]), "PLAINTEXT"),)
    else:
        endpoints = ()
    rack = o.get("rack")
    return Broker(broker_id, czxid, None if rack is None else str(rack), endpoints)


# ---------------------------------------------------------------------------- topics and partitions


def _ints(xs: Iterable[int]) -> str:
    return "[" + ",".join(map(str, xs)) + "]"


def encode_partition_state(lai: LeaderAndIsr, controller_epoch: int) -> str:
    extra = "" if lai.leader_recovery_state == RECOVERED else f',"leader_recovery_state":{lai.leader_recovery_state}'
    return (
        f'{{"version":1,"leader":{lai.leader},"leader_epoch":{lai.leader_epoch},'
        f'"controller_epoch":{controller_epoch},"isr":{_ints(lai.isr)}{extra}}}'
    )


def decode_partition_state(data: str, zk_version: int) -> PartitionStateZnode:
    o = json.loads(data)
    return PartitionStateZnode(
        int(o["leader"]),
        int(o["leader_epoch"]),
        tuple(int(x) for x in o["isr"]),
        int(o["controller_epoch"]),
        zk_version,
        int(o.get("leader_recovery_state", RECOVERED)),
    )


def encode_topic_znode(assignment: Mapping[int, ReplicaAssignment], topic_id: str | None) -> str:
    parts = sorted(assignment.items())
    body: dict[str, Any] = {"version": 3 if topic_id else 2}
    if topic_id:
        body["topic_id"] = topic_id
    body["partitions"] = {str(p): list(ra.replicas) for p, ra in parts}
    body["adding_replicas"] = {str(p): list(ra.adding_replicas) for p, ra in parts if ra.adding_replicas}
    body["removing_replicas"] = {str(p): list(ra.removing_replicas) for p, ra in parts if ra.removing_replicas}
    return json.dumps(body, separators=(",", ":"))


def decode_topic_znode(topic: str, data: str, zk_version: int = 0) -> TopicZnode:
    o = json.loads(data)

    def pairs(m: Mapping[str, Any] | None) -> tuple[tuple[int, tuple[int, ...]], ...]:
        return tuple(sorted((int(k), tuple(int(x) for x in v)) for k, v in (m or {}).items()))

    return TopicZnode(
        topic,
        pairs(o.get("partitions")),
        pairs(o.get("adding_replicas")),
        pairs(o.get("removing_replicas")),
        o.get("topic_id"),
        zk_version,
    )


def topic_znode_id(data: str | bytes | None) -> str | None:
    """The ``topic_id`` of a ``/brokers/topics/<t>`` znode (version 3), or ``None`` (version 2, not JSON)."""
    try:
        tid = json.loads(data or "{}").get("topic_id")
    except (ValueError, AttributeError):
        return None
    return tid if isinstance(tid, str) else None


def topic_znode_partitions(data: str | bytes) -> tuple[int, ...]:
    """The partition ids a ``/brokers/topics/<t>`` znode assigns (without decoding the replica lists)."""
    o = json.loads(data)
    return tuple(int(p) for p in (o.get("partitions") or {}))


def encode_reassignment(targets: Iterable[PartitionTarget], *, log_dirs: bool = False) -> str:
    """``/admin/reassign_partitions``'s JSON, which is also the file of ``kafka-reassign-partitions``; the file
    form (``log_dirs``) gives every replica ``"any"`` log directory, as ``--generate`` prints it."""
    parts: list[dict[str, Any]] = []
    for t in sorted(targets, key=lambda t: (t.topic, t.partition)):
        entry: dict[str, Any] = {"topic": t.topic, "partition": t.partition, "replicas": list(t.replicas)}
        if log_dirs:
            entry["log_dirs"] = ["any"] * len(t.replicas)
        parts.append(entry)
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def decode_reassignment(data: str) -> tuple[PartitionTarget, ...]:
    o = json.loads(data)
    return tuple(
        PartitionTarget(str(e["topic"]), int(e["partition"]), tuple(int(x) for x in e["replicas"]))
        for e in o.get("partitions", ())
    )


def encode_preferred_election(tps: Iterable[TopicPartition]) -> str:
    parts = [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(tps)]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def decode_preferred_election(data: str) -> tuple[TopicPartition, ...]:
    o = json.loads(data)
    return tuple(TopicPartition(str(e["topic"]), int(e["partition"])) for e in o.get("partitions", ()))


def encode_topic_config(configs: Mapping[str, str]) -> str:
    return json.dumps({"version": 1, "config": dict(sorted(configs.items()))}, separators=(",", ":"))


def decode_topic_config(data: str) -> dict[str, str]:
    """Any entity config znode (``/config/topics/<t>``, ``/config/brokers/<id>``): Kafka's
    ``{"version":1,"config":{...}}``. Raises ``ValueError``/``AttributeError`` on other JSON."""
    o = json.loads(data)
    return {str(k): str(v) for k, v in (o.get("config") or {}).items()}
