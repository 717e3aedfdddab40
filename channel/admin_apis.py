"""Kafka's admin APIs that go to the controller, as livectl's admin commands, and livectl's admin results as
their responses.

A ZooKeeper-mode Kafka Admin client sends CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
ElectLeaders (43) and AlterPartitionReassignments (45) to the controller. With livectl in control the
controller's endpoint is the channel; it answers them as Kafka's controller broker does (``KafkaApis``,
``ZkAdminManager``, ``KafkaController``), by publishing livectl's own admin commands on the admin topic and
answering from livectl's admin results: the semantics are livectl's controller's, not the channel's. Both
conversions are pure apart from ``kio``; this module holds what they share (the APIs and versions served, the
values a request is held and answered as):

* :func:`channel.admin_requests.admin_request`: a request (every version Kafka 3.9 serves,
  :data:`ADMIN_SERVED`) as the commands to publish, each with a request id of its own, and what to keep to
  answer it (:class:`AdminAsk`). A command livectl's own decoder refuses is answered there with the decoder's
  Kafka error, not published (the controller would answer it so: ``INVALID_REQUEST`` carrying that error);
  what only the request's shape decides (a topic named twice, both a partition count and an assignment) is
  answered there as Kafka's ``KafkaApis`` answers it;
* :func:`channel.admin_results.item_answers`: one admin result as the answers of the items its command covers;
* :func:`channel.admin_results.admin_response`: the answers as the API's response at the request's version.

What each API becomes and when it is answered:

* **CreateTopics**: one ``create_topic`` per topic; ``numPartitions`` / ``replicationFactor`` of -1 are the
  cluster defaults (:class:`CreateDefaults`: Kafka's ``num.partitions`` and ``default.replication.factor``,
  1 and 1); ``validateOnly`` is livectl's dry run. Answered with livectl's final answer (v5+ with the
  partition count, replication factor and the topic's own configs; v7 with its topic id).
* **DeleteTopics**: one ``delete_topic`` per topic (v6 by id: the id named through ZooKeeper). Answered when
  livectl has started the deletion (its ``in_progress`` answer), as Kafka answers once the brokers dropped the
  topic from their metadata, which its controller does when the deletion starts.
* **CreatePartitions**: one ``create_partitions`` per topic; ``validateOnly`` is a dry run.
* **ElectLeaders**: one ``elect_leaders``; null partitions is every partition (the answer then lists only the
  partitions that needed an election, as Kafka's); an empty list is nothing to elect, answered at once.
* **AlterPartitionReassignments**: one ``reassign_partitions`` for the partitions with replicas and one
  ``cancel_reassignment`` for those with null replicas; answered when livectl has started (or refused) each,
  as Kafka's controller answers once it triggered the reassignment, not when it completes.

``timeoutMs`` bounds the wait for livectl's answer (:func:`channel.admin_results.timed_out`:
``REQUEST_TIMED_OUT`` per item still unanswered; the command stays with livectl's controller, which carries it
out or refuses it later). As ``ZkAdminManager``, CreateTopics, DeleteTopics and CreatePartitions with
``timeoutMs`` <= 0 answer an item livectl accepted ``REQUEST_TIMED_OUT`` (a validate-only one: its real answer).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import Any

from core.kafka.error_codes import KafkaError
from core.kafka.requests import ZERO_UUID
from core.model import TopicPartition

__all__ = [
    "ADMIN_SERVED",
    "WHOLE_REQUEST",
    "AdminApi",
    "AdminAsk",
    "CreateDefaults",
    "Item",
    "ItemAnswer",
    "TopicRef",
    "admin_request_type",
    "api_name",
    "named_answer",
    "schema_module",
]


class AdminApi(IntEnum):
    """The admin APIs a ZooKeeper-mode Admin client sends the controller, by API key."""

    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45


#: the versions the channel reads and answers: those Kafka 3.9 brokers serve (and kio 0.6.2 carries)
ADMIN_SERVED: Mapping[int, range] = MappingProxyType(
    {
        AdminApi.CREATE_TOPICS: range(0, 8),
        AdminApi.DELETE_TOPICS: range(0, 7),
        AdminApi.CREATE_PARTITIONS: range(0, 4),
        AdminApi.ELECT_LEADERS: range(0, 3),
        AdminApi.ALTER_PARTITION_REASSIGNMENTS: range(0, 1),
    }
)
_NAMES: Mapping[int, tuple[str, str]] = MappingProxyType(
    {
        AdminApi.CREATE_TOPICS: ("create_topics", "CreateTopics"),
        AdminApi.DELETE_TOPICS: ("delete_topics", "DeleteTopics"),
        AdminApi.CREATE_PARTITIONS: ("create_partitions", "CreatePartitions"),
        AdminApi.ELECT_LEADERS: ("elect_leaders", "ElectLeaders"),
        AdminApi.ALTER_PARTITION_REASSIGNMENTS: ("alter_partition_reassignments", "AlterPartitionReassignments"),
    }
)


@dataclass(frozen=True)
class TopicRef:
    """A DeleteTopics entry: the topic's name (``None``: no topic has the id) and the id it was named by
    (:data:`core.kafka.requests.ZERO_UUID` when named by name)."""

    name: str | None
    topic_id: str = ZERO_UUID


#: what an answer is about: a topic (CreateTopics, CreatePartitions), a :class:`TopicRef` (DeleteTopics) or a
#: partition (ElectLeaders, AlterPartitionReassignments)
Item = str | TopicRef | TopicPartition
#: the key of an answer for the request as a whole (the top-level error of ElectLeaders v1+ and
#: AlterPartitionReassignments): an ElectLeaders of every partition refused or unanswered names no partition
WHOLE_REQUEST = TopicRef(None, "")


@dataclass(frozen=True)
class ItemAnswer:
    """One item's answer: Kafka's error code and message (``None`` on success, as Kafka), and for a created
    topic what livectl gave it (CreateTopics v5+: partition count, replication factor, its own configs; v7:
    its id)."""

    error: int
    message: str | None = None
    topic_id: str = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CreateDefaults:
    """What CreateTopics' -1 stands for: Kafka's ``num.partitions`` and ``default.replication.factor`` (the
    controller broker's own settings in Kafka; the channel's ``--num-partitions`` and
    ``--default-replication-factor`` here), Kafka's defaults 1 and 1."""

    num_partitions: int = 1
    replication_factor: int = 1


