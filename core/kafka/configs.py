"""Kafka's topic and dynamic broker configs: names, types and valid ranges, checked as Kafka checks them.

Topic configs are Kafka's ``LogConfig`` definitions (ZooKeeper-era 2.x/3.x, ``kafka.log.LogConfig``);
dynamic broker configs are the ones Kafka accepts in ``/config/brokers/<id>`` and
``/config/brokers/<default>`` and that matter to livectl (the replication quotas of
``DynamicConfig.Broker`` and the cluster-wide ``unclean.leader.election.enable`` /
``min.insync.replicas``). Values are the strings Kafka stores in ZooKeeper.

Errors read as Kafka's ``ConfigDef`` and ``LogConfig.validate`` word them (error name ``INVALID_CONFIG``):
``Unknown topic config name: foo``, ``Invalid value x for configuration retention.ms: Not a number of
type LONG``, ``Invalid value -5 for configuration retention.ms: Value must be at least -1``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from core.kafka.error_codes import KafkaError

INVALID_CONFIG = KafkaError.INVALID_CONFIG.name

LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_THROTTLED_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
MIN_INSYNC_REPLICAS = "min.insync.replicas"

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


class ConfigType(Enum):
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    LIST = "LIST"


@dataclass(frozen=True)
class ConfigKey:
    """One config: its type, an inclusive numeric range, or the strings it may take (each list item for LIST)."""

    name: str
    type: ConfigType
    at_least: float | None = None
    at_most: float | None = None
    one_of: tuple[str, ...] = ()
    #: ``leader/follower.replication.throttled.replicas``: ``*`` or ``partition:broker`` items
    throttled_replicas: bool = False


_T = ConfigType
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_OLD_FORMATS = ((0, 8), (0, 9), (0, 10), (0, 11), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2), (2, 3))
_MESSAGE_FORMATS = (
    *(f"{major}.{minor}{suffix}" for major, minor in _OLD_FORMATS for suffix in ("", "-IV0", "-IV1")),
    *("2.4", "2.5", "2.6", "2.7", "2.8", "3.0"),
)

TOPIC_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType(
    {
        k.name: k
        for k in (
            ConfigKey("segment.bytes", _T.INT, at_least=14),
            ConfigKey("segment.ms", _T.LONG, at_least=1),
            ConfigKey("segment.jitter.ms", _T.LONG, at_least=0),
            ConfigKey("segment.index.bytes", _T.INT, at_least=0),
            ConfigKey("flush.messages", _T.LONG, at_least=0),
            ConfigKey("flush.ms", _T.LONG, at_least=0),
            ConfigKey("retention.bytes", _T.LONG),
            ConfigKey("retention.ms", _T.LONG, at_least=-1),
            ConfigKey("max.message.bytes", _T.INT, at_least=0),
            ConfigKey("index.interval.bytes", _T.INT, at_least=0),
            ConfigKey("delete.retention.ms", _T.LONG, at_least=0),
            ConfigKey("min.compaction.lag.ms", _T.LONG, at_least=0),
            ConfigKey("max.compaction.lag.ms", _T.LONG, at_least=1),
            ConfigKey("file.delete.delay.ms", _T.LONG, at_least=0),
            ConfigKey("min.cleanable.dirty.ratio", _T.DOUBLE, at_least=0, at_most=1),
            ConfigKey("cleanup.policy", _T.LIST, one_of=("compact", "delete")),
            ConfigKey("unclean.leader.election.enable", _T.BOOLEAN),
            ConfigKey(MIN_INSYNC_REPLICAS, _T.INT, at_least=1),
            ConfigKey("compression.type", _T.STRING, one_of=_COMPRESSION),
            ConfigKey("preallocate", _T.BOOLEAN),
            ConfigKey("message.format.version", _T.STRING, one_of=_MESSAGE_FORMATS),
            ConfigKey("message.timestamp.type", _T.STRING, one_of=("CreateTime", "LogAppendTime")),
            ConfigKey("message.timestamp.difference.max.ms", _T.LONG, at_least=0),
            ConfigKey(LEADER_THROTTLED_REPLICAS, _T.LIST, throttled_replicas=True),
            ConfigKey(FOLLOWER_THROTTLED_REPLICAS, _T.LIST, throttled_replicas=True),
            ConfigKey("message.downconversion.enable", _T.BOOLEAN),
        )
    }
)

BROKER_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType(
    {
        k.name: k
        for k in (
            ConfigKey(LEADER_THROTTLED_RATE, _T.LONG, at_least=0),
            ConfigKey(FOLLOWER_THROTTLED_RATE, _T.LONG, at_least=0),
            ConfigKey(ALTER_LOG_DIRS_THROTTLED_RATE, _T.LONG, at_least=0),
            ConfigKey("unclean.leader.election.enable", _T.BOOLEAN),
            ConfigKey(MIN_INSYNC_REPLICAS, _T.INT, at_least=1),
            # livectl's own (core.cluster_config), read live from /config/brokers/<default> like the others
            ConfigKey("leader.imbalance.max.leaders.per.interval", _T.INT, at_least=1),
        )
    }
)

_REPLICA_ITEM = re.compile(r"[0-9]+:[0-9]+")


def _number(key: ConfigKey, value: str) -> str | None:
    text = value.strip()
    kind = key.type
    number: float
    try:
        if kind is ConfigType.DOUBLE:
            number = float(text)
        else:
            number = int(text)
            low, high = (_INT_MIN, _INT_MAX) if kind is ConfigType.INT else (_LONG_MIN, _LONG_MAX)
            if not low <= number <= high:
                raise ValueError(text)
    except ValueError:
        return f"Not a number of type {kind.value}"
    if key.at_least is not None and number < key.at_least:
        if key.at_most is not None:
            return f"Value must be no less than {_show(key.at_least)}"
        return f"Value must be at least {_show(key.at_least)}"
    if key.at_most is not None and number > key.at_most:
        return f"Value must be no more than {_show(key.at_most)}"
    return None


def _show(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _reason(key: ConfigKey, value: str) -> str | None:
    kind = key.type
    if kind in (ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE):
        return _number(key, value)
    if kind is ConfigType.BOOLEAN:
        return None if value.strip().lower() in ("true", "false") else "Expected value to be either true or false"
    if kind is ConfigType.STRING:
        if key.one_of and value.strip() not in key.one_of:
            return f"String must be one of: {', '.join(key.one_of)}"
        return None
    items = [item.strip() for item in value.split(",")] if value.strip() else []
    if key.throttled_replicas:
        if items == ["*"] or all(_REPLICA_ITEM.fullmatch(item) for item in items):
            return None
        return (
            "must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )
    if key.one_of:
        if not items:
            return "Empty list"
        bad = [item for item in items if item not in key.one_of]
        if bad:
            return f"String must be one of: {', '.join(key.one_of)} (not {bad[0]})"
    return None


def config_problem(name: str, value: str, known: Mapping[str, ConfigKey], kind: str = "topic") -> str | None:
    """Why ``name=value`` is not a valid ``kind`` config, in Kafka's words, or ``None``."""
    key = known.get(name)
    if key is None:
        return f"Unknown {kind} config name: {name}"
    reason = _reason(key, value)
    if reason is None:
        return None
    return f"Invalid value {value} for configuration {name}: {reason}"


