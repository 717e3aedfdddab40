"""Kafka's admin APIs that go to the controller, as livectl's admin commands, and livectl's admin results as
their responses.

A ZooKeeper-mode Kafka Admin client sends CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
ElectLeaders (43) and AlterPartitionReassignments (45) to the controller. With livectl in control the
controller's endpoint is the channel; it answers them as Kafka's controller broker does (``KafkaApis``,
``ZkAdminManager``, ``KafkaController``), by publishing livectl's own admin commands on the admin topic and
answering from livectl's admin results: the semantics are livectl's controller's, not this module's. This
module, pure apart from ``kio``, is both conversions:

* :func:`admin_request`: a request (every version Kafka 3.9 serves, :data:`ADMIN_SERVED`) as the commands to
  publish, each with a request id of its own, and what to keep to answer it (:class:`AdminAsk`). A command
  livectl's own decoder refuses is answered here with the decoder's Kafka error, not published (the controller
  would answer it so: ``INVALID_REQUEST`` carrying that error); what only the request's shape decides (a topic
  named twice, both a partition count and an assignment) is answered here as Kafka's ``KafkaApis`` answers it;
* :func:`item_answers`: one admin result as the answers of the items its command covers;
* :func:`admin_response`: the answers as the API's response at the request's version.

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

``timeoutMs`` bounds the wait for livectl's answer (:func:`timed_out`: ``REQUEST_TIMED_OUT`` per item still
unanswered; the command stays with livectl's controller, which carries it out or refuses it later). As
``ZkAdminManager``, CreateTopics, DeleteTopics and CreatePartitions with ``timeoutMs`` <= 0 answer an item
livectl accepted ``REQUEST_TIMED_OUT`` (a validate-only one: its real answer).
"""

from __future__ import annotations

import datetime
import importlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from channel.convert import kafka_uuid, uuid_text
from core.codec.events import EVENT_VERSION, decode_event
from core.decisions import AdminResult, AdminStatus
from core.errors import FormatError
from core.events import (
    CancelReassignment,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    ElectLeaders,
    ReassignPartitions,
)
from core.kafka.error_codes import KafkaError
from core.kafka.requests import ZERO_UUID
from core.model import TopicPartition

__all__ = [
    "ADMIN_SERVED",
    "ALTER_PARTITION_REASSIGNMENTS",
    "CREATE_PARTITIONS",
    "CREATE_TOPICS",
    "DELETE_TOPICS",
    "ELECT_LEADERS",
    "WHOLE_REQUEST",
    "AdminAsk",
    "CreateDefaults",
    "ItemAnswer",
    "TopicRef",
    "admin_request",
    "admin_request_type",
    "admin_response",
    "item_answers",
    "timed_out",
]

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS = 19, 20, 37, 43, 45

