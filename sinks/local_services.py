"""The record of the local services (``livectl local up``): where it is kept and how it reads.

``livectl local up`` keeps, in its run folder (default ``./run/local``), ``services.json``: one entry per
service (``zookeeper``, ``broker``) with its PID, port, address, log and command-line marker. The starter
(:mod:`livectl.local`) writes it through :func:`save_records`; every tool that defaults to the local
services (the admin commands, the simulated brokers and their ``livectl-simbrokers`` tool) reads an address
through :func:`recorded_address`, and takes its default connection from :func:`default_bootstrap_server` and
:func:`default_zookeeper`. Both sit on this one module, below them, so that neither the tools nor the starter
import each other.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "BOOTSTRAP_SERVER_ENV",
    "DEFAULT_RUN_DIR",
    "STATE_FILE",
    "ZOOKEEPER_ENV",
    "default_bootstrap_server",
    "default_zookeeper",
    "load_records",
    "recorded_address",
    "save_records",
]

STATE_FILE = "services.json"
#: where ``livectl local up`` keeps its services unless told otherwise (relative to the working directory)
DEFAULT_RUN_DIR = Path("run") / "local"
#: environment variables that name the services for every tool, before the record and the built-in address
BOOTSTRAP_SERVER_ENV = "LIVECTL_BOOTSTRAP_SERVER"
ZOOKEEPER_ENV = "LIVECTL_ZOOKEEPER"


def load_records(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Service name -> its recorded fields, as saved in ``run_dir``; empty when nothing is recorded.
    Raises :class:`OSError` when the file cannot be read and :class:`ValueError` when it is not a JSON
    object of objects."""
    path = run_dir / STATE_FILE
    if not path.exists():
        return {}
    raw = json.loads(path.read_text())
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ValueError(f"{path}: must be a JSON object of one object per service")
    return raw


def save_records(run_dir: Path, records: Mapping[str, Mapping[str, Any]]) -> None:
    """Replace the record in ``run_dir`` (created if missing) atomically: written beside, then renamed."""
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps({k: dict(v) for k, v in records.items()}, indent=2))
    tmp.replace(run_dir / STATE_FILE)


def recorded_address(name: str, run_dir: Path = DEFAULT_RUN_DIR) -> str | None:
    """The address of service ``name`` (``zookeeper`` or ``broker``) as ``livectl local up`` recorded it in
    ``run_dir``; ``None`` when nothing (readable) is recorded there. Whether it still runs is not checked.
    ``zookeeper`` of an ensemble (servers recorded as ``zookeeper-1`` …) is the connect string of them all."""
    try:
        records = load_records(run_dir)
    except (OSError, ValueError):
        return None
    if name == "zookeeper" and name not in records:
        servers = sorted(
            (k for k in records if k.startswith("zookeeper-") and k[10:].isdigit()), key=lambda k: int(k[10:])
        )
        addresses = [records[k].get("address") for k in servers]
        strings = [a for a in addresses if isinstance(a, str)]
        return ",".join(strings) if strings and len(strings) == len(addresses) else None
    address = records.get(name, {}).get("address")
    return address if isinstance(address, str) else None


def default_bootstrap_server(run_dir: Path = DEFAULT_RUN_DIR) -> str:
    """The Kafka bootstrap server a tool connects to when not told: ``$LIVECTL_BOOTSTRAP_SERVER``, else the
    broker ``livectl local up`` recorded in ``run_dir``, else ``127.0.0.1:9092``."""
    return os.environ.get(BOOTSTRAP_SERVER_ENV) or recorded_address("broker", run_dir) or "127.0.0.1:9092"


def default_zookeeper(run_dir: Path = DEFAULT_RUN_DIR) -> str:
    """The ZooKeeper connect string a tool uses when not told: ``$LIVECTL_ZOOKEEPER``, else the ZooKeeper
    ``livectl local up`` recorded in ``run_dir``, else ``127.0.0.1:2181``."""
    return os.environ.get(ZOOKEEPER_ENV) or recorded_address("zookeeper", run_dir) or "127.0.0.1:2181"
