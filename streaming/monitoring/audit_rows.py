"""The state-change log's table rows: one row of :data:`AUDIT_SCHEMA` per decision of a micro-batch (see
:mod:`streaming.monitoring.audit_log` for the table and how a batch is appended exactly once)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from core import decisions as dc
from core.codec.dry_run_details import DRY_RUN_DECISIONS
from core.kafka import zkdata
from core.kafka.requests import RequestApi
from sinks.ports import FailedWrite
from streaming.monitoring.request_digest import (
    INDEX_KEY,
    INDEX_PATTERN,
    RequestDigest,
    digest_requests,
    index_of,
    per_broker,
)

KIND_ZK = "zk_write"
KIND_REQUEST = "request"
KIND_ADMIN = "admin_result"
KIND_FAILURE = "state_change_failure"

#: one row per decision; the ``date`` partition column comes from the folder (``date=YYYY-MM-DD``)
AUDIT_SCHEMA = pa.schema(
    [
        pa.field("time", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("batch_id", pa.int64(), nullable=False),
        pa.field("controller_id", pa.int32(), nullable=False),
        pa.field("controller_epoch", pa.int32(), nullable=False),
        #: the row's place in its micro-batch (the order things were decided and carried out)
        pa.field("seq", pa.int32(), nullable=False),
        #: zk_write | request | admin_result | state_change_failure
        pa.field("kind", pa.string(), nullable=False),
        #: zk_write: create / set / delete; request: the API (LeaderAndIsr, …); admin_result: the command;
        #: state_change_failure: "<from> -> <to>"
        pa.field("action", pa.string(), nullable=False),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        #: request: the brokers sent this partition state
        pa.field("brokers", pa.list_(pa.int32())),
        pa.field("request_id", pa.string()),
        #: zk_write: written / refused; request: sent; admin_result: ok / error / in_progress;
        #: state_change_failure: failed
        pa.field("outcome", pa.string(), nullable=False),
        #: ZooKeeper's refusal, Kafka's error name, the failure's reason
        pa.field("error", pa.string()),
        #: zk_write: the path; state_change_failure: the item
        pa.field("path", pa.string()),
        #: JSON: the znode data and expected version, the partition state sent, the admin message and details
        pa.field("detail", pa.string()),
    ]
)
COLUMNS = tuple(AUDIT_SCHEMA.names)


@dataclass(frozen=True)
class AuditBatch:
    """What one micro-batch decided and what became of it (built by the dispatcher after its sinks ran)."""

    batch_id: int
    zk_writes: Sequence[dc.ZkWrite] = ()
    zk_refused: Sequence[FailedWrite] = ()
    #: the requests sent (after those of refused writes were withheld)
    requests: Sequence[dc.BrokerRequest] = ()
    admin_results: Sequence[dc.AdminResult] = ()
    failures: Sequence[dc.StateChangeFailure] = ()

    @property
    def empty(self) -> bool:
        return not (self.zk_writes or self.requests or self.admin_results or self.failures)


_ITEM = re.compile(r"^\[?(?:Topic=)?(.+?)[,-](?:Partition=)?(\d+)(?:,Replica=\d+)?\]?$")


def topic_partition_of_path(path: str) -> tuple[str | None, int | None]:
    """The topic (and partition) a znode path is about, when it is about one."""
    tp = zkdata.partition_of_path(path)
    if tp is not None:
        return tp
    for root in (zkdata.BROKER_TOPICS, zkdata.DELETE_TOPICS, zkdata.CONFIG_TOPICS):
        topic = zkdata.topic_of_path(path, root)
        if topic is not None:
            return topic, None
    return None, None


def topic_partition_of_item(item: str) -> tuple[str | None, int | None]:
    """The topic and partition a state-change failure names (``t-0``, ``[Topic=t,Partition=0,Replica=1]``)."""
    m = _ITEM.match(item.strip())
    if m is None:
        return None, None
    return m.group(1), int(m.group(2))


def _admin_topic(details: Mapping[str, Any]) -> str | None:
    """The topic an admin result is about, when its details (frozen JSON: arrays are tuples) name exactly
    one."""
    topic = details.get("topic")
    if isinstance(topic, str):
        return topic
    topics = details.get("topics")
    if isinstance(topics, tuple | list) and len(topics) == 1 and isinstance(topics[0], str):
        return topics[0]
    return None


def _request_rows(
    digests: Sequence[RequestDigest],
) -> tuple[list[str], list[str | None], list[int | None], list[list[int]], list[str]]:
    """The per-partition request rows (API, topic, partition, brokers, detail): one per API, topic and
    partition state, in the order first sent, naming every broker sent that state in the order sent.

    A state is grouped by its sorted-key text, which holds its partition index: the text a digest cut out
    (:attr:`RequestDigest.texts`) or the parsed state written with sorted keys — the same text for the same
    state, so a state sent in a text body to one broker and in a parsed one to another is one row."""
    dumps, sort_keys = orjson.dumps, orjson.OPT_SORT_KEYS
    grouped: dict[tuple[str, str | None, str], list[int]] = {}
    #: the partition of each state grouped from a parsed entry (a text state's is read from its text)
    parsed_partition: dict[tuple[str, str | None, str], int | None] = {}
    get = grouped.get
    for d in digests:
        api = d.request.api.value
        recipients = d.request.recipients()
        if d.texts is not None:
            if len(recipients) == 1:
                (b,) = recipients
                for topic, states in d.texts:
                    for state in states:
                        key = (api, topic, state)
                        brokers = get(key)
                        if brokers is None:
                            grouped[key] = [b]
                        elif b not in brokers:
                            brokers.append(b)
                continue
            entries: Any = ((topic, None, state) for topic, states in d.texts for state in states)
        elif d.entries is not None:
            entries = ((t, p, dumps(st, option=sort_keys).decode()[1:-1]) for t, p, st in d.entries)
        else:
            continue
        for topic, partition, state in entries:
            key = (api, topic, state)
            brokers = grouped.setdefault(key, [])
            if d.texts is None:
                parsed_partition[key] = partition
            for b in recipients:
                if b not in brokers:
                    brokers.append(b)
    apis = [api for api, _t, _s in grouped]
    topics = [topic for _a, topic, _s in grouped]
    partitions = [parsed_partition[key] if key in parsed_partition else index_of(key[2]) for key in grouped]
    details = ["{" + state + "}" for _a, _t, state in grouped]
    return apis, topics, partitions, list(grouped.values()), details


#: joins a request row's key fields for Arrow's dictionary encoding: an API name, a topic name (Kafka's legal
#: characters) and a state's JSON text (control characters escaped) never hold it
_KEY_SEPARATOR = "\x1f"


def request_columns(digests: Sequence[RequestDigest]) -> dict[str, pa.Array] | None:
    """:func:`_request_rows`'s rows as Arrow arrays (the :data:`_SEGMENT_COLUMNS`), made by Arrow's kernels —
    which run without the GIL, so the request sink beside them keeps it (a failover: 300k partition states
    grouped into 100k rows) — when every request with partition rows is one broker's, digested as texts (a
    LeaderAndIsr or StopReplica from the buckets), and no broker was sent one state twice; else ``None``, and
    :func:`_request_rows` makes them.

    The same rows, in the same order: a row's key (API, topic, state text) dictionary-encoded gives the rows'
    indices in first-seen order; a stable sort of those indices puts each row's brokers in the order sent."""
    # per entry with states: its API, topic, broker and its states' text between the braces of its first and
    # last state (where :func:`state_spans` found it, which accepted this entry), split by Arrow below
    apis: list[str] = []
    topics: list[str] = []
    brokers: list[int] = []
    texts: list[str] = []
    for d in digests:
        if d.spliced is None:
            if d.entries is not None:
                return None  # parsed entries: the Python path groups them with the texts
            continue  # an UpdateMetadata: no per-partition rows
        recipients = d.request.recipients()
        if len(recipients) != 1:
            return None
        (b,) = recipients
        api = d.request.api.value
        body, spans = d.spliced
        for topic, count, text, (lo, hi) in zip(body.names, body.counts, body.texts, spans, strict=True):
            if count:
                apis.append(api)
                topics.append(topic)
                brokers.append(b)
                texts.append(text[lo:hi])
    if not texts:
        return None
    split = pc.split_pattern(pa.array(texts, pa.string()), "},{")
    del texts
    entry = pc.list_parent_indices(split)
    state_a = split.flatten()
    api_a, topic_a = (pc.take(pa.array(v, pa.string()), entry) for v in (apis, topics))
    broker_a = pc.take(pa.array(brokers, pa.int32()), entry)
    codes = pc.dictionary_encode(pc.binary_join_element_wise(api_a, topic_a, state_a, _KEY_SEPARATOR)).indices
    pairs = pc.add(pc.multiply(pc.cast(codes, pa.int64()), 1 << 32), pc.cast(broker_a, pa.int64()))
    if pc.count_distinct(pairs).as_py() != len(pairs):
        return None  # a broker sent the same state twice: the Python path names it once
    order = pc.sort_indices(codes)  # stable: within a row, its brokers in the order sent
    counts = pc.struct_field(pc.value_counts(pc.take(codes, order)), "counts")
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cast(pc.cumulative_sum(counts), pa.int32())])
    first = pc.take(order, offsets.slice(0, len(offsets) - 1))
    row_state = pc.take(state_a, first)
    index = pc.struct_field(pc.extract_regex(row_state, INDEX_PATTERN), [0])
    if pc.sum(pc.and_(pc.is_null(index), pc.match_substring(row_state, INDEX_KEY))).as_py():
        return None  # a partition index index_of would read otherwise (or fail on): the Python path's
    n = len(row_state)
    return {
        "kind": pa.array([KIND_REQUEST] * n, pa.string()),
        "action": pc.take(api_a, first),
        "outcome": pa.array(["sent"] * n, pa.string()),
        "topic": pc.take(topic_a, first),
        "partition": pc.cast(index, pa.int32()),
        "brokers": pa.ListArray.from_arrays(offsets, pc.take(broker_a, order)),
        "request_id": pa.nulls(n, pa.string()),
        "error": pa.nulls(n, pa.string()),
        "path": pa.nulls(n, pa.string()),
        "detail": pc.binary_join_element_wise("{", row_state, "}", ""),
    }