#: the versions the channel reads and answers: those Kafka 3.9 brokers serve (and kio 0.6.2 carries)
ADMIN_SERVED: Mapping[int, range] = MappingProxyType(
    {
        CREATE_TOPICS: range(0, 8),
        DELETE_TOPICS: range(0, 7),
        CREATE_PARTITIONS: range(0, 4),
        ELECT_LEADERS: range(0, 3),
        ALTER_PARTITION_REASSIGNMENTS: range(0, 1),
    }
)
_NAMES: Mapping[int, tuple[str, str]] = MappingProxyType(
    {
        CREATE_TOPICS: ("create_topics", "CreateTopics"),
        DELETE_TOPICS: ("delete_topics", "DeleteTopics"),
        CREATE_PARTITIONS: ("create_partitions", "CreatePartitions"),
        ELECT_LEADERS: ("elect_leaders", "ElectLeaders"),
        ALTER_PARTITION_REASSIGNMENTS: ("alter_partition_reassignments", "AlterPartitionReassignments"),
    }
)
#: the APIs whose accepted items ``timeoutMs`` <= 0 answers ``REQUEST_TIMED_OUT`` (``ZkAdminManager``'s rule)
_NO_WAIT_TIMES_OUT = frozenset({CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS})
#: ``config_source`` of a topic's own config in CreateTopics v5+ (Kafka's ``DYNAMIC_TOPIC_CONFIG``)
_TOPIC_CONFIG_SOURCE = 1
_NO_THROTTLE = datetime.timedelta(0)


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
    CreateTopics topic asked for."""

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


def _module(api_key: int, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{_NAMES[api_key][0]}.v{version}.{kind}")


def admin_request_type(api_key: int, version: int) -> Any:
    """The kio request class of ``api_key`` at ``version`` (one of :data:`ADMIN_SERVED`)."""
    return getattr(_module(api_key, version, "request"), _NAMES[api_key][1] + "Request")


def _error_code(name: str) -> int:
    """Kafka's code of the error ``name`` (Kafka's ``Errors`` names, as livectl's results carry them); -1
    (``UNKNOWN_SERVER_ERROR``) for a name Kafka has no code for."""
    from kio.schema.errors import ErrorCode

    try:
        return int(ErrorCode[name.lower()].value)
    except KeyError:
        return int(KafkaError.UNKNOWN_SERVER_ERROR)


def _answer(name: str | None, message: str | None) -> ItemAnswer:
    if not name or name == KafkaError.NONE.name:
        return ItemAnswer(0)
    code = _error_code(name)
    text = message or None
    if code == KafkaError.UNKNOWN_SERVER_ERROR and name != KafkaError.UNKNOWN_SERVER_ERROR.name:
        # livectl's own names (none is a first answer today) keep their meaning in the text
        text = f"{name}: {message}" if message else name
    return ItemAnswer(code, text)


def _refusal(result: AdminResult) -> ItemAnswer:
    """A whole command's error: a command refused at livectl's edge is ``INVALID_REQUEST`` carrying the Kafka
    error of the limit it broke (``details.kafka_error``, leading the message): that error is the answer."""
    name, message = result.error, result.message
    kafka_error = result.details.get("kafka_error")
    if name == KafkaError.INVALID_REQUEST.name and isinstance(kafka_error, str) and kafka_error != name:
        name = kafka_error
        message = message.removeprefix(f"{kafka_error}: ")
    return _answer(name or KafkaError.UNKNOWN_SERVER_ERROR.name, message)


def _format_refusal(e: FormatError) -> ItemAnswer:
    """The answer livectl's edge gives a command its decoder refuses (``streaming``'s rejected result)."""
    return _answer(e.error, f"{e.field}: {e.reason}")


def _checked(command: Mapping[str, Any]) -> FormatError | None:
    try:
        decode_event(command)
    except FormatError as e:
        return e
    return None


class _Builder:
    """Collects one request's commands and own answers."""

    def __init__(self, new_id: Callable[[], str]) -> None:
        self.new_id = new_id
        self.items: dict[Item, None] = {}  # in the request's order
        self.commands: list[tuple[str, str]] = []
        self.covers: dict[str, tuple[Item, ...]] = {}
        self.own: dict[Item, ItemAnswer] = {}

    def item(self, item: Item) -> None:
        self.items.setdefault(item)

    def answer(self, item: Item, answer: ItemAnswer) -> None:
        self.item(item)
        self.own[item] = answer

    def command(self, kind: str, fields: Mapping[str, Any], covers: Sequence[Item]) -> None:
        """Publish ``kind`` with ``fields`` for ``covers``; refused by livectl's decoder: answered now."""
        request_id = self.new_id()
        body = {"version": EVENT_VERSION, "type": kind, "request_id": request_id, **fields}
        for it in covers:
            self.item(it)
        refused = _checked(body)
        if refused is not None:
            for it in covers:
                self.own[it] = _format_refusal(refused)
            return
        self.commands.append((request_id, json.dumps(body, separators=(",", ":"), sort_keys=True)))
        self.covers[request_id] = tuple(covers)

    def ask(self, api_key: int, version: int, timeout_ms: int, **extra: Any) -> AdminAsk:
        return AdminAsk(
            api_key,
            version,
            tuple(self.items),
            tuple(self.commands),
            MappingProxyType(dict(self.covers)),
            MappingProxyType(dict(self.own)),
            timeout_ms,
            **extra,
        )


def _timeout_ms(body: Any) -> int:
    return int(body.timeout.total_seconds() * 1000)


