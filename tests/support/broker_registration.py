"""A broker's registration znode as Kafka writes it, for the ZooKeeper snapshot's tests."""

from __future__ import annotations

import json


def registration(host: str, port: int, rack: str | None = None) -> bytes:
    """Kafka's v5 ``/brokers/ids/<id>`` JSON."""
    return json.dumps(
        {
            "features": {},
            "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL"},
            "endpoints": [f"PLAINTEXT://{host}:{port}", f"INTERNAL://[::1]:{port + 1}"],
            "jmx_port": -1,
            "port": port,
            "host": host,
            "version": 5,
            "timestamp": "1700000000000",
            "rack": rack,
        }
    ).encode()
