"""livectl's admin results as the answers to Kafka's admin requests (:mod:`channel.admin_apis` says when each API
is answered).

:func:`item_answers` turns one admin result into the answers of the items its command covers (the first result
of a command is its answer; ``in_progress`` is Kafka's success), :func:`timed_out` answers the items of a command
livectl did not answer in time, and :func:`admin_response` builds the API's response at the request's version
from the answers and the channel's own. Pure apart from ``kio``'s values.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from kio.static.primitive import i16

from channel.acls import TOPIC_AUTHORIZATION_FAILED
from channel.admin_apis import (
    WHOLE_REQUEST,
    AdminApi,
    AdminAsk,
    Item,
    ItemAnswer,
    TopicRef,
    named_answer,
    schema_module,
)
from channel.convert import kafka_uuid
from core.decisions import AdminResult, AdminStatus
from core.kafka.error_codes import KafkaError
from core.kafka.requests import ZERO_UUID
from core.model import TopicPartition

__all__ = ["admin_response", "item_answers", "timed_out"]

#: the APIs whose accepted items ``timeoutMs`` <= 0 answers ``REQUEST_TIMED_OUT`` (``ZkAdminManager``'s rule)
_NO_WAIT_TIMES_OUT = frozenset({AdminApi.CREATE_TOPICS, AdminApi.DELETE_TOPICS, AdminApi.CREATE_PARTITIONS})
#: ``config_source`` of a topic's own config in CreateTopics v5+ (Kafka's ``DYNAMIC_TOPIC_CONFIG``)
_TOPIC_CONFIG_SOURCE = 1
_NO_THROTTLE = datetime.timedelta(0)


def _refusal(result: AdminResult) -> ItemAnswer:
    """A whole command's error: a command refused at livectl's edge is ``INVALID_REQUEST`` carrying the Kafka
    error of the limit it broke (``details.kafka_error``, leading the message): that error is the answer."""
    name, message = result.error, result.message
    kafka_error = result.details.get("kafka_error")
    if name == KafkaError.INVALID_REQUEST.name and isinstance(kafka_error, str) and kafka_error != name:
        name = kafka_error
        message = message.removeprefix(f"{kafka_error}: ")
    return named_answer(name or KafkaError.UNKNOWN_SERVER_ERROR.name, message)


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
        out[tp] = named_answer(str(entry.get("error") or ""), str(message) if message else None)
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
    if ask.api_key in (AdminApi.ELECT_LEADERS, AdminApi.ALTER_PARTITION_REASSIGNMENTS):
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
            elif ask.api_key == AdminApi.CREATE_TOPICS:
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
    m = schema_module(ask.api_key, ask.version, "response")
    if ask.api_key == AdminApi.CREATE_TOPICS:
        return _make(
            m.CreateTopicsResponse,
            throttle_time=_NO_THROTTLE,
            topics=tuple(_topic_result(m, ask, str(t), merged[t]) for t in ask.items),
        )
    if ask.api_key == AdminApi.DELETE_TOPICS:
        return _make(
            m.DeleteTopicsResponse,
            throttle_time=_NO_THROTTLE,
            responses=tuple(_deleted(m, ask, t, merged[t]) for t in ask.items if isinstance(t, TopicRef)),
        )
    if ask.api_key == AdminApi.CREATE_PARTITIONS:
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
    if ask.api_key == AdminApi.ELECT_LEADERS:
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
    if ok and topic in ask.configs_hidden:
        # Kafka's KafkaApis: created, but nothing of its configs for one who may not describe them
        return _make(
            m.CreatableTopicResult,
            name=topic,
            topic_id=kafka_uuid(a.topic_id),
            error_code=_code(0),
            error_message=None,
            topic_config_error_code=i16(TOPIC_AUTHORIZATION_FAILED),
            num_partitions=-1,
            replication_factor=-1,
            configs=(),
        )
    # refused before livectl saw it (named twice, not authorized): KafkaApis' mark stays
    config_error = 0 if ok or topic not in ask.configs_hidden or topic not in ask.own else TOPIC_AUTHORIZATION_FAILED
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
        topic_config_error_code=i16(config_error),
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
