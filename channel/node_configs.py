"""The controller's node's own configs: DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44)
of the ``BROKER`` and ``BROKER_LOGGER`` resources named by the controller's id.

Kafka's Admin client sends a ``BROKER`` resource naming a broker id (and every ``BROKER_LOGGER`` resource) to
that node, and a ZooKeeper-mode Kafka broker answers only for its own id (``ConfigHelper.describeConfigs``,
``ConfigAdminManager.preprocess``, ``ZkAdminManager``: any other id is ``INVALID_REQUEST``, "Unexpected broker
id"). The node of livectl's controller id is the channel's endpoint, so it answers those itself, from and to
ZooKeeper in Kafka's layout (:mod:`sinks.entity_configs`, the writes ``livectl configs`` makes):

* **DescribeConfigs** ``BROKER <id>``: the dynamic configs ZooKeeper holds for the node, ``/config/brokers/<id>``
  (source ``DYNAMIC_BROKER_CONFIG``) and the cluster default ``/config/brokers/<default>``
  (``DYNAMIC_DEFAULT_BROKER_CONFIG``), the node's own value first with the default as its synonym, as Kafka
  lists synonyms. Nothing else: the node has no ``server.properties`` (no ``STATIC_BROKER_CONFIG``) and does not
  claim Kafka's defaults for settings it does not have. A name livectl does not know (neither one of its broker
  configs, :data:`core.kafka.configs.BROKER_CONFIGS`, nor a controller config it reads from there,
  :data:`core.cluster_config.CONTROLLER_CONFIGS`) is shown as Kafka shows a config whose type it cannot tell:
  sensitive, value hidden, type ``UNKNOWN``.
  ``configuration_keys`` picks names as Kafka picks them. ``BROKER_LOGGER <id>``: no logger (the node has no
  log4j), no error.
* **IncrementalAlterConfigs** ``BROKER <id>``: Kafka's checks of ``ConfigAdminManager.preprocess`` (a resource
  named twice, a config named twice, a null value to set: ``INVALID_REQUEST``), then ``SET`` and ``DELETE``
  applied to ``/config/brokers/<id>`` with a change notification, as Kafka's ``AdminZkClient.changeBrokerConfig``
  writes it (a ``DELETE`` of a config not set is no error, as in Kafka: ``kafka-reassign-partitions --verify``
  deletes the throttles of every node). A value to set must be one livectl knows and accepts
  (:func:`core.kafka.configs.broker_configs_problem`, as ``livectl configs`` checks it): Kafka's preprocess
  refuses an invalid broker config with ``INVALID_REQUEST`` and the reason. ``APPEND`` / ``SUBTRACT`` apply to
  list configs only, and none of livectl's broker configs is a list: ``INVALID_CONFIG``, Kafka's words.
  ``validateOnly``: checked, nothing written. ``BROKER_LOGGER <id>``: every logger named does not exist
  (``INVALID_CONFIG``, ``Logger x does not exist!``); none named is no error.
* **AlterConfigs** (legacy; ``kafka-configs --alter --entity-type brokers`` sends it) ``BROKER <id>``: the same
  checks on the whole new set, which replaces ``/config/brokers/<id>`` (Kafka's semantics: a config not named
  is removed). ``BROKER_LOGGER``: ``INVALID_REQUEST``, ``Unknown resource type 8``, as Kafka.

A request that names none of those resources is forwarded (:mod:`channel.forward`), and so is one that mixes
them with others, which Kafka's Admin client never sends (each node gets only its own resources): the broker
then answers the controller's resources ``INVALID_REQUEST`` itself. This module, pure apart from ``kio``, says
which requests are the node's (:func:`node_share`), what each resource asks (:func:`config_changes`) and builds
the answers; the channel reads and writes ZooKeeper.
"""

from __future__ import annotations

import datetime
import enum
import importlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from core.cluster_config import CONTROLLER_CONFIGS
from core.kafka.configs import BROKER_CONFIGS, ConfigType, broker_configs_problem
from core.kafka.error_codes import KafkaError

