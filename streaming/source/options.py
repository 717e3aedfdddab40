"""The options of the ``livectl-kafka`` source (:mod:`streaming.source.kafka_source`): their names (also Spark's Kafka
source names and camelCase), the starting offsets, the failover barrier's, the Kafka client security
properties as ``kafka.<property>``; and its error, which names the option or topic-partition concerned."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sinks.security import KafkaSecurity, SecurityConfigError
from streaming.errors import StreamingError

SOURCE_NAME = "livectl-kafka"

#: where a read stands: (topic, partition) -> the next offset to read
Positions = dict[tuple[str, int], int]
#: (topic, partition) -> the mark (:func:`streaming.source.consumer.record_mark`) of the record just before its
#: position
Marks = dict[tuple[str, int], str]

#: the key of a source offset that holds the marks: ``{"@last": {topic: {partition: mark}}}``. Not a legal
#: Kafka topic name (those are ``[a-zA-Z0-9._-]``), so never a topic's key
MARKS = "@last"

#: the key of a source offset that names a failover reference handed out ahead of the records before it on its
#: partition (the barrier's batch is the reference alone: :mod:`streaming.source.kafka_source`), until the
#: reads pass it: ``{"@ahead": {"topic": t, "partition": p, "offset": o, "mark": m}}``
AHEAD = "@ahead"

_ALIASES: dict[str, tuple[str, ...]] = {
    "bootstrap_servers": ("bootstrap_servers", "bootstrapServers", "kafka.bootstrap.servers"),
    "topics": ("topics", "subscribe"),
    "starting_offsets": ("starting_offsets", "startingOffsets"),
    "max_records_per_batch": ("max_records_per_batch", "maxRecordsPerBatch", "maxOffsetsPerTrigger"),
    "poll_timeout_ms": ("poll_timeout_ms", "pollTimeoutMs"),
    "replay_timeout_s": ("replay_timeout_s", "replayTimeoutS"),
    "fail_on_data_loss": ("fail_on_data_loss", "failOnDataLoss"),
    "barrier_topic": ("barrier_topic", "barrierTopic"),
    "barrier_epoch": ("barrier_epoch", "barrierEpoch"),
    "barrier_path": ("barrier_path", "barrierPath"),
    "first_read_wait_ms": ("first_read_wait_ms", "firstReadWaitMs"),
    "request_timeout_ms": ("request_timeout_ms", "requestTimeoutMs", "kafka.request.timeout.ms"),
    "unreachable_timeout_ms": ("unreachable_timeout_ms", "unreachableTimeoutMs"),
}

#: option names (lower case) that are aliases, not Kafka client properties
_ALIASED = frozenset(a.lower() for names in _ALIASES.values() for a in names)


class KafkaSourceError(StreamingError):
    """A bad option, a missing topic, or records that cannot be re-read. ``option`` names the option or
    the topic-partition concerned."""

    def __init__(self, option: str, reason: str) -> None:
        self.option = option
        self.reason = reason
        super().__init__(f"{SOURCE_NAME} {option}: {reason}")


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    topics: tuple[str, ...]
    starting_offsets: str = "earliest"
    max_records_per_batch: int = 10000
    #: how long a read waits for records when none has come yet (it returns as soon as one comes: with a
    #: trigger of 0, an idle query waits here for its next record)
    poll_timeout_ms: int = 500
    #: how long re-reading a planned batch may take before the source gives up
    replay_timeout_s: float = 60.0
    #: offsets gone from the log (see "Data loss" in the module docstring): fail, or read from the earliest
    fail_on_data_loss: bool = True
    #: Kafka client security properties from the ``kafka.<name>`` options (``security.protocol``, SASL, SSL)
    security: tuple[tuple[str, str], ...] = ()
    #: explicit starting offsets (``starting_offsets`` given as a JSON object), else ``None``
    starting_positions: tuple[tuple[str, int, int], ...] | None = None
    #: the failover barrier (see the module docstring): the topic of the reference, the least controller
    #: epoch it must carry and, optionally, the folder its snapshot must be in
    barrier_topic: str | None = None
    barrier_epoch: int | None = None
    barrier_path: str | None = None
    #: how long the reader's first read waits for its first record (behind the barrier: for the reference)
    #: before it returns nothing (see "Waiting for records" in :mod:`streaming.source.kafka_source`); 0: as long as
    #: later reads (``poll_timeout_ms``)
    first_read_wait_ms: int = 10000
    #: the marks given with explicit starting offsets (``{"@last": ...}``, as in the source's own offsets)
    starting_marks: tuple[tuple[str, int, str], ...] = ()
    #: the Kafka clients' request timeout (kafka-python's ``request_timeout_ms``, Kafka's ``request.timeout.ms``):
    #: a request not answered whole in this time closes its connection and is asked again; the read's fetch
    #: size follows it (:mod:`streaming.source.fetch_size`)
    request_timeout_ms: int = 30000
    #: how long reads go on returning nothing while Kafka does not answer (a broker restarting) before a read
    #: fails naming this option; 0: the first client error fails the read
    unreachable_timeout_ms: int = 60000

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """From the reader's options (case-insensitive keys); errors name the option."""
        lowered = {str(k).lower(): v for k, v in options.items()}

        def get(name: str) -> str | None:
            for alias in _ALIASES[name]:
                if alias.lower() in lowered:
                    return str(lowered[alias.lower()])
            return None

        servers = get("bootstrap_servers")
        if not servers:
            raise KafkaSourceError("bootstrap_servers", "is required (host:port[,host:port...])")
        topics = tuple(t.strip() for t in (get("topics") or "").split(",") if t.strip())
        if not topics:
            raise KafkaSourceError("topics", "is required (comma-separated topic names)")
        starting = (get("starting_offsets") or "earliest").strip()
        positions = None
        marks: tuple[tuple[str, int, str], ...] = ()
        if starting.startswith("{"):
            positions, marks = _parse_positions(starting, topics)
            starting = "explicit"
        else:
            starting = starting.lower()
            if starting not in ("earliest", "latest"):
                raise KafkaSourceError(
                    "starting_offsets", f"must be earliest, latest or a JSON object of offsets, got {starting!r}"
                )

        def number(name: str, default: float, kind: type) -> Any:
            text = get(name)
            if text is None:
                return default
            try:
                value = kind(text)
            except ValueError:
                raise KafkaSourceError(name, f"must be a number, got {text!r}") from None
            if value < 1:
                raise KafkaSourceError(name, f"must be at least 1, got {text!r}")
            return value

        fail_text = (get("fail_on_data_loss") or "true").strip().lower()
        if fail_text not in ("true", "false"):
            raise KafkaSourceError("fail_on_data_loss", f"must be true or false, got {fail_text!r}")
        props = {
            k.removeprefix("kafka."): str(v) for k, v in lowered.items() if k.startswith("kafka.") and k not in _ALIASED
        }
        try:
            security = KafkaSecurity.from_properties(props)
        except SecurityConfigError as e:
            raise KafkaSourceError(f"kafka.{e.key}", e.reason) from None
        barrier_topic = get("barrier_topic")
        barrier_epoch_text = get("barrier_epoch")
        if (barrier_topic is None) != (barrier_epoch_text is None):
            raise KafkaSourceError("barrier_epoch", "barrier_topic and barrier_epoch go together")
        barrier_epoch = None
        if barrier_epoch_text is not None:
            try:
                barrier_epoch = int(barrier_epoch_text)
            except ValueError:
                raise KafkaSourceError("barrier_epoch", f"must be an integer, got {barrier_epoch_text!r}") from None
            if barrier_topic not in topics:
                raise KafkaSourceError("barrier_topic", f"{barrier_topic!r} is not one of the topics read")

        def whole_ms(name: str, default: int) -> int:
            text = get(name)
            if text is None:
                return default
            try:
                value = int(text)
            except ValueError:
                raise KafkaSourceError(name, f"must be a whole number of ms, got {text!r}") from None
            if value < 0:
                raise KafkaSourceError(name, f"must be 0 or more, got {text!r}")
            return value

        return cls(
            servers,
            tuple(sorted(set(topics))),
            starting,
            number("max_records_per_batch", 10000, int),
            number("poll_timeout_ms", 500, int),
            number("replay_timeout_s", 60.0, float),
            fail_text == "true",
            security.items,
            positions,
            barrier_topic,
            barrier_epoch,
            get("barrier_path"),
            whole_ms("first_read_wait_ms", cls.first_read_wait_ms),
            marks,
            _request_timeout_ms(get("request_timeout_ms")),
            whole_ms("unreachable_timeout_ms", cls.unreachable_timeout_ms),
        )