def _dry(validate_only: bool) -> dict[str, Any]:
    return {"dry_run": True} if validate_only else {}


def _duplicates(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    twice: list[str] = []
    for n in names:
        if n in seen and n not in twice:
            twice.append(n)
        seen.add(n)
    return twice


def _create_topics(b: _Builder, version: int, body: Any, defaults: CreateDefaults) -> AdminAsk:
    validate_only = bool(body.validate_only) if version >= 1 else False
    twice = _duplicates(str(t.name) for t in body.topics)
    if twice:
        # Kafka's message also names the client id, which the channel does not keep
        message = f"Create topics request contains multiple entries for the following topics: {','.join(twice)}"
        for name in twice:
            b.answer(name, ItemAnswer(KafkaError.INVALID_REQUEST, message))
    configs: dict[str, tuple[tuple[str, str], ...]] = {}
    for t in body.topics:
        name = str(t.name)
        if name in twice:
            continue
        nulls = [str(c.name) for c in t.configs if c.value is None]
        if nulls:
            b.answer(
                name,
                ItemAnswer(KafkaError.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}"),
            )
            continue
        partitions, rf = int(t.num_partitions), int(t.replication_factor)
        if t.assignments and (partitions != -1 or rf != -1):
            b.answer(
                name,
                ItemAnswer(
                    KafkaError.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                ),
            )
            continue
        topic_configs = {str(c.name): str(c.value) for c in t.configs}
        configs[name] = tuple(sorted(topic_configs.items()))
        fields: dict[str, Any] = {"topic": name, "configs": topic_configs, **_dry(validate_only)}
        if t.assignments:
            # the request's own partition numbering: livectl's decoder judges it (0..n-1, one replication factor)
            fields["replica_assignment"] = {
                str(int(a.partition_index)): [int(r) for r in a.broker_ids] for a in t.assignments
            }
        else:
            fields["partitions"] = defaults.num_partitions if partitions == -1 else partitions
            fields["replication_factor"] = defaults.replication_factor if rf == -1 else rf
        b.command(CreateTopic.TYPE, fields, [name])
    return b.ask(
        CREATE_TOPICS, version, _timeout_ms(body), validate_only=validate_only, configs=MappingProxyType(configs)
    )


def _delete_topics(b: _Builder, version: int, body: Any, topic_names: Callable[[str], str | None]) -> AdminAsk:
    refs: list[TopicRef] = []
    if version >= 6:
        entries = [(t.name, uuid_text(t.topic_id)) for t in body.topics]
        if any(name is not None and tid != ZERO_UUID for name, tid in entries):
            # Kafka 3.9's KafkaApis throws for the whole request: every entry answers INVALID_REQUEST
            for name, tid in entries:
                b.answer(
                    TopicRef(name, tid),
                    ItemAnswer(KafkaError.INVALID_REQUEST, "Topic name and topic ID can not both be specified."),
                )
            return b.ask(DELETE_TOPICS, version, _timeout_ms(body))
        for name, tid in entries:
            # an entry naming neither is no topic, as one whose id no topic has (KafkaApis: UNKNOWN_TOPIC_ID)
            named = None if name is None else str(name)
            refs.append(TopicRef(named) if tid == ZERO_UUID else TopicRef(topic_names(tid), tid))
    else:
        refs = [TopicRef(str(n)) for n in body.topic_names]
    for ref in refs:
        if ref in b.items:
            continue  # Kafka deletes a set of topics
        if ref.name is None:
            b.answer(ref, ItemAnswer(KafkaError.UNKNOWN_TOPIC_ID))
            continue
        b.command(DeleteTopic.TYPE, {"topic": ref.name}, [ref])
    return b.ask(DELETE_TOPICS, version, _timeout_ms(body))


def _create_partitions(b: _Builder, version: int, body: Any) -> AdminAsk:
    validate_only = bool(body.validate_only)
    twice = set(_duplicates(str(t.name) for t in body.topics))
    for t in body.topics:
        name = str(t.name)
        if name in twice:
            b.answer(name, ItemAnswer(KafkaError.INVALID_REQUEST, "Duplicate topic in request."))
            continue
        fields: dict[str, Any] = {"topic": name, "total_count": int(t.count), **_dry(validate_only)}
        if t.assignments is not None:
            fields["replica_assignment"] = {str(i): [int(r) for r in a.broker_ids] for i, a in enumerate(t.assignments)}
        b.command(CreatePartitions.TYPE, fields, [name])
    return b.ask(CREATE_PARTITIONS, version, _timeout_ms(body), validate_only=validate_only)


def _elect_leaders(b: _Builder, version: int, body: Any) -> AdminAsk:
    election = int(body.election_type) if version >= 1 else 0
    timeout_ms = _timeout_ms(body)
    unknown = ItemAnswer(KafkaError.INVALID_REQUEST, f"Unknown election type: {election}")
    if body.topic_partitions is None:
        if election not in (0, 1):
            b.answer(WHOLE_REQUEST, unknown)
            return b.ask(ELECT_LEADERS, version, timeout_ms, every_partition=True)
        kind = "PREFERRED" if election == 0 else "UNCLEAN"
        b.command(ElectLeaders.TYPE, {"election_type": kind}, [])
        return b.ask(ELECT_LEADERS, version, timeout_ms, every_partition=True)
    # Kafka elects a set of partitions
    tps = list(dict.fromkeys(TopicPartition(str(t.topic), int(p)) for t in body.topic_partitions for p in t.partitions))
    if election not in (0, 1):
        for tp in tps:
            b.answer(tp, unknown)
        return b.ask(ELECT_LEADERS, version, timeout_ms)
    kind = "PREFERRED" if election == 0 else "UNCLEAN"
    _per_partition(b, ElectLeaders.TYPE, {"election_type": kind}, [(tp, {}) for tp in tps])
    return b.ask(ELECT_LEADERS, version, timeout_ms)


def _per_partition(
    b: _Builder, kind: str, fields: Mapping[str, Any], entries: Sequence[tuple[TopicPartition, Mapping[str, Any]]]
) -> None:
    """One command of ``kind`` for ``entries``; an entry livectl's decoder refuses on its own is answered with
    that refusal and the others go on, as Kafka judges each partition apart."""
    if not entries:
        return
    good: list[tuple[TopicPartition, Mapping[str, Any]]] = []
    for tp, extra in entries:
        alone = {"version": EVENT_VERSION, "type": kind, "request_id": "-", **fields}
        alone["partitions"] = [{"topic": tp.topic, "partition": tp.partition, **extra}]
        refused = _checked(alone)
        if refused is None:
            good.append((tp, extra))
        else:
            b.answer(tp, _format_refusal(refused))
    if good:
        listed = [{"topic": tp.topic, "partition": tp.partition, **extra} for tp, extra in good]
        b.command(kind, {**fields, "partitions": listed}, [tp for tp, _ in good])


def _alter_partition_reassignments(b: _Builder, version: int, body: Any) -> AdminAsk:
    targets: dict[TopicPartition, tuple[int, ...] | None] = {}
    for t in body.topics:
        for p in t.partitions:
            tp = TopicPartition(str(t.name), int(p.partition_index))
            # Kafka keeps the last entry of a partition named twice (a map)
            targets[tp] = None if p.replicas is None else tuple(int(r) for r in p.replicas)
            b.item(tp)
    moves: list[tuple[TopicPartition, Mapping[str, Any]]] = [
        (tp, {"replicas": list(r)}) for tp, r in targets.items() if r is not None
    ]
    cancels: list[tuple[TopicPartition, Mapping[str, Any]]] = [(tp, {}) for tp, r in targets.items() if r is None]
    _per_partition(b, ReassignPartitions.TYPE, {}, moves)
    _per_partition(b, CancelReassignment.TYPE, {}, cancels)
    return b.ask(ALTER_PARTITION_REASSIGNMENTS, version, _timeout_ms(body))


def admin_request(
    api_key: int,
    version: int,
    body: Any,
    new_id: Callable[[], str],
    *,
    defaults: CreateDefaults = CreateDefaults(),
    topic_names: Callable[[str], str | None] = lambda _: None,
) -> AdminAsk:
    """What request ``body`` (a kio entity of ``api_key`` at ``version``) becomes. ``new_id`` makes each
    command's request id; ``topic_names``: topic id (base64) -> name, or ``None`` (DeleteTopics v6 by id)."""
    b = _Builder(new_id)
    if api_key == CREATE_TOPICS:
        return _create_topics(b, version, body, defaults)
    if api_key == DELETE_TOPICS:
        return _delete_topics(b, version, body, topic_names)
    if api_key == CREATE_PARTITIONS:
        return _create_partitions(b, version, body)
    if api_key == ELECT_LEADERS:
        return _elect_leaders(b, version, body)
    if api_key == ALTER_PARTITION_REASSIGNMENTS:
        return _alter_partition_reassignments(b, version, body)
    raise ValueError(f"api {api_key} is not an admin API the channel answers")


def _tp_of(key: str) -> TopicPartition | None:
    topic, sep, partition = key.rpartition("-")
    if not sep or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


def _partition_answers(result: AdminResult) -> dict[TopicPartition, ItemAnswer]:
    entries = result.details.get("partitions")
    out: dict[TopicPartition, ItemAnswer] = {}
    if not isinstance(entries, Mapping):
        return out
    for key, entry in entries.items():
        tp = _tp_of(str(key))
        if tp is None or not isinstance(entry, Mapping):
            continue
        message = entry.get("message")
        out[tp] = _answer(str(entry.get("error") or ""), str(message) if message else None)
    return out


def _created(ask: AdminAsk, topic: str, result: AdminResult) -> ItemAnswer:
    placed = result.details.get("partitions")
    partitions = len(placed) if isinstance(placed, Mapping) else -1
    first = placed.get("0") if isinstance(placed, Mapping) else None
    rf = len(first) if isinstance(first, Sequence) else -1
    topic_id = result.details.get("topic_id")
    return ItemAnswer(
        0,
        None,
        # Kafka's validateOnly gives no id: the topic does not exist
        topic_id if isinstance(topic_id, str) and not ask.validate_only else ZERO_UUID,
        partitions,
        rf,
        ask.configs.get(topic, ()),
    )


def item_answers(ask: AdminAsk, request_id: str, result: AdminResult) -> dict[Item, ItemAnswer]:
    """The answers livectl's ``result`` for command ``request_id`` of ``ask`` gives its items. The first
    result of a command is its answer: livectl's ``in_progress`` (a deletion or reassignment started) is
    Kafka's success."""
    covered = ask.covers.get(request_id)
    if covered is None:
        return {}
    answers: dict[Item, ItemAnswer] = {}
    if ask.api_key in (ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS):
        per_partition = _partition_answers(result)
        whole = _refusal(result) if result.status is AdminStatus.ERROR else ItemAnswer(0)
        if ask.every_partition:
            for tp, answer in per_partition.items():
                answers[tp] = answer
            if not per_partition and result.status is AdminStatus.ERROR:
                answers[WHOLE_REQUEST] = whole
        for it in covered:
            answers[it] = per_partition.get(it, whole) if isinstance(it, TopicPartition) else whole
    else:
        for it in covered:
            if result.status is AdminStatus.ERROR:
                answers[it] = _refusal(result)
            elif ask.api_key == CREATE_TOPICS:
                answers[it] = _created(ask, str(it), result)
            else:
                answers[it] = ItemAnswer(0)
    if ask.api_key in _NO_WAIT_TIMES_OUT and ask.timeout_ms <= 0 and not ask.validate_only:
        answers = {it: ItemAnswer(KafkaError.REQUEST_TIMED_OUT) if a.error == 0 else a for it, a in answers.items()}
    return answers


def timed_out(ask: AdminAsk, request_id: str, waited_ms: int) -> dict[Item, ItemAnswer]:
    """The answers of the items of command ``request_id`` livectl did not answer in time: ``REQUEST_TIMED_OUT``
    (an ElectLeaders of every partition names none: its top-level error)."""
    late = ItemAnswer(
        KafkaError.REQUEST_TIMED_OUT,
        f"livectl's controller did not answer within {waited_ms} ms; its command (request id {request_id}) stays "
        "with it and is carried out or refused later",
    )
    covered = ask.covers.get(request_id, ())
    if ask.every_partition and not covered:
        return {WHOLE_REQUEST: late}
    return dict.fromkeys(covered, late)


def admin_response(ask: AdminAsk, answers: Mapping[Item, ItemAnswer]) -> Any:
    """Kafka's response to ``ask`` at its version: each item's answer (``answers``, then the channel's own)."""
    merged = {**answers, **ask.own}
    m = _module(ask.api_key, ask.version, "response")
    if ask.api_key == CREATE_TOPICS:
        return _make(
            m.CreateTopicsResponse,
            throttle_time=_NO_THROTTLE,
            topics=tuple(_topic_result(m, ask, str(t), merged[t]) for t in ask.items),
        )
    if ask.api_key == DELETE_TOPICS:
        return _make(
            m.DeleteTopicsResponse,
            throttle_time=_NO_THROTTLE,
            responses=tuple(_deleted(m, ask, t, merged[t]) for t in ask.items if isinstance(t, TopicRef)),
        )
    if ask.api_key == CREATE_PARTITIONS:
        results = tuple(
            m.CreatePartitionsTopicResult(
                name=str(t), error_code=_code(merged[t].error), error_message=merged[t].message
            )
            for t in ask.items
        )
        return m.CreatePartitionsResponse(throttle_time=_NO_THROTTLE, results=results)
    top = merged.pop(WHOLE_REQUEST, ItemAnswer(0))
    tps = [tp for tp in {**dict.fromkeys(ask.items), **dict.fromkeys(merged)} if isinstance(tp, TopicPartition)]
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp)
    if ask.api_key == ELECT_LEADERS:
        elected = tuple(
            m.ReplicaElectionResult(
                topic=topic,
                partition_result=tuple(
                    m.PartitionResult(
                        partition_id=tp.partition, error_code=_code(merged[tp].error), error_message=merged[tp].message
                    )
                    for tp in group
                ),
            )
            for topic, group in by_topic.items()
        )
        return _make(
            m.ElectLeadersResponse,
            throttle_time=_NO_THROTTLE,
            error_code=_code(top.error),
            replica_election_results=elected,
        )
    moved = tuple(
        m.ReassignableTopicResponse(
            name=topic,
            partitions=tuple(
                m.ReassignablePartitionResponse(
                    partition_index=tp.partition, error_code=_code(merged[tp].error), error_message=merged[tp].message
                )
                for tp in group
            ),
        )
        for topic, group in by_topic.items()
    )
    return m.AlterPartitionReassignmentsResponse(
        throttle_time=_NO_THROTTLE, error_code=_code(top.error), error_message=top.message, responses=moved
    )