@dataclass(frozen=True)
class AdminAsk:
    """One admin request as the channel holds it until it is answered.

    ``commands``: (request id, command JSON) to publish, in order; ``covers``: the items each request id's
    answer answers (an ElectLeaders of every partition: none, its answer lists them); ``own``: the items the
    channel answered itself; ``items``: every item in the request's order; ``configs``: the configs each
    CreateTopics topic asked for; ``configs_hidden``: the topics whose configs its principal may not see."""

    api_key: int
    version: int
    items: tuple[Item, ...]
    commands: tuple[tuple[str, str], ...] = ()
    covers: Mapping[str, tuple[Item, ...]] = field(default_factory=lambda: MappingProxyType({}))
    own: Mapping[Item, ItemAnswer] = field(default_factory=lambda: MappingProxyType({}))
    timeout_ms: int = 0
    validate_only: bool = False
    every_partition: bool = False
    configs: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=lambda: MappingProxyType({}))
    #: the CreateTopics topics whose configs the principal may not describe (v5+: answered without them, and
    #: ``topic_config_error_code`` 29 when created or refused by the channel itself)
    configs_hidden: frozenset[str] = frozenset()


def schema_module(api_key: int, version: int, kind: str) -> Any:
    """kio's ``request`` or ``response`` module (``kind``) of ``api_key`` at ``version``."""
    return importlib.import_module(f"kio.schema.{_NAMES[api_key][0]}.v{version}.{kind}")


def api_name(api_key: int) -> str:
    """Kafka's name of admin API ``api_key`` (``CreateTopics``), else the key."""
    names = _NAMES.get(api_key)
    return names[1] if names else str(api_key)


def admin_request_type(api_key: int, version: int) -> Any:
    """The kio request class of ``api_key`` at ``version`` (one of :data:`ADMIN_SERVED`)."""
    return getattr(schema_module(api_key, version, "request"), _NAMES[api_key][1] + "Request")


def _error_code(name: str) -> int:
    """Kafka's code of the error ``name`` (Kafka's ``Errors`` names, as livectl's results carry them); -1
    (``UNKNOWN_SERVER_ERROR``) for a name Kafka has no code for."""
    from kio.schema.errors import ErrorCode

    try:
        return int(ErrorCode[name.lower()].value)
    except KeyError:
        return int(KafkaError.UNKNOWN_SERVER_ERROR)


def named_answer(name: str | None, message: str | None) -> ItemAnswer:
    """The answer of Kafka's error ``name`` (as livectl's results and refusals carry it) with ``message``."""
    if not name or name == KafkaError.NONE.name:
        return ItemAnswer(0)
    code = _error_code(name)
    text = message or None
    if code == KafkaError.UNKNOWN_SERVER_ERROR and name != KafkaError.UNKNOWN_SERVER_ERROR.name:
        # livectl's own names (none is a first answer today) keep their meaning in the text
        text = f"{name}: {message}" if message else name
    return ItemAnswer(code, text)