def topic_configs_problem(configs: Mapping[str, str]) -> str | None:
    """The first reason (in name order) the topic configs are invalid, or ``None``: unknown names, bad
    values, and ``LogConfig.validateValues``' cross-check (min.compaction.lag.ms <= max.compaction.lag.ms)."""
    for name in sorted(configs):
        problem = config_problem(name, configs[name], TOPIC_CONFIGS)
        if problem is not None:
            return problem
    low, high = configs.get("min.compaction.lag.ms"), configs.get("max.compaction.lag.ms")
    if low is not None and high is not None and int(low) > int(high):
        return f"conflict topic config setting min.compaction.lag.ms ({int(low)}) > max.compaction.lag.ms ({int(high)})"
    return None


def broker_configs_problem(configs: Mapping[str, str]) -> str | None:
    """The first reason (in name order) the dynamic broker configs are invalid, or ``None``."""
    for name in sorted(configs):
        problem = config_problem(name, configs[name], BROKER_CONFIGS, "broker")
        if problem is not None:
            return problem
    return None


def parse_throttled_replicas(value: str) -> frozenset[tuple[int, int]] | None:
    """``partition:broker`` pairs of a throttled-replicas config; ``None`` means ``*`` (every replica)."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if items == ["*"]:
        return None
    out = set()
    for item in items:
        if _REPLICA_ITEM.fullmatch(item):
            p, b = item.split(":")
            out.add((int(p), int(b)))
    return frozenset(out)
