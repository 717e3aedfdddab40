"""Kafka's admin requests to the controller as livectl's admin commands (:mod:`channel.admin_apis` says what each
API becomes).

:func:`admin_request` reads one request (a kio entity of an API and version in
:data:`channel.admin_apis.ADMIN_SERVED`) into an :class:`channel.admin_apis.AdminAsk`: the commands to publish,
each with a request id of its own, and the items answered here — those livectl's own decoder refuses (with the
decoder's Kafka error) and those only the request's shape decides (a topic named twice, both a partition count
and an assignment), as Kafka's ``KafkaApis`` answers them. Pure apart from ``kio``'s values and the ``allowed``
it is given.

``allowed`` (:data:`channel.acls.Check`) says what the request's principal may do; each API asks it what Kafka
3.9's ``KafkaApis`` asks its authorizer, and an item refused is answered here and never published:

* CreateTopics: ``CREATE`` on the ``Cluster`` or else on the topic, else ``TOPIC_AUTHORIZATION_FAILED`` (29,
  "Authorization failed."; a topic named twice is ``INVALID_REQUEST`` first); without ``DESCRIBE_CONFIGS`` on
  the topic (v5+), one created is answered without its configs, partition count and replication factor, and
  it and one refused here (named twice, not authorized) with ``topic_config_error_code`` 29;
* DeleteTopics: ``DELETE`` on the topic, else 29; named by an id (v6): ``DESCRIBE`` on the topic too, else 29
  without the name (Kafka does not tell whom it may not describe what the id names);
* CreatePartitions: ``ALTER`` on the topic, else 29 ("The topic authorization is failed."; a topic named twice
  is ``INVALID_REQUEST`` first);
* ElectLeaders: ``ALTER`` on the ``Cluster``, else ``CLUSTER_AUTHORIZATION_FAILED`` (31) at the top level (v1+)
  and for every partition named;
* AlterPartitionReassignments: ``ALTER`` on the ``Cluster``, else 31 at the top level and for every partition
  named (Kafka's error response of the request).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from channel.acls import CLUSTER_NAME, TOPIC_AUTHORIZATION_FAILED, Check, Operation, Resource, allow_all
from channel.admin_apis import (
    WHOLE_REQUEST,
    AdminApi,
    AdminAsk,
    CreateDefaults,
    Item,
    ItemAnswer,
    TopicRef,
    named_answer,
)
from channel.authz import CLUSTER_AUTHORIZATION_FAILED
from channel.convert import uuid_text
from core.codec.events import EVENT_VERSION, decode_event
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

__all__ = ["admin_request"]

#: Kafka's own ``num.partitions`` and ``default.replication.factor``
_KAFKA_DEFAULTS = CreateDefaults()
#: Kafka's answers of an item its principal may not touch
_TOPIC_REFUSED = TOPIC_AUTHORIZATION_FAILED
_CLUSTER_REFUSED = ItemAnswer(CLUSTER_AUTHORIZATION_FAILED)


def _format_refusal(e: FormatError) -> ItemAnswer:
    """The answer livectl's edge gives a command its decoder refuses (``streaming``'s rejected result)."""
    return named_answer(e.error, f"{e.field}: {e.reason}")


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


def _create_topics(b: _Builder, version: int, body: Any, defaults: CreateDefaults, allowed: Check) -> AdminAsk:
    validate_only = bool(body.validate_only) if version >= 1 else False
    twice = _duplicates(str(t.name) for t in body.topics)
    if twice:
        # Kafka's message also names the client id, which the channel does not keep
        message = f"Create topics request contains multiple entries for the following topics: {','.join(twice)}"
        for name in twice:
            b.answer(name, ItemAnswer(KafkaError.INVALID_REQUEST, message))
    configs: dict[str, tuple[tuple[str, str], ...]] = {}
    hidden: set[str] = set()
    on_cluster = allowed(Operation.CREATE, Resource.CLUSTER, CLUSTER_NAME)
    for t in body.topics:
        name = str(t.name)
        if version >= 5 and not allowed(Operation.DESCRIBE_CONFIGS, Resource.TOPIC, name):
            # KafkaApis marks it before creating; ZkAdminManager's own refusals (below, and livectl's) clear it
            hidden.add(name)
        if name in twice:
            continue
        if not on_cluster and not allowed(Operation.CREATE, Resource.TOPIC, name):
            b.answer(name, ItemAnswer(_TOPIC_REFUSED, "Authorization failed."))
            continue
        nulls = [str(c.name) for c in t.configs if c.value is None]
        if nulls:
            b.answer(
                name,
                ItemAnswer(KafkaError.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}"),
            )
            hidden.discard(name)
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
            hidden.discard(name)
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
        AdminApi.CREATE_TOPICS,
        version,
        _timeout_ms(body),
        validate_only=validate_only,
        configs=MappingProxyType(configs),
        configs_hidden=frozenset(hidden),
    )


def _delete_topics(
    b: _Builder, version: int, body: Any, topic_names: Callable[[str], str | None], allowed: Check
) -> AdminAsk:
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
            return b.ask(AdminApi.DELETE_TOPICS, version, _timeout_ms(body))
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
        if ref.topic_id != ZERO_UUID and not allowed(Operation.DESCRIBE, Resource.TOPIC, ref.name):
            # named by its id to one who may not describe it: refused without its name
            b.answer(TopicRef(None, ref.topic_id), ItemAnswer(_TOPIC_REFUSED))
            continue
        if not allowed(Operation.DELETE, Resource.TOPIC, ref.name):
            b.answer(ref, ItemAnswer(_TOPIC_REFUSED))
            continue
        b.command(DeleteTopic.TYPE, {"topic": ref.name}, [ref])
    return b.ask(AdminApi.DELETE_TOPICS, version, _timeout_ms(body))


def _create_partitions(b: _Builder, version: int, body: Any, allowed: Check) -> AdminAsk:
    validate_only = bool(body.validate_only)
    twice = set(_duplicates(str(t.name) for t in body.topics))
    for t in body.topics:
        name = str(t.name)
        if name in twice:
            b.answer(name, ItemAnswer(KafkaError.INVALID_REQUEST, "Duplicate topic in request."))
            continue
        if not allowed(Operation.ALTER, Resource.TOPIC, name):
            b.answer(name, ItemAnswer(_TOPIC_REFUSED, "The topic authorization is failed."))
            continue
        fields: dict[str, Any] = {"topic": name, "total_count": int(t.count), **_dry(validate_only)}
        if t.assignments is not None:
            fields["replica_assignment"] = {str(i): [int(r) for r in a.broker_ids] for i, a in enumerate(t.assignments)}
        b.command(CreatePartitions.TYPE, fields, [name])
    return b.ask(AdminApi.CREATE_PARTITIONS, version, _timeout_ms(body), validate_only=validate_only)


def _elect_leaders(b: _Builder, version: int, body: Any, allowed: Check) -> AdminAsk:
    election = int(body.election_type) if version >= 1 else 0
    timeout_ms = _timeout_ms(body)
    if not allowed(Operation.ALTER, Resource.CLUSTER, CLUSTER_NAME):
        b.answer(WHOLE_REQUEST, _CLUSTER_REFUSED)
        for t in body.topic_partitions or ():
            for p in t.partitions:
                b.answer(TopicPartition(str(t.topic), int(p)), _CLUSTER_REFUSED)
        return b.ask(AdminApi.ELECT_LEADERS, version, timeout_ms, every_partition=body.topic_partitions is None)
    unknown = ItemAnswer(KafkaError.INVALID_REQUEST, f"Unknown election type: {election}")
    if body.topic_partitions is None:
        if election not in (0, 1):
            b.answer(WHOLE_REQUEST, unknown)
            return b.ask(AdminApi.ELECT_LEADERS, version, timeout_ms, every_partition=True)
        kind = "PREFERRED" if election == 0 else "UNCLEAN"
        b.command(ElectLeaders.TYPE, {"election_type": kind}, [])
        return b.ask(AdminApi.ELECT_LEADERS, version, timeout_ms, every_partition=True)
    # Kafka elects a set of partitions
    tps = list(dict.fromkeys(TopicPartition(str(t.topic), int(p)) for t in body.topic_partitions for p in t.partitions))
    if election not in (0, 1):
        for tp in tps:
            b.answer(tp, unknown)
        return b.ask(AdminApi.ELECT_LEADERS, version, timeout_ms)
    kind = "PREFERRED" if election == 0 else "UNCLEAN"
    _per_partition(b, ElectLeaders.TYPE, {"election_type": kind}, [(tp, {}) for tp in tps])
    return b.ask(AdminApi.ELECT_LEADERS, version, timeout_ms)


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


def _alter_partition_reassignments(b: _Builder, version: int, body: Any, allowed: Check) -> AdminAsk:
    if not allowed(Operation.ALTER, Resource.CLUSTER, CLUSTER_NAME):
        # Kafka's error response of the request: its message, at the top level and for every partition
        refused = ItemAnswer(CLUSTER_AUTHORIZATION_FAILED, "Request AlterPartitionReassignments is not authorized.")
        b.answer(WHOLE_REQUEST, refused)
        for t in body.topics:
            for p in t.partitions:
                b.answer(TopicPartition(str(t.name), int(p.partition_index)), refused)
        return b.ask(AdminApi.ALTER_PARTITION_REASSIGNMENTS, version, _timeout_ms(body))
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
    return b.ask(AdminApi.ALTER_PARTITION_REASSIGNMENTS, version, _timeout_ms(body))


def admin_request(
    api_key: int,
    version: int,
    body: Any,
    new_id: Callable[[], str],
    *,
    defaults: CreateDefaults = _KAFKA_DEFAULTS,
    topic_names: Callable[[str], str | None] = lambda _: None,
    allowed: Check = allow_all,
) -> AdminAsk:
    """What request ``body`` (a kio entity of ``api_key`` at ``version``) becomes. ``new_id`` makes each
    command's request id; ``topic_names``: topic id (base64) -> name, or ``None`` (DeleteTopics v6 by id);
    ``allowed``: what the request's principal may do (default: everything)."""
    b = _Builder(new_id)
    if api_key == AdminApi.CREATE_TOPICS:
        return _create_topics(b, version, body, defaults, allowed)
    if api_key == AdminApi.DELETE_TOPICS:
        return _delete_topics(b, version, body, topic_names, allowed)
    if api_key == AdminApi.CREATE_PARTITIONS:
        return _create_partitions(b, version, body, allowed)
    if api_key == AdminApi.ELECT_LEADERS:
        return _elect_leaders(b, version, body, allowed)
    if api_key == AdminApi.ALTER_PARTITION_REASSIGNMENTS:
        return _alter_partition_reassignments(b, version, body, allowed)
    raise ValueError(f"api {api_key} is not an admin API the channel answers")
