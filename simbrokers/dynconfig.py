"""Dynamic configs from ZooKeeper, reloaded on Kafka's change notifications (the broker side of
``kafka-configs``).

Like a Kafka broker's ``DynamicConfigManager``: at start read every ``/config/topics/<t>`` and
``/config/brokers/<id|<default>>``; then watch the children of ``/config/changes`` and, for every
``config_change_NNNNNNNNNN`` newer than the last one handled, re-read the entity its version-2 JSON names
(``{"version":2,"entity_path":"topics/orders"}``). Each time something changed, ``apply`` gets the whole
picture: (broker entity -> configs, topic -> configs).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from core.kafka import zkdata

log = logging.getLogger("simbrokers.dynconfig")

CONFIG_CHANGES = "/config/changes"
CHANGE_PREFIX = "config_change_"

Apply = Callable[[Mapping[str, Mapping[str, str]], Mapping[str, Mapping[str, str]]], None]


def sequence_of(name: str) -> int | None:
    if not name.startswith(CHANGE_PREFIX):
        return None
    digits = name[len(CHANGE_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def entity_of(data: bytes) -> tuple[str, str] | None:
    """``(entity type, name)`` of a version-2 notification, or ``None``."""
    try:
        o = json.loads(data)
    except ValueError:
        return None
    path = o.get("entity_path") if isinstance(o, dict) and o.get("version") == 2 else None
    if not isinstance(path, str) or "/" not in path:
        return None
    kind, _, name = path.partition("/")
    return kind, name


class DynamicConfigWatcher:
    def __init__(self, zk: KazooClient, apply: Apply) -> None:
        self.zk = zk
        self.apply = apply
        self.brokers: dict[str, dict[str, str]] = {}
        self.topics: dict[str, dict[str, str]] = {}
        self.last_sequence = -1
        self._lock = threading.Lock()

    def _read(self, kind: str, name: str) -> dict[str, str]:
        try:
            data, _ = self.zk.get(f"/config/{kind}/{name}")
        except NoNodeError:
            return {}
        return zkdata.decode_topic_config(data.decode()) if data else {}

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def start(self) -> None:
        """Read everything once, then follow the notifications."""
        self.zk.ensure_path(CONFIG_CHANGES)
        with self._lock:
            seqs = [s for s in map(sequence_of, self._children(CONFIG_CHANGES)) if s is not None]
            self.last_sequence = max(seqs, default=-1)
            self.brokers = {b: self._read("brokers", b) for b in self._children("/config/brokers")}
            self.topics = {t: self._read("topics", t) for t in self._children("/config/topics")}
            self.apply(self.brokers, self.topics)
        self.zk.ChildrenWatch(CONFIG_CHANGES, self._on_changes)

    def _on_changes(self, children: list[str]) -> None:
        try:
            self._handle(children)
        except Exception:  # a watch callback must not die: the next notification retries
            log.exception("reading a config change failed")

    def _handle(self, children: list[str]) -> None:
        with self._lock:
            fresh = sorted((s, c) for c in children if (s := sequence_of(c)) is not None and s > self.last_sequence)
            if not fresh:
                return
            for seq, child in fresh:
                self.last_sequence = seq
                try:
                    data, _ = self.zk.get(f"{CONFIG_CHANGES}/{child}")
                except NoNodeError:
                    continue
                entity = entity_of(data)
                if entity is None:
                    log.warning("ignoring config change %s: not Kafka's version 2 notification", child)
                    continue
                kind, name = entity
                if kind == "brokers":
                    self.brokers[name] = self._read(kind, name)
                elif kind == "topics":
                    self.topics[name] = self._read(kind, name)
            self.apply(self.brokers, self.topics)
