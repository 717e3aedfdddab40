"""Broker registration in ZooKeeper, as Kafka's ``KafkaZkClient.registerBroker`` does it.

``/brokers/ids/<id>`` is an ephemeral znode holding Kafka's version-5 JSON (``BrokerIdZNode``,
:func:`core.kafka.zkdata.encode_broker_registration`), created in
the broker's own ZooKeeper session; the broker epoch is the znode's creation zxid (``czxid``). Closing the
session (a hard kill) or letting it expire (SIGKILL) removes the registration.
"""

from __future__ import annotations

import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from core.kafka import zkdata


class RegistrationError(RuntimeError):
    """The broker could not register (id taken by a live broker, ZooKeeper unreachable)."""


def register(zk: KazooClient, broker_id: int, host: str, port: int, rack: str | None, *, wait_s: float = 0.0) -> int:
    """Create the ephemeral registration; returns the broker epoch (czxid).

    A registration left by a previous incarnation of this broker id disappears when its session expires;
    ``wait_s`` is how long to wait for that before giving up."""
    path = zkdata.broker_path(broker_id)
    zk.ensure_path(zkdata.BROKER_IDS)
    deadline = time.monotonic() + wait_s
    while True:
        data = zkdata.encode_broker_registration(host, port, rack, int(time.time() * 1000)).encode()
        try:
            _, stat = zk.create(path, data, ephemeral=True, include_data=True)
            return int(stat.czxid)
        except NodeExistsError:
            existing = zk.exists(path)
            if existing is not None and existing.ephemeralOwner == zk.client_id[0]:
                return int(existing.czxid)
            if time.monotonic() >= deadline:
                raise RegistrationError(
                    f"broker id {broker_id}: {path} is held by another live session; stop that broker or wait "
                    "for its ZooKeeper session to expire"
                ) from None
            time.sleep(0.2)