#: the least request timeout taken: above the longest fetch wait (the poll timeout's, at most 50 ms) with room for
#: an answer
MIN_REQUEST_TIMEOUT_MS = 1000


def _request_timeout_ms(text: str | None) -> int:
    if text is None:
        return SourceOptions.request_timeout_ms
    try:
        value = int(text)
    except ValueError:
        raise KafkaSourceError("request_timeout_ms", f"must be a whole number of ms, got {text!r}") from None
    if value < MIN_REQUEST_TIMEOUT_MS:
        raise KafkaSourceError("request_timeout_ms", f"must be at least {MIN_REQUEST_TIMEOUT_MS}, got {text!r}")
    return value


def _parse_positions(
    text: str, topics: tuple[str, ...]
) -> tuple[tuple[tuple[str, int, int], ...], tuple[tuple[str, int, str], ...]]:
    """``{"topic": {"partition": offset}}`` (and, optionally, the source offset's ``"@last"`` marks) as
    (topic, partition, offset) and (topic, partition, mark) triples; errors name the field."""
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise KafkaSourceError("starting_offsets", f"is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise KafkaSourceError("starting_offsets", "must be a JSON object {topic: {partition: offset}}")
    out = []
    marks = []
    for topic, parts in raw.items():
        if topic == MARKS:
            marks = _parse_marks(parts, topics)
            continue
        if topic not in topics:
            raise KafkaSourceError(f"starting_offsets.{topic}", "is not one of the topics read")
        if not isinstance(parts, dict):
            raise KafkaSourceError(f"starting_offsets.{topic}", "must be an object {partition: offset}")
        for partition, offset in parts.items():
            field = f"starting_offsets.{topic}.{partition}"
            if not str(partition).isdigit():
                raise KafkaSourceError(field, "the partition must be a non-negative integer")
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                raise KafkaSourceError(field, f"the offset must be a non-negative integer, got {offset!r}")
            out.append((topic, int(partition), offset))
    return tuple(sorted(out)), tuple(sorted(marks))


def _parse_marks(raw: Any, topics: tuple[str, ...]) -> list[tuple[str, int, str]]:
    field = f"starting_offsets.{MARKS}"
    if not isinstance(raw, dict):
        raise KafkaSourceError(field, "must be an object {topic: {partition: mark}}")
    out = []
    for topic, parts in raw.items():
        if topic not in topics:
            raise KafkaSourceError(f"{field}.{topic}", "is not one of the topics read")
        if not isinstance(parts, dict):
            raise KafkaSourceError(f"{field}.{topic}", "must be an object {partition: mark}")
        for partition, mark in parts.items():
            if not str(partition).isdigit():
                raise KafkaSourceError(f"{field}.{topic}.{partition}", "the partition must be a non-negative integer")
            if not isinstance(mark, str) or not mark:
                raise KafkaSourceError(
                    f"{field}.{topic}.{partition}", f"the mark must be a non-empty string, got {mark!r}"
                )
            out.append((topic, int(partition), mark))
    return out


@dataclass(frozen=True)
class Ahead:
    """A record handed out before the records that precede it on its partition (:data:`AHEAD`)."""

    topic: str
    partition: int
    offset: int
    mark: str

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


def ahead_of(offset: Mapping[str, Any]) -> Ahead | None:
    """The record a source offset says was handed out ahead (:data:`AHEAD`), if any."""
    a = offset.get(AHEAD)
    if a is None:
        return None
    return Ahead(str(a["topic"]), int(a["partition"]), int(a["offset"]), str(a["mark"]))


def split_offset(offset: Mapping[str, Any]) -> tuple[Positions, Marks]:
    """A source offset (:func:`source_offset`) as its positions and marks."""
    positions = {(t, int(p)): int(o) for t, parts in offset.items() if not t.startswith("@") for p, o in parts.items()}
    marks = {(t, int(p)): str(m) for t, parts in offset.get(MARKS, {}).items() for p, m in parts.items()}
    return positions, marks


def source_offset(
    positions: Mapping[tuple[str, int], int], marks: Mapping[tuple[str, int], str], ahead: Ahead | None = None
) -> dict[str, Any]:
    """The source offset ``{topic: {partition: next_offset}, "@last": {topic: {partition: mark}}}``, and the
    record handed out ahead (:data:`AHEAD`) while a position is not past it: topics sorted, partitions sorted
    numerically, offsets as int (Spark compares offsets as JSON, so equal offsets must serialise equally); a
    mark only for a partition whose position is past its first record."""
    out: dict[str, Any] = {}
    for t, p in sorted(positions):
        out.setdefault(t, {})[str(p)] = int(positions[(t, p)])
    kept: dict[str, dict[str, str]] = {}
    for t, p in sorted(marks):
        if positions.get((t, p), 0) > 0:
            kept.setdefault(t, {})[str(p)] = marks[(t, p)]
    if kept:
        out[MARKS] = kept
    if ahead is not None and positions.get(ahead.key, 0) <= ahead.offset:
        out[AHEAD] = {"topic": ahead.topic, "partition": ahead.partition, "offset": ahead.offset, "mark": ahead.mark}
    return out