def audit_rows(
    batch: AuditBatch,
    controller_id: int,
    epoch: int,
    when: dt.datetime,
    digests: Sequence[RequestDigest] | None = None,
) -> pa.Table:
    """The batch's rows of :data:`AUDIT_SCHEMA`, in the order the dispatcher carried them out: ZooKeeper
    writes, requests (Kafka's send order), admin results, failures. A partition's entry of a request is one
    row naming every broker that was sent the same state; an UpdateMetadata is one row per broker with its
    partition count (its states are the LeaderAndIsr ones, sent to every live broker)."""
    return PreparedRows.of(batch, controller_id, epoch, digests).table(when)


@dataclass(frozen=True)
class PreparedRows:
    """A batch's rows of :data:`AUDIT_SCHEMA` but their ``time`` (:meth:`table` adds it), with the requests'
    digests for the log lines: what :class:`AuditLog` computes from the batch alone, which the dispatcher
    has made while the request sink waits on Kafka (:meth:`AuditLog.prepare`)."""

    batch: AuditBatch
    digests: Sequence[RequestDigest]
    arrays: Mapping[str, pa.Array]

    @classmethod
    def of(
        cls, batch: AuditBatch, controller_id: int, epoch: int, digests: Sequence[RequestDigest] | None = None
    ) -> PreparedRows:
        digests = digests if digests is not None else digest_requests(batch.requests)
        segments = _columns(batch, digests)
        arrays: dict[str, pa.Array] = {}
        for name in _SEGMENT_COLUMNS:
            typ = AUDIT_SCHEMA.field(name).type
            parts = [v if isinstance(v, pa.Array) else pa.array(v, typ) for v in (seg[name] for seg in segments)]
            arrays[name] = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
        n = len(arrays["kind"])
        arrays["seq"] = pa.array(range(n), pa.int32())
        arrays["batch_id"] = pa.array([batch.batch_id] * n, pa.int64())
        arrays["controller_id"] = pa.array([controller_id] * n, pa.int32())
        arrays["controller_epoch"] = pa.array([epoch] * n, pa.int32())
        return cls(batch, digests, arrays)

    def table(self, when: dt.datetime) -> pa.Table:
        n = len(self.arrays["kind"])
        time_type = AUDIT_SCHEMA.field("time").type
        columns = {"time": pa.array([when] * n, time_type), **self.arrays}
        return pa.table({name: columns[name] for name in COLUMNS}, schema=AUDIT_SCHEMA)