__all__ = [
    "ALTER_CONFIGS",
    "BROKER",
    "BROKER_LOGGER",
    "CLUSTER_REFUSED_MESSAGE",
    "CONFIGS_SERVED",
    "DESCRIBE_CONFIGS",
    "INCREMENTAL_ALTER_CONFIGS",
    "ConfigChange",
    "NodeConfigs",
    "Share",
    "alter_configs_response",
    "alter_refused",
    "config_changes",
    "describe_configs_refused",
    "describe_configs_response",
    "names_node",
    "node_share",
    "request_type",
]

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
#: the versions the channel reads and answers: those Kafka 3.9 brokers serve
CONFIGS_SERVED: Mapping[int, range] = MappingProxyType(
    {DESCRIBE_CONFIGS: range(0, 5), ALTER_CONFIGS: range(0, 3), INCREMENTAL_ALTER_CONFIGS: range(0, 2)}
)
_NAMES: Mapping[int, tuple[str, str]] = MappingProxyType(
    {
        DESCRIBE_CONFIGS: ("describe_configs", "DescribeConfigs"),
        ALTER_CONFIGS: ("alter_configs", "AlterConfigs"),
        INCREMENTAL_ALTER_CONFIGS: ("incremental_alter_configs", "IncrementalAlterConfigs"),
    }
)
#: Kafka's ``ConfigResource.Type`` ids
BROKER, BROKER_LOGGER = 4, 8
#: Kafka's ``DescribeConfigsResponse.ConfigSource`` ids
_DYNAMIC_BROKER_CONFIG, _DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
#: Kafka's ``DescribeConfigsResponse.ConfigType`` ids
_CONFIG_TYPES: Mapping[ConfigType, int] = MappingProxyType(
    {
        ConfigType.BOOLEAN: 1,
        ConfigType.STRING: 2,
        ConfigType.INT: 3,
        ConfigType.LONG: 5,
        ConfigType.DOUBLE: 6,
        ConfigType.LIST: 7,
    }
)
_UNKNOWN_TYPE = 0
#: Kafka's ``AlterConfigOp.OpType`` ids
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3
_OP_NAMES: Mapping[int, str] = MappingProxyType({_APPEND: "append", _SUBTRACT: "subtract"})
_NO_THROTTLE = datetime.timedelta(0)
_INTEGER = re.compile(r"[+-]?[0-9]+")


class Share(enum.Enum):
    """How much of a config request is the node's own: all of it, none, or some (mixed with other resources)."""

    ALL = "all"
    NONE = "none"
    SOME = "some"


@dataclass(frozen=True)
class NodeConfigs:
    """The dynamic configs ZooKeeper holds for the node: ``/config/brokers/<id>`` and ``/config/brokers/<default>``."""

    own: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    default: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class ConfigChange:
    """What one resource of an AlterConfigs or IncrementalAlterConfigs asks of the node.

    ``error`` (Kafka's code) and ``message``: refused before anything is written. Else ``replace`` (legacy
    AlterConfigs: the whole new set) or ``sets`` and ``deletes`` (IncrementalAlterConfigs); ``logger``: a
    ``BROKER_LOGGER`` resource with nothing to change."""

    resource_type: int
    resource_name: str
    error: int = 0
    message: str | None = None
    replace: Mapping[str, str] | None = None
    sets: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    deletes: tuple[str, ...] = ()
    logger: bool = False


