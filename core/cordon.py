"""Cordoned brokers (issue 44, item 1): brokers no new replica is placed on.

Kafka's KRaft cordons log directories (KIP-1066); its ZooKeeper controller has nothing of the kind.
livectl keeps the set in one znode of its own namespace, ``/livectl/cordoned_brokers``:
``{"version":1,"brokers":[3,5]}`` (ids ascending, each once). ``livectl brokers --cordon N`` / ``--uncordon
N`` write it (compare-and-set on its version); a new controller reads it with the rest of its snapshot
(:attr:`core.snapshot.ZkSnapshot.cordoned_brokers`), and the active one's admin-path watcher publishes a
change as :class:`core.zk_path_events.BrokersCordoned`. Topic creation and partition addition without an explicit
assignment, and ``reassign --generate``, place no replica on a cordoned broker
(:func:`core.placement.assign_replicas`); replicas already there stay, and an explicit assignment may still
name one (as KIP-1066 leaves assignments the operator writes alone).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from core.errors import FormatError

__all__ = ["CORDONED_BROKERS", "CORDONED_VERSION", "DRAINS", "decode_cordoned", "encode_cordoned"]

#: the znode (livectl's own, beside ``/livectl/offline_replicas``)
CORDONED_BROKERS = "/livectl/cordoned_brokers"
#: the parent of the drain records, ``/livectl/drains/<broker>`` (``livectl brokers --drain``: ``admin.drain``)
DRAINS = "/livectl/drains"
CORDONED_VERSION = 1


def encode_cordoned(brokers: Iterable[int]) -> str:
    """The znode's JSON for ``brokers`` (sorted, each once)."""
    return json.dumps({"version": CORDONED_VERSION, "brokers": sorted(set(brokers))}, separators=(",", ":"))


def decode_cordoned(data: str | bytes | None) -> tuple[int, ...]:
    """The cordoned broker ids of the znode's data (empty data: none); :class:`FormatError` names the bad field."""
    if not data:
        return ()
    try:
        raw: Any = json.loads(data)
    except ValueError as e:
        raise FormatError("$", f"{CORDONED_BROKERS} is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise FormatError("$", f"{CORDONED_BROKERS}: expected a JSON object")
    if raw.get("version") != CORDONED_VERSION:
        raise FormatError("version", f"{CORDONED_BROKERS}: expected {CORDONED_VERSION}, got {raw.get('version')!r}")
    brokers = raw.get("brokers")
    if not isinstance(brokers, list) or not all(type(b) is int and b >= 0 for b in brokers):
        raise FormatError("brokers", f"{CORDONED_BROKERS}: expected a list of non-negative broker ids")
    return tuple(sorted(set(brokers)))
