"""Dynamic configs from ZooKeeper, reloaded on Kafka's change notifications (the broker side of
``kafka-configs``).

Like a Kafka broker's ``DynamicConfigManager``: at start read every ``/config/topics/<t>`` and
``/config/brokers/<id|<default>>``; then watch the children of ``/config/changes`` and, for every
``config_change_NNNNNNNNNN`` newer than the last one handled, re-read the entity its version-2 JSON names
(``{"version":2,"entity_path":"topics/orders"}``). Each time something changed, ``apply`` gets the whole
picture: (broker entity -> configs, topic -> configs).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from core.kafka import zk_notifications, zkdata

log = logging.getLogger("simbrokers.dynconfig")

Apply = Callable[[Mapping[str, Mapping[str, str]], Mapping[str, Mapping[str, str]]], None]


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
            data, _ = self.zk.get(zkdata.entity_config_path(kind, name))
        except NoNodeError:
            return {}
        return zkdata.decode_topic_config(data.decode()) if data else {}

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def current(self) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
        """The broker and topic configs read so far (copies)."""
        with self._lock:
            return dict(self.brokers), dict(self.topics)

    def start(self) -> None:
        """Read everything once, then follow the notifications."""
        self.zk.ensure_path(zkdata.CONFIG_CHANGES)
        with self._lock:
            seqs = [
                s
                for s in map(zk_notifications.config_change_sequence, self._children(zkdata.CONFIG_CHANGES))
                if s is not None
            ]
            self.last_sequence = max(seqs, default=-1)
            self.brokers = {b: self._read("brokers", b) for b in self._children(zkdata.CONFIG_BROKERS)}
            self.topics = {t: self._read("topics", t) for t in self._children(zkdata.CONFIG_TOPICS)}
            self.apply(self.brokers, self.topics)
        self.zk.ChildrenWatch(zkdata.CONFIG_CHANGES, self._on_changes)

    def _on_changes(self, children: list[str]) -> None:
        try:
            self._handle(children)
        except Exception:  # a watch callback must not die: the next notification retries
            log.exception("reading a config change failed")

    def _handle(self, children: list[str]) -> None:
        with self._lock:
            fresh = sorted(
                (s, c)
                for c in children
                if (s := zk_notifications.config_change_sequence(c)) is not None and s > self.last_sequence
            )
            if not fresh:
                return
            for seq, child in fresh:
                self.last_sequence = seq
                try:
                    data, _ = self.zk.get(f"{zkdata.CONFIG_CHANGES}/{child}")
                except NoNodeError:
                    continue
                entity = zk_notifications.decode_config_change(data)
                if entity is None:
                    log.warning("ignoring config change %s: not Kafka's version 2 notification", child)
                    continue
                kind, name = entity
                if kind == "brokers":
                    self.brokers[name] = self._read(kind, name)
                elif kind == "topics":
                    self.topics[name] = self._read(kind, name)
            self.apply(self.brokers, self.topics)
