"""Broker registration in ZooKeeper, as Kafka's ``KafkaZkClient.registerBroker`` does it.

``/brokers/ids/<id>`` is an ephemeral znode holding Kafka's version-5 JSON (``BrokerIdZNode``), created in
the broker's own ZooKeeper session; the broker epoch is the znode's creation zxid (``czxid``). Closing the
session (a hard kill) or letting it expire (SIGKILL) removes the registration.
"""

from __future__ import annotations

import json
import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError


class RegistrationError(RuntimeError):
    """The broker could not register (id taken by a live broker, ZooKeeper unreachable)."""


def broker_path(broker_id: int) -> str:
    return f"/brokers/ids/{broker_id}"


def registration_json(host: str, port: int, rack: str | None, timestamp_ms: int) -> str:
    """Kafka's ``BrokerIdZNode`` version 5 JSON with one PLAINTEXT listener."""
    body: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": [f"PLAINTEXT://{host}:{port}"],
        "jmx_port": -1,
        "port": port,
        "host": host,
        "version": 5,
        "timestamp": str(timestamp_ms),
        "rack": rack,
    }
    return json.dumps(body, separators=(",", ":"))


def register(zk: KazooClient, broker_id: int, host: str, port: int, rack: str | None, *, wait_s: float = 0.0) -> int:
    """Create the ephemeral registration; returns the broker epoch (czxid).

    A registration left by a previous incarnation of this broker id disappears when its session expires;
    ``wait_s`` is how long to wait for that before giving up."""
    path = broker_path(broker_id)
    zk.ensure_path("/brokers/ids")
    deadline = time.monotonic() + wait_s
    while True:
        data = registration_json(host, port, rack, int(time.time() * 1000)).encode()
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
