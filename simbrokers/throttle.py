"""Replication quotas of a simulated broker, as Kafka's ``ReplicationQuotaManager`` applies them, pure.

Configs (Kafka's names, from ZooKeeper): the rates ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` of ``/config/brokers/<id>`` (else ``/config/brokers/<default>``),
in bytes/s; the replica lists ``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas`` of ``/config/topics/<t>`` (``partition:broker`` items, or ``*``).

* leader side: a partition this broker leads is throttled when ``partition:<this broker>`` is in the
  topic's leader list; a fetch from a follower *not in the ISR* then gets only as many records as the
  leader quota has room for;
* follower side: a partition this broker follows is throttled when ``partition:<this broker>`` is in the
  follower list and this broker is not in its ISR; it takes only as many records of a fetch response as
  the follower quota has room for (the rest is fetched again later).

In-sync replicas are never throttled, as in Kafka. The simulation counts records, not bytes: every record
weighs ``record_bytes`` (:attr:`simbrokers.broker.BrokerConfig.record_bytes`). A quota is a token bucket
holding at most one second of its rate (at least one record).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from core.kafka.configs import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    parse_throttled_replicas,
)
from core.model import TopicPartition

#: a topic's throttled replicas: ``None`` means every replica (``*``)
Replicas = frozenset[tuple[int, int]] | None


@dataclass(frozen=True)
class ThrottleConfig:
    leader_rate: int | None = None
    follower_rate: int | None = None
    leader_replicas: Mapping[str, Replicas] = field(default_factory=dict)
    follower_replicas: Mapping[str, Replicas] = field(default_factory=dict)

    @staticmethod
    def _listed(lists: Mapping[str, Replicas], tp: TopicPartition, broker_id: int) -> bool:
        if tp.topic not in lists:
            return False
        items = lists[tp.topic]
        return items is None or (tp.partition, broker_id) in items

    def leader_throttled(self, tp: TopicPartition, broker_id: int) -> bool:
        return self.leader_rate is not None and self._listed(self.leader_replicas, tp, broker_id)

    def follower_throttled(self, tp: TopicPartition, broker_id: int) -> bool:
        return self.follower_rate is not None and self._listed(self.follower_replicas, tp, broker_id)


def _rate(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def throttle_config(
    broker_id: int, broker_configs: Mapping[str, Mapping[str, str]], topic_configs: Mapping[str, Mapping[str, str]]
) -> ThrottleConfig:
    """This broker's quotas from the dynamic configs read from ZooKeeper (entity name -> configs)."""
    merged = {**broker_configs.get("<default>", {}), **broker_configs.get(str(broker_id), {})}
    leader: dict[str, Replicas] = {}
    follower: dict[str, Replicas] = {}
    for topic, cfg in topic_configs.items():
        if cfg.get(LEADER_THROTTLED_REPLICAS):
            leader[topic] = parse_throttled_replicas(cfg[LEADER_THROTTLED_REPLICAS])
        if cfg.get(FOLLOWER_THROTTLED_REPLICAS):
            follower[topic] = parse_throttled_replicas(cfg[FOLLOWER_THROTTLED_REPLICAS])
    return ThrottleConfig(
        _rate(merged.get(LEADER_THROTTLED_RATE)), _rate(merged.get(FOLLOWER_THROTTLED_RATE)), leader, follower
    )


@dataclass
class Quota:
    """A token bucket of ``rate`` bytes/s."""

    rate: int
    tokens: float = 0.0
    last_ms: int | None = None

    def grant(self, now_ms: int, wanted_records: int, record_bytes: int) -> int:
        """How many of ``wanted_records`` may go now; their bytes are taken from the bucket."""
        if wanted_records <= 0:
            return 0
        cap = max(float(self.rate), float(record_bytes))
        if self.last_ms is None:
            self.tokens = cap
        else:
            self.tokens = min(cap, self.tokens + self.rate * max(0, now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms
        n = min(wanted_records, int(self.tokens // record_bytes))
        self.tokens -= n * record_bytes
        return n