def _code(code: int) -> Any:
    from kio.schema.errors import ErrorCode

    return ErrorCode(code)


def _make(cls: Any, **values: Any) -> Any:
    names = set(cls.__dataclass_fields__)
    return cls(**{k: v for k, v in values.items() if k in names})


def _topic_result(m: Any, ask: AdminAsk, topic: str, a: ItemAnswer) -> Any:
    ok = a.error == 0
    configs = None
    if ask.version >= 5 and ok:
        configs = tuple(
            m.CreatableTopicConfigs(
                name=k, value=v, read_only=False, config_source=_TOPIC_CONFIG_SOURCE, is_sensitive=False
            )
            for k, v in a.configs
        )
    return _make(
        m.CreatableTopicResult,
        name=topic,
        topic_id=kafka_uuid(a.topic_id),
        error_code=_code(a.error),
        error_message=a.message,
        num_partitions=a.num_partitions if ok else -1,
        replication_factor=a.replication_factor if ok else -1,
        configs=configs,
    )


def _deleted(m: Any, ask: AdminAsk, ref: TopicRef, a: ItemAnswer) -> Any:
    code = a.error
    if code == KafkaError.TOPIC_DELETION_DISABLED and ask.version < 3:
        code = KafkaError.INVALID_REQUEST  # Kafka's KafkaApis: the error older clients know
    return _make(
        m.DeletableTopicResult,
        name=ref.name,
        topic_id=kafka_uuid(ref.topic_id),
        error_code=_code(code),
        error_message=a.message,
    )
