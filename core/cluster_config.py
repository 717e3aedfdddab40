"""Kafka's controller configs, by Kafka's names, with Kafka's defaults and validation.

The broker configs the ZooKeeper-era controller reads (``KafkaConfig``), as the fields of
:class:`core.controller.ControllerConfig` they set:

================================================ ======================================= ==========
Kafka config                                     field                                   default
================================================ ======================================= ==========
``auto.leader.rebalance.enable``                 ``auto_leader_rebalance_enable``        ``true``
``leader.imbalance.per.broker.percentage``       ``leader_imbalance_per_broker_percentage`` ``10``
``leader.imbalance.check.interval.seconds``      ``leader_imbalance_check_interval_seconds`` ``300``
``leader.imbalance.max.leaders.per.interval``    ``leader_imbalance_max_leaders_per_interval`` ``2147483647``
``unclean.leader.election.enable``               ``unclean_leader_election_enable``      ``false``
``delete.topic.enable``                          ``delete_topic_enable``                 ``true``
``min.insync.replicas``                          ``min_insync_replicas``                 ``1``
================================================ ======================================= ==========

``leader.imbalance.max.leaders.per.interval`` is livectl's, not Kafka's: the most leaders one auto-rebalance
pass and one ``elect-leaders --all`` batch move (:mod:`core.leader_balance`); its default, Kafka's largest
int, is no bound, as Kafka (whose KRaft controller has a fixed 1000 per pass).

``unclean.leader.election.enable`` and ``min.insync.replicas`` are cluster defaults: a topic's own value
(``/config/topics/<t>``) wins. ``min.insync.replicas`` is no controller config in Kafka: livectl reads it for
its under-min-ISR figure (:mod:`core.figures`). The order of precedence is Kafka's: static settings, then
the cluster-wide dynamic default ``/config/brokers/<default>``, then the controller's own
``/config/brokers/<id>`` (:func:`effective_configs`). Kafka's ``controlled.shutdown.*`` configs are read by
the broker that shuts down (whether to ask, how often to retry), not by the controller, so they are not here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from core.errors import FormatError
from core.leader_balance import UNBOUNDED

#: Kafka name -> (field of ControllerConfig, type, Kafka's default)
CONTROLLER_CONFIGS: Mapping[str, tuple[str, type, Any]] = MappingProxyType(
    {
        "auto.leader.rebalance.enable": ("auto_leader_rebalance_enable", bool, True),
        "leader.imbalance.per.broker.percentage": ("leader_imbalance_per_broker_percentage", int, 10),
        "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_seconds", int, 300),
        "leader.imbalance.max.leaders.per.interval": ("leader_imbalance_max_leaders_per_interval", int, UNBOUNDED),
        "unclean.leader.election.enable": ("unclean_leader_election_enable", bool, False),
        "delete.topic.enable": ("delete_topic_enable", bool, True),
        "min.insync.replicas": ("min_insync_replicas", int, 1),
    }
)

#: field name -> Kafka name
KAFKA_NAMES: Mapping[str, str] = MappingProxyType({fname: kafka for kafka, (fname, _, _) in CONTROLLER_CONFIGS.items()})

#: the smallest value Kafka accepts per integer config (``atLeast`` in ``KafkaConfig``)
_MINIMUM = MappingProxyType(
    {
        "leader.imbalance.per.broker.percentage": 0,
        "leader.imbalance.check.interval.seconds": 1,
        "min.insync.replicas": 1,
        "leader.imbalance.max.leaders.per.interval": 1,
    }
)


def parse_config(name: str, text: str) -> bool | int:
    """One controller config's value from its text, as Kafka's ``ConfigDef`` parses it (booleans
    ``true``/``false`` in any case; integers in base 10 within Kafka's range). Raises
    :class:`FormatError` naming the config and the reason."""
    if name not in CONTROLLER_CONFIGS:
        raise FormatError(name, f"is not a controller config; known: {', '.join(sorted(CONTROLLER_CONFIGS))}")
    _, kind, _ = CONTROLLER_CONFIGS[name]
    value = text.strip()
    if kind is bool:
        low = value.lower()
        if low not in ("true", "false"):
            raise FormatError(
                name, f"Invalid value {text} for configuration {name}: Expected value to be either true or false"
            )
        return low == "true"
    try:
        number = int(value, 10)
    except ValueError:
        raise FormatError(name, f"Invalid value {text} for configuration {name}: Not a number of type INT") from None
    minimum = _MINIMUM.get(name, 0)
    if number < minimum or number > 2**31 - 1:
        raise FormatError(name, f"Invalid value {text} for configuration {name}: Value must be at least {minimum}")
    return number


def controller_fields(configs: Iterable[tuple[str, str]]) -> dict[str, bool | int]:
    """The :class:`core.controller.ControllerConfig` fields set by Kafka-named ``configs``; names that
    are not controller configs are skipped (``/config/brokers/<default>`` holds every dynamic broker
    config), a value that does not parse raises :class:`FormatError`."""
    out: dict[str, bool | int] = {}
    for name, text in configs:
        if name in CONTROLLER_CONFIGS:
            out[CONTROLLER_CONFIGS[name][0]] = parse_config(name, text)
    return out


def effective_configs(*layers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The controller configs of ``layers`` (lowest precedence first; Kafka's order: static, then
    ``<default>``, then the broker's own), later layers winning; only controller configs are kept."""
    merged: dict[str, str] = {}
    for layer in layers:
        merged.update((k, v) for k, v in layer.items() if k in CONTROLLER_CONFIGS)
    return tuple(sorted(merged.items()))
