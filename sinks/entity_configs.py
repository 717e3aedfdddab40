"""Kafka's entity configs in ZooKeeper, read and written as Kafka's ``AdminZkClient`` does.

* ``/config/<type>/<name>`` (``topics/<t>``, ``brokers/<id>``, ``brokers/<default>``) holds
  ``{"version":1,"config":{…}}``; a write replaces the whole map (created, with its parents, if missing);
* after every write a sequential ``/config/changes/config_change_NNNNNNNNNN`` notification
  ``{"version":2,"entity_path":"<type>/<name>"}`` is created: the znode Kafka's brokers (and the simulated
  ones) watch to reload that entity's configs.

Shared by the admin tool (``livectl configs``, the reassignment throttles, ``drain``) and the controller
channel (the controller's node's own broker configs); names and values are checked by the callers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from core.kafka import zk_notifications, zkdata

__all__ = [
    "DEFAULT_BROKER",
    "change_broker_configs",
    "notify",
    "read_entity_configs",
    "write_entity_configs",
]

#: the entity name of the cluster-wide default broker configs (Kafka's ``ZooKeeperInternals.DEFAULT_STRING``)
DEFAULT_BROKER = "<default>"


def read_entity_configs(zk: KazooClient, entity_type: str, name: str) -> dict[str, str]:
    """The configs ``/config/<entity_type>/<name>`` holds; ``{}`` when it does not exist or is empty."""
    try:
        data, _ = zk.get(zkdata.entity_config_path(entity_type, name))
    except NoNodeError:
        return {}
    return zkdata.decode_topic_config(data.decode()) if data else {}


def notify(zk: KazooClient, entity_type: str, name: str) -> str:
    """Create the sequential change notification; returns its path."""
    zk.ensure_path(zkdata.CONFIG_CHANGES)
    path: str = zk.create(
        f"{zkdata.CONFIG_CHANGES}/{zkdata.CONFIG_CHANGE_PREFIX}",
        zk_notifications.encode_config_change(entity_type, name),
        sequence=True,
    )
    return path


def write_entity_configs(zk: KazooClient, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
    """``/config/<type>/<name>`` := configs (created if missing), then the change notification."""
    path = zkdata.entity_config_path(entity_type, name)
    data = zkdata.encode_topic_config(configs).encode()
    try:
        zk.set(path, data)
    except NoNodeError:
        try:
            zk.create(path, data, makepath=True)
        except NodeExistsError:
            zk.set(path, data)
    notify(zk, entity_type, name)


def change_broker_configs(
    zk: KazooClient, broker: str, add: Mapping[str, str], delete: Sequence[str] = ()
) -> dict[str, str]:
    """Merge ``add`` into, and remove ``delete`` from, the broker's (or ``<default>``'s) dynamic configs."""
    configs = read_entity_configs(zk, "brokers", broker)
    configs.update(add)
    for key in delete:
        configs.pop(key, None)
    write_entity_configs(zk, "brokers", broker, configs)
    return configs