#: the columns :func:`_columns` makes (the others are the batch's and the row's place, the same for every kind)
_SEGMENT_COLUMNS = tuple(
    name for name in COLUMNS if name not in {"time", "seq", "batch_id", "controller_id", "controller_epoch"}
)


def _columns(batch: AuditBatch, digests: Sequence[RequestDigest]) -> list[dict[str, Any]]:
    """The :data:`_SEGMENT_COLUMNS` of :func:`audit_rows`, as consecutive segments of rows: each a column's
    values as a list, or as an Arrow array for the per-partition request rows when
    :func:`request_columns` could make them."""
    cols: dict[str, list[Any]] = {name: [] for name in _SEGMENT_COLUMNS}
    segments: list[dict[str, Any]] = [cols]

    def add(  # noqa: PLR0917 (one row's columns, positional for speed at 10k rows)
        kind: str,
        action: str,
        outcome: str,
        topic: str | None = None,
        partition: int | None = None,
        brokers: list[int] | None = None,
        request_id: str | None = None,
        error: str | None = None,
        path: str | None = None,
        detail: str | None = None,
    ) -> None:
        cols["kind"].append(kind)
        cols["action"].append(action)
        cols["outcome"].append(outcome)
        cols["topic"].append(topic)
        cols["partition"].append(partition)
        cols["brokers"].append(brokers)
        cols["request_id"].append(request_id)
        cols["error"].append(error)
        cols["path"].append(path)
        cols["detail"].append(detail)

    refused = {f.index: f for f in batch.zk_refused}
    dumps = orjson.dumps
    for i, w in enumerate(batch.zk_writes):
        f = refused.get(i)
        topic, partition = topic_partition_of_path(w.path)
        add(
            KIND_ZK,
            w.op.value,
            "written" if f is None else "refused",
            topic,
            partition,
            None,
            None,
            None if f is None else f.error,
            w.path,
            dumps({"data": w.data, "expected_version": w.expected_version}).decode(),
        )
    # the per-partition request rows, a column at a time (a failover's 100k rows)
    in_arrow = request_columns(digests)
    if in_arrow is not None:
        cols = {name: [] for name in _SEGMENT_COLUMNS}
        segments += [in_arrow, cols]
    else:
        apis, topics, partitions, brokers, details = _request_rows(digests)
        n = len(apis)
        cols["kind"] += [KIND_REQUEST] * n
        cols["action"] += apis
        cols["outcome"] += ["sent"] * n
        cols["topic"] += topics
        cols["partition"] += partitions
        cols["brokers"] += brokers
        for name in ("request_id", "error", "path"):
            cols[name] += [None] * n
        cols["detail"] += details
    for (request_api, broker), (count, _leaders) in per_broker(digests).items():
        if request_api is RequestApi.UPDATE_METADATA:
            add(KIND_REQUEST, request_api.value, "sent", brokers=[broker], detail=f'{{"partitions":{count}}}')
    for a in batch.admin_results:
        add(
            KIND_ADMIN,
            # a dry run's answer (core.controller.dry_run) applied nothing: its row says so
            f"{a.command} (dry run)" if DRY_RUN_DECISIONS in a.details else a.command,
            a.status.value,
            _admin_topic(a.details),
            request_id=a.request_id,
            error=a.error,
            detail=dumps({"message": a.message, "details": a.details}).decode(),
        )
    for fail in batch.failures:
        topic, partition = topic_partition_of_item(fail.item)
        add(
            KIND_FAILURE,
            f"{fail.from_state} -> {fail.to_state}",
            "failed",
            topic,
            partition,
            error=fail.reason,
            path=fail.item,
        )
    return segments