def _module(api_key: int, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{_NAMES[api_key][0]}.v{version}.{kind}")


def request_type(api_key: int, version: int) -> Any:
    """The kio request class of ``api_key`` (one of :data:`CONFIGS_SERVED`) at ``version``."""
    return getattr(_module(api_key, version, "request"), _NAMES[api_key][1] + "Request")


def names_node(resource_type: int, resource_name: str, node_id: int) -> bool:
    """Whether the resource is the node's own: ``BROKER`` or ``BROKER_LOGGER`` named by ``node_id`` (Kafka reads
    the name as an integer: ``+0`` is broker 0)."""
    if resource_type not in (BROKER, BROKER_LOGGER) or not _INTEGER.fullmatch(resource_name):
        return False
    return int(resource_name) == node_id


def node_share(body: Any, node_id: int | None) -> Share:
    """How many of the resources of ``body`` (a DescribeConfigs, AlterConfigs or IncrementalAlterConfigs
    request) name the node ``node_id`` (``None``: the node's id is not known, none does)."""
    resources = list(body.resources)
    if node_id is None or not resources:
        return Share.NONE
    mine = sum(names_node(int(r.resource_type), str(r.resource_name), node_id) for r in resources)
    if mine == 0:
        return Share.NONE
    return Share.ALL if mine == len(resources) else Share.SOME


def _code(code: int) -> Any:
    from kio.schema.errors import ErrorCode

    return ErrorCode(code)


def _make(cls: Any, **values: Any) -> Any:
    names = set(cls.__dataclass_fields__)
    return cls(**{k: v for k, v in values.items() if k in names})


def _config_type(name: str) -> int | None:
    """Kafka's ``ConfigType`` id of a config livectl knows; ``None`` for one it does not."""
    key = BROKER_CONFIGS.get(name)
    if key is not None:
        return _CONFIG_TYPES.get(key.type, _UNKNOWN_TYPE)
    if name in CONTROLLER_CONFIGS:
        return _CONFIG_TYPES[ConfigType.BOOLEAN if CONTROLLER_CONFIGS[name][1] is bool else ConfigType.INT]
    return None


def _entries(m: Any, version: int, configs: NodeConfigs, keys: Sequence[str] | None, synonyms: bool) -> tuple[Any, ...]:
    names = sorted(set(configs.own) | set(configs.default))
    if keys:
        names = [n for n in names if n in keys]
    out = []
    for name in names:
        kind = _config_type(name)
        # Kafka's KafkaConfig.maybeSensitive: a config whose type the answerer cannot tell may be a password
        hidden = kind is None
        found = []
        if name in configs.own:
            found.append((configs.own[name], _DYNAMIC_BROKER_CONFIG))
        if name in configs.default:
            found.append((configs.default[name], _DYNAMIC_DEFAULT_BROKER_CONFIG))
        value, source = found[0]
        fields: dict[str, Any] = {
            "name": name,
            "value": None if hidden else value,
            "read_only": False,
            "is_default": False,
            "is_sensitive": hidden,
            "config_source": source,
            "config_type": _UNKNOWN_TYPE if kind is None else kind,
            "documentation": None,
        }
        if version >= 1:
            listed = found if synonyms else []
            fields["synonyms"] = tuple(
                m.DescribeConfigsSynonym(name=name, value=None if hidden else v, source=s) for v, s in listed
            )
        out.append(_make(m.DescribeConfigsResourceResult, **fields))
    return tuple(out)


def describe_configs_response(
    version: int, body: Any, configs: NodeConfigs | None, error_message: str | None = None
) -> Any:
    """Kafka's DescribeConfigsResponse at ``version`` to ``body``, every resource of which is the node's own
    (:func:`node_share`), from ``configs``; ``error_message``: ZooKeeper could not be read
    (``UNKNOWN_SERVER_ERROR`` for each ``BROKER`` resource)."""
    m = _module(DESCRIBE_CONFIGS, version, "response")
    synonyms = bool(getattr(body, "include_synonyms", False))
    results = []
    for r in body.resources:
        kind, name = int(r.resource_type), str(r.resource_name)
        error = 0
        message: str | None = None
        entries: tuple[Any, ...] = ()
        if kind == BROKER and configs is None:
            error, message = int(KafkaError.UNKNOWN_SERVER_ERROR), error_message
        elif kind == BROKER and configs is not None:
            keys = None if r.configuration_keys is None else [str(k) for k in r.configuration_keys]
            entries = _entries(m, version, configs, keys, synonyms)
        results.append(
            m.DescribeConfigsResult(
                error_code=_code(error),
                error_message=message,
                resource_type=kind,
                resource_name=name,
                configs=entries,
            )
        )
    return m.DescribeConfigsResponse(throttle_time=_NO_THROTTLE, results=tuple(results))


def _duplicates(items: Iterable[Any]) -> set[Any]:
    seen: set[Any] = set()
    twice: set[Any] = set()
    for item in items:
        (twice if item in seen else seen).add(item)
    return twice


def _refused(kind: int, name: str, code: KafkaError, message: str) -> ConfigChange:
    return ConfigChange(kind, name, int(code), message)


def _incremental(kind: int, name: str, configs: Sequence[Any]) -> ConfigChange:
    if kind == BROKER_LOGGER:
        if configs:
            message = f"Logger {configs[0].name} does not exist! (livectl's controller node has no log4j loggers)"
            return _refused(kind, name, KafkaError.INVALID_CONFIG, message)
        return ConfigChange(kind, name, logger=True)
    sets: dict[str, str] = {}
    deletes: list[str] = []
    for c in configs:
        op, key = int(c.config_operation), str(c.name)
        if op == _SET:
            sets[key] = str(c.value)
        elif op == _DELETE:
            deletes.append(key)
        elif op in _OP_NAMES:
            return _refused(
                kind,
                name,
                KafkaError.INVALID_CONFIG,
                f"Config value {_OP_NAMES[op]} is not allowed for config key: {key}",
            )
        else:
            return _refused(kind, name, KafkaError.INVALID_REQUEST, f"Unknown operations type {op}")
    problem = broker_configs_problem(sets)
    if problem is not None:
        return _refused(kind, name, KafkaError.INVALID_REQUEST, problem)
    return ConfigChange(kind, name, sets=MappingProxyType(sets), deletes=tuple(deletes))


def _legacy(kind: int, name: str, configs: Sequence[Any]) -> ConfigChange:
    if kind == BROKER_LOGGER:
        return _refused(kind, name, KafkaError.INVALID_REQUEST, f"Unknown resource type {BROKER_LOGGER}")
    new = {str(c.name): str(c.value) for c in configs}
    problem = broker_configs_problem(new)
    if problem is not None:
        return _refused(kind, name, KafkaError.INVALID_REQUEST, problem)
    return ConfigChange(kind, name, replace=MappingProxyType(new))


#: Kafka's message of ``CLUSTER_AUTHORIZATION_FAILED`` (``Errors.message()``)
CLUSTER_REFUSED_MESSAGE = "Cluster authorization failed."


def describe_configs_refused(version: int, body: Any, code: int) -> Any:
    """Kafka's DescribeConfigsResponse at ``version`` to one without ``DESCRIBE_CONFIGS`` on the ``Cluster``
    (``ConfigHelper``): each resource (the node's ``BROKER`` and ``BROKER_LOGGER``) answered ``code`` with
    Kafka's message and no configs."""
    m = _module(DESCRIBE_CONFIGS, version, "response")
    results = tuple(
        m.DescribeConfigsResult(
            error_code=_code(code),
            error_message=CLUSTER_REFUSED_MESSAGE,
            resource_type=int(r.resource_type),
            resource_name=str(r.resource_name),
            configs=(),
        )
        for r in body.resources
    )
    return m.DescribeConfigsResponse(throttle_time=_NO_THROTTLE, results=results)


def alter_refused(api_key: int, change: ConfigChange, code: int) -> tuple[int, str | None] | None:
    """Kafka's answer to ``change`` from one without ``ALTER_CONFIGS`` on the ``Cluster`` (``KafkaApis``):
    ``code`` after the checks of ``ConfigAdminManager.preprocess`` (a change they refused keeps its answer:
    ``None``), with no message; a ``BROKER_LOGGER`` resource of IncrementalAlterConfigs is authorized before
    its loggers are looked at, with Kafka's message."""
    if api_key == INCREMENTAL_ALTER_CONFIGS and change.resource_type == BROKER_LOGGER:
        if change.error in (0, KafkaError.INVALID_CONFIG):
            return code, CLUSTER_REFUSED_MESSAGE
        return None
    return None if change.error else (code, None)


def config_changes(api_key: int, body: Any) -> list[ConfigChange]:
    """What each resource of ``body`` (an AlterConfigs or IncrementalAlterConfigs request, every resource of which
    is the node's own) asks, in the request's order, with Kafka's refusals of ``ConfigAdminManager.preprocess``
    first: a resource named twice, a config named twice, a null value (to set)."""
    incremental = api_key == INCREMENTAL_ALTER_CONFIGS
    twice = _duplicates((int(r.resource_type), str(r.resource_name)) for r in body.resources)
    out = []
    for r in body.resources:
        kind, name = int(r.resource_type), str(r.resource_name)
        configs = list(r.configs)
        if (kind, name) in twice:
            out.append(_refused(kind, name, KafkaError.INVALID_REQUEST, "Each resource must appear at most once."))
            continue
        if _duplicates(str(c.name) for c in configs):
            out.append(_refused(kind, name, KafkaError.INVALID_REQUEST, "Error due to duplicate config keys"))
            continue
        nulls = [
            str(c.name) for c in configs if c.value is None and not (incremental and int(c.config_operation) == _DELETE)
        ]
        if nulls:
            message = "Null value not supported for : " + ", ".join(nulls)
            out.append(_refused(kind, name, KafkaError.INVALID_REQUEST, message))
            continue
        out.append(_incremental(kind, name, configs) if incremental else _legacy(kind, name, configs))
    return out


def alter_configs_response(api_key: int, version: int, answers: Sequence[tuple[ConfigChange, int, str | None]]) -> Any:
    """Kafka's AlterConfigsResponse or IncrementalAlterConfigsResponse at ``version``: each resource's
    (change, error code, message), in the request's order."""
    m = _module(api_key, version, "response")
    responses = tuple(
        m.AlterConfigsResourceResponse(
            error_code=_code(code),
            error_message=message,
            resource_type=change.resource_type,
            resource_name=change.resource_name,
        )
        for change, code, message in answers
    )
    cls = getattr(m, _NAMES[api_key][1] + "Response")
    return cls(throttle_time=_NO_THROTTLE, responses=responses)
