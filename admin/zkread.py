"""Read-only views of Kafka's ZooKeeper layout, for ``describe``, ``list``, ``verify`` and ``status``.

Paths and JSON are Kafka's (``kafka.zk.ZkData``), decoded with :mod:`core.kafka.zkdata`:
``/brokers/ids/<id>``, ``/brokers/topics/<t>``, ``/brokers/topics/<t>/partitions/<p>/state``,
``/admin/reassign_partitions``, ``/admin/delete_topics/<t>``, ``/config/topics/<t>``, ``/controller``,
``/controller_epoch``; and livectl's own ``/livectl/offline_replicas/<t>`` (:mod:`core.offline_replicas`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from core import offline_replicas
from core.cordon import CORDONED_BROKERS, DRAINS, decode_cordoned
from core.errors import FormatError
from core.kafka import zkdata
from core.model import PartitionTarget
from core.snapshot import PartitionStateZnode, TopicZnode


class ZkUnavailableError(RuntimeError):
    """ZooKeeper could not be reached."""


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    host: str
    port: int
    endpoints: tuple[str, ...]
    rack: str | None
    #: the broker epoch (the registration's czxid)
    epoch: int
    raw: dict[str, Any]


@dataclass(frozen=True)
class ControllerInfo:
    broker_id: int | None
    timestamp: str | None
    epoch: int | None
    epoch_zk_version: int | None


@contextmanager
def connect(hosts: str, timeout_s: float = 5.0) -> Iterator[ZkReader]:
    # kazoo logs every refused connection attempt; the CLI reports the outcome once, itself
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    zk = KazooClient(hosts=hosts, timeout=timeout_s, read_only=True)
    try:
        zk.start(timeout=timeout_s)
    except KazooTimeoutError:
        zk.close()
        raise ZkUnavailableError(f"cannot reach ZooKeeper at {hosts} (timed out after {timeout_s:g}s)") from None
    try:
        yield ZkReader(zk)
    finally:
        zk.stop()
        zk.close()


class ZkReader:
    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def _get(self, path: str) -> tuple[str, Any] | None:
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return None
        return (data or b"").decode(), stat

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def brokers(self) -> dict[int, BrokerRegistration]:
        out: dict[int, BrokerRegistration] = {}
        for child in self._children(zkdata.BROKER_IDS):
            got = self._get(zkdata.broker_path(int(child))) if child.isdigit() else None
            if got is None:
                continue
            data, stat = got
            try:
                info = zkdata.decode_broker_registration(int(child), data, int(stat.czxid))
                raw = json.loads(data)
            except ValueError:  # FormatError too: not a registration this tool can show
                continue
            out[int(child)] = BrokerRegistration(
                int(child),
                str(raw.get("host", "")),
                int(raw.get("port", -1)),
                tuple(zkdata.endpoint_text(e.listener, e.host, e.port) for e in info.endpoints),
                info.rack,
                info.epoch,
                raw,
            )
        return out

    def cordoned(self) -> tuple[int, ...]:
        """The cordoned brokers (``/livectl/cordoned_brokers``, :mod:`core.cordon`); a znode that is not its
        JSON raises :class:`core.errors.FormatError`."""
        got = self._get(CORDONED_BROKERS)
        return decode_cordoned(got[0]) if got is not None else ()

    def draining(self) -> set[int]:
        """The brokers a drain is recorded for (children of ``/livectl/drains``, :mod:`admin.drain`)."""
        return {int(c) for c in self._children(DRAINS) if c.isdigit()}

    def topics(self) -> list[str]:
        return self._children(zkdata.BROKER_TOPICS)

    def topic(self, name: str) -> TopicZnode | None:
        got = self._get(zkdata.topic_path(name))
        if got is None:
            return None
        return zkdata.decode_topic_znode(name, got[0], got[1].version)

    def partition_state(self, topic: str, partition: int) -> PartitionStateZnode | None:
        got = self._get(zkdata.partition_state_path(topic, partition))
        if got is None or not got[0]:
            return None
        return zkdata.decode_partition_state(got[0], got[1].version)

    def topic_config(self, topic: str) -> dict[str, str]:
        got = self._get(zkdata.topic_config_path(topic))
        return zkdata.decode_topic_config(got[0]) if got and got[0] else {}

    def broker_config(self, broker: str) -> dict[str, str]:
        """``/config/brokers/<broker>`` (``<default>`` for the cluster default): Kafka's dynamic broker configs."""
        got = self._get(zkdata.entity_config_path("brokers", broker))
        return zkdata.decode_topic_config(got[0]) if got and got[0] else {}

    def broker_default_config(self) -> dict[str, str]:
        return self.broker_config("<default>")

    def offline_dir_replicas(self, topic: str) -> dict[int, tuple[int, ...]]:
        """``/livectl/offline_replicas/<topic>`` (:mod:`core.offline_replicas`): partition -> brokers whose
        replica the controller holds offline on a failed log dir; empty when the znode is absent."""
        path = offline_replicas.offline_replicas_path(topic)
        got = self._get(path)
        if got is None or not got[0]:
            return {}
        try:
            return offline_replicas.decode(got[0])
        except FormatError as e:
            raise FormatError(f"{path}: {e.field}", e.reason) from None

    def marked_for_deletion(self) -> set[str]:
        return set(self._children(zkdata.DELETE_TOPICS))

    def pending_reassignments(self) -> tuple[PartitionTarget, ...]:
        got = self._get(zkdata.REASSIGN_PARTITIONS)
        return zkdata.decode_reassignment(got[0]) if got and got[0] else ()

    def controller(self) -> ControllerInfo:
        broker_id = timestamp = None
        got = self._get(zkdata.CONTROLLER_PATH)
        if got is not None:
            with suppress(FormatError):
                znode = zkdata.decode_controller(got[0])
                broker_id, timestamp = znode.broker_id, znode.timestamp
        epoch = version = None
        got = self._get(zkdata.CONTROLLER_EPOCH_PATH)
        if got is not None:
            with suppress(FormatError):
                epoch, version = zkdata.decode_controller_epoch(got[0]), int(got[1].version)
        return ControllerInfo(broker_id, timestamp, epoch, version)
