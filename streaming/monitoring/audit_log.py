"""The state-change log: every decision of a micro-batch, as Parquet rows and as Kafka-style log lines.

Kafka's controller writes what it decided to ``state-change.log`` (logger ``state.change.logger``); operators
read it when something went wrong. livectl does both:

* **log lines** under the logger :data:`STATE_CHANGE_LOGGER` (``state.change.logger``, Kafka's name), each
  prefixed ``[Controller id=<id> epoch=<epoch>]`` as Kafka's ``StateChangeLogger`` prefixes them. Per broker
  and request type one INFO line (Kafka's "Sending LeaderAndIsr request to broker …" summary), admin results
  at INFO, refused ZooKeeper writes and state-change failures at ERROR; each znode write and each partition
  state sent at DEBUG (Kafka logs those at TRACE; 10k partitions make 10k lines);
* **a Parquet table** (:data:`AUDIT_SCHEMA`), one row per decision: each ZooKeeper write (with its outcome,
  ``written`` or ``refused``), each partition of each LeaderAndIsr / StopReplica / response (the brokers
  that were sent the same partition state are one row; an UpdateMetadata, which carries the same states
  to every live broker, is one row per broker with its partition count), each admin result, each
  state-change failure — with the micro-batch id, the
  controller's id and epoch and the batch's time. Files are partitioned by date (``date=YYYY-MM-DD/``) in
  Hive's layout, so Spark SQL (``spark.read.parquet(dir)``) and pyarrow read it as one table with a
  ``date`` column.

**Exactly once per micro-batch.** Spark replays a micro-batch whose ``foreachBatch`` did not return; the
replay must not append its rows a second time. :class:`AuditLog` keeps a progress file in the checkpoint
(``audit-progress.json``: the last micro-batch whose rows are in the table, and the one being written with
the time and file name its first attempt chose):

1. a batch at or below ``committed`` was written already: nothing is written; nor is a batch this object
   wrote itself (Spark's replay in the same driver after ``foreachBatch`` failed later on);
2. otherwise the progress file first names the batch, its time and its file (a replay reuses them, so the
   replayed rows carry the first attempt's time and land in the same file, under the same date), and
   records the batch before it as committed: Spark runs batch ``B`` only once ``B - 1`` is committed,
   which it is only after ``foreachBatch``, and so this call, returned for ``B - 1``;
3. the Parquet file is written under a hidden name and renamed into place (a reader never sees half of
   it; a replay by another driver replaces it whole, with the same rows).

One progress write per batch, not two (pending, then committed): each write through Hadoop's
``FileSystem`` costs ~20 ms of the micro-batch here (``bench/feature_cost.py``'s own-time figures).

The progress file lives in the checkpoint, so a new checkpoint (batch ids starting again at 0) starts a new
sequence; file names carry the first attempt's time as well as the batch id, so the new files never
replace the old ones. The table itself lives outside the checkpoint (by default beside it,
``<checkpoint>-audit``), so deleting a checkpoint keeps the history.

Every file goes through Hadoop's ``FileSystem`` for the table's URI (:class:`HadoopAuditFiles`), as the
checkpoint does (:mod:`streaming.runtime.checkpoint_fs`): ``file://``, ``hdfs://``, ``s3a://``.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from core import decisions as dc
from core.kafka import zkdata
from core.kafka.request_encoding import wire_object
from core.kafka.requests import REQUEST_ORDER, RequestApi, SplicedBody, partition_count
from sinks.ports import FailedWrite
from streaming.runtime.checkpoint_fs import (
    CheckpointError,
    CheckpointStore,
    HadoopCheckpointStore,
    MemoryCheckpointStore,
    child,
    parent,
)

#: Kafka's state-change logger name
STATE_CHANGE_LOGGER = "state.change.logger"
state_change_log = logging.getLogger(STATE_CHANGE_LOGGER)

#: the progress file, inside the checkpoint
PROGRESS_FILE = "audit-progress.json"

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


def _partition_entries(body: Mapping[str, Any]) -> list[tuple[str | None, int | None, Mapping[str, Any]]]:
    """``(topic, partition, state)`` of each partition a request or response body names (Kafka's
    ``topicStates[].partitionStates[]``, ``remainingPartitions[]``, ``topics[].partitions[]``); one entry
    without a partition when it names none."""
    out: list[tuple[str | None, int | None, Mapping[str, Any]]] = []
    # a bucket's entries still as text: orjson reads them (the body's own parse is the standard library's,
    # as core imports nothing else, and at a failover's 300k LeaderAndIsr states it is seconds of the batch)
    topic_states = [orjson.loads(t) for t in body.texts] if isinstance(body, SplicedBody) else body.get("topicStates")
    for ts in topic_states or ():
        for ps in ts.get("partitionStates") or ():
            out.append((ts.get("topicName"), ps.get("partitionIndex"), ps))
    for ps in body.get("remainingPartitions") or ():
        out.append((ps.get("topicName"), ps.get("partitionIndex"), ps))
    for ts in body.get("topics") or ():
        for ps in ts.get("partitions") or ():
            out.append((ts.get("topicName"), ps.get("partitionIndex"), ps))
    if not out:
        rest = {k: v for k, v in body.items() if k not in ("liveBrokers", "liveLeaders")}
        out.append((None, None, rest))
    return out


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


#: requests whose partitions each get a row; an UpdateMetadata (the same partition states, to every live
#: broker) gets one row per broker with its partition count
_PER_PARTITION = frozenset(api for api in RequestApi if api is not RequestApi.UPDATE_METADATA)

#: requests whose ``topicStates`` entries, as a bucket wrote them, are read as text (:func:`_state_spans`):
#: their partition states are flat objects (integers, booleans, arrays of integers), as
#: :class:`~core.kafka.requests.SplicedBody` states for its texts
_FLAT_STATES = frozenset((RequestApi.LEADER_AND_ISR, RequestApi.STOP_REPLICA))

_STATES_OPEN = '{"partitionStates":['
_INDEX_KEY = '"partitionIndex":'
#: the partition index in a flat state's text as :func:`_index_of` reads it (digits, then a comma or the end)
_INDEX_PATTERN = '"partitionIndex":(?P<index>-?[0-9]+)(?:,|$)'


def _state_spans(body: SplicedBody) -> list[tuple[int, int]] | None:
    """Where each entry's partition states are in its text: ``text[lo:hi]`` is the states' text from the
    first state's opening brace to the last one's closing brace, both left out (``lo == hi`` for an entry of
    none); ``None`` when an entry is not as expected (the caller parses the body instead).

    This relies on the form :class:`~core.kafka.requests.SplicedBody` documents for its texts (and
    ``tests/unit/core/kafka/test_core_kafka_spliced_entries.py`` pins): an entry's text is
    ``orjson.dumps(entry, option=OPT_SORT_KEYS)``, so a partition state's bytes in it are what
    ``orjson.dumps(state, option=OPT_SORT_KEYS)`` gives for the parsed state — the audit row's ``detail``;
    and its states are flat (integers, booleans, arrays of integers), so they are the pieces between
    ``{"partitionStates":[{`` and the first ``}]``, cut at ``},{``. The pieces must be as many as the entry's
    partition count (they are counted here by their separator, not cut)."""
    out: list[tuple[int, int]] = []
    start = len(_STATES_OPEN)
    for count, text in zip(body.counts, body.texts, strict=True):
        if not text.startswith(_STATES_OPEN):
            return None
        if count == 0:
            if text[start] != "]":
                return None
            out.append((start, start))
            continue
        end = text.find("}]", start)
        if end < 0 or text[start] != "{" or text.count("},{", start + 1, end) + 1 != count:
            return None
        out.append((start + 1, end))
    return out


def _cut(body: SplicedBody, spans: Sequence[tuple[int, int]]) -> list[tuple[str, list[str]]]:
    """Each entry's topic and its partition states' texts without their braces, cut at ``spans``
    (:func:`_state_spans` of ``body``)."""
    return [
        (topic, text[lo:hi].split("},{") if count else [])
        for topic, count, text, (lo, hi) in zip(body.names, body.counts, body.texts, spans, strict=True)
    ]


def _index_of(state: str) -> int | None:
    """``partitionIndex`` of a flat partition state's text (without its braces)."""
    i = state.find(_INDEX_KEY)
    if i < 0:
        return None
    i += len(_INDEX_KEY)
    j = state.find(",", i)
    return int(state[i:] if j < 0 else state[i:j])


@dataclass(frozen=True)
class RequestDigest:
    """One request as the log needs it: its partitions' entries, parsed (``entries``), or for a LeaderAndIsr
    or StopReplica whose entries are still a bucket's text, that body and where each entry's states are in
    it (``spliced``: the body and its :func:`_state_spans`; ``entries`` is then ``None``: :attr:`texts` cuts
    the states, :meth:`parsed` parses them). Both are ``None`` for an UpdateMetadata, whose body is not parsed:
    only its partitions are counted."""

    request: dc.BrokerRequest
    entries: list[tuple[str | None, int | None, Mapping[str, Any]]] | None
    partitions: int
    #: the request's body when its entries are a bucket's text, with its states' spans
    spliced: tuple[SplicedBody, list[tuple[int, int]]] | None = None

    @cached_property
    def texts(self) -> list[tuple[str, list[str]]] | None:
        """Each entry's topic and its states' texts without their braces (:func:`_cut`), cut on first use: the
        rows made in Arrow and the INFO lines do not need them as Python strings."""
        return None if self.spliced is None else _cut(*self.spliced)

    def parsed(self) -> list[tuple[str | None, int | None, Mapping[str, Any]]]:
        """The entries, parsed (for the DEBUG lines of a request digested as text)."""
        if self.entries is not None:
            return self.entries
        return _partition_entries(wire_object(self.request.body))

    def led_by(self, broker: int) -> int:
        """The partitions whose state names ``broker`` as the leader."""
        if self.spliced is None:
            return sum(1 for _t, _p, st in self.entries or () if st.get("leader") == broker)
        # a state's text names its leader as "leader":<id> followed by the next key or its end (an id's
        # digits are never followed by more digits); the sequence cannot occur inside a JSON string, and a
        # flat state (SplicedBody's texts) has no nested "leader" key
        one, last = f'"leader":{broker},', f'"leader":{broker}}}'
        return sum(t.count(one) + t.count(last) for t in self.spliced[0].texts)


def digest_requests(requests: Sequence[dc.BrokerRequest]) -> list[RequestDigest]:
    """The requests in Kafka's send order (LeaderAndIsr, UpdateMetadata, StopReplica, responses), each
    read once for both the rows and the log lines: a LeaderAndIsr or StopReplica whose entries are a
    bucket's text is checked to cut into its partition states' texts (:func:`_state_spans`; cut when asked,
    :attr:`RequestDigest.texts`), any other parsed."""
    out = []
    for r in sorted(requests, key=lambda r: REQUEST_ORDER[r.api]):
        body = wire_object(r.body)
        # (a body of no partition state gets the parsed path's one row of its other fields)
        if r.api in _FLAT_STATES and isinstance(body, SplicedBody) and body.partition_count:
            spans = _state_spans(body)
            if spans is not None:
                out.append(RequestDigest(r, None, sum(body.counts), spliced=(body, spans)))
                continue
        if r.api in _PER_PARTITION:
            entries = _partition_entries(body)
            out.append(RequestDigest(r, entries, sum(1 for _t, p, _s in entries if p is not None)))
        else:
            out.append(RequestDigest(r, None, partition_count(body)))
    return out


def per_broker(digests: Sequence[RequestDigest]) -> dict[tuple[RequestApi, int], tuple[int, int]]:
    """``(API, broker) -> (partitions, partitions it leads)``: the buckets' parts of one request summed, as
    the request sink merges them into one message per broker and API (Kafka's send order kept)."""
    out: dict[tuple[RequestApi, int], tuple[int, int]] = {}
    for d in digests:
        r = d.request
        for b in r.recipients():  # a shared request (one UpdateMetadata to a set of brokers) counts for each
            leaders = d.led_by(b)
            n, led = out.get((r.api, b), (0, 0))
            out[(r.api, b)] = (n + d.partitions, led + leaders)
    return out


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
    partitions = [parsed_partition[key] if key in parsed_partition else _index_of(key[2]) for key in grouped]
    details = ["{" + state + "}" for _a, _t, state in grouped]
    return apis, topics, partitions, list(grouped.values()), details


#: joins a request row's key fields for Arrow's dictionary encoding: an API name, a topic name (Kafka's legal
#: characters) and a state's JSON text (control characters escaped) never hold it
_KEY_SEPARATOR = "\x1f"


def _request_columns(digests: Sequence[RequestDigest]) -> dict[str, pa.Array] | None:
    """:func:`_request_rows`'s rows as Arrow arrays (the :data:`_SEGMENT_COLUMNS`), made by Arrow's kernels —
    which run without the GIL, so the request sink beside them keeps it (a failover: 300k partition states
    grouped into 100k rows) — when every request with partition rows is one broker's, digested as texts (a
    LeaderAndIsr or StopReplica from the buckets), and no broker was sent one state twice; else ``None``, and
    :func:`_request_rows` makes them.

    The same rows, in the same order: a row's key (API, topic, state text) dictionary-encoded gives the rows'
    indices in first-seen order; a stable sort of those indices puts each row's brokers in the order sent."""
    # per entry with states: its API, topic, broker and its states' text between the braces of its first and
    # last state (where :func:`_state_spans` found it, which accepted this entry), split by Arrow below
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
    index = pc.struct_field(pc.extract_regex(row_state, _INDEX_PATTERN), [0])
    if pc.sum(pc.and_(pc.is_null(index), pc.match_substring(row_state, _INDEX_KEY))).as_py():
        return None  # a partition index _index_of would read otherwise (or fail on): the Python path's
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
    :func:`_request_columns` could make them."""
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
    in_arrow = _request_columns(digests)
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
            a.command,
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


# ---------------------------------------------------------------------------------------------- log lines


def log_state_changes(
    batch: AuditBatch,
    controller_id: int,
    epoch: int,
    logger: logging.Logger | None = None,
    digests: Sequence[RequestDigest] | None = None,
) -> None:
    """Kafka-style ``state.change.logger`` lines for the batch (see the module docstring for the levels)."""
    lg = logger or state_change_log
    prefix = f"[Controller id={controller_id} epoch={epoch}] "
    debug = lg.isEnabledFor(logging.DEBUG)
    refused = {f.index: f for f in batch.zk_refused}
    for i, w in enumerate(batch.zk_writes):
        f = refused.get(i)
        if f is not None:
            lg.error(
                "%sZooKeeper refused %s %s (expected version %d) in micro-batch %d: %s",
                prefix,
                w.op.value,
                w.path,
                w.expected_version,
                batch.batch_id,
                f.error,
            )
        elif debug:
            lg.debug("%sWrote %s %s in micro-batch %d: %s", prefix, w.op.value, w.path, batch.batch_id, w.data)
    if lg.isEnabledFor(logging.INFO):
        digests = digests if digests is not None else digest_requests(batch.requests)
        for (api, broker), (partitions, leaders) in per_broker(digests).items():
            if api is RequestApi.LEADER_AND_ISR:
                lg.info(
                    "%sSending LeaderAndIsr request to broker %d with %d become-leader and %d become-follower "
                    "partitions (micro-batch %d)",
                    prefix,
                    broker,
                    leaders,
                    partitions - leaders,
                    batch.batch_id,
                )
            elif api in (RequestApi.UPDATE_METADATA, RequestApi.STOP_REPLICA):
                lg.info(
                    "%sSending %s request to broker %d for %d partitions (micro-batch %d)",
                    prefix,
                    api.value,
                    broker,
                    partitions,
                    batch.batch_id,
                )
            else:
                lg.info("%sSending %s to broker %d (micro-batch %d)", prefix, api.value, broker, batch.batch_id)
        if debug:
            for d in digests:
                r = d.request
                for topic, partition, state in d.parsed():
                    if partition is not None:
                        lg.debug(
                            "%sSending %s request %s to broker%s %s for partition %s-%d",
                            prefix,
                            r.api.value,
                            orjson.dumps(state).decode(),
                            "s" if r.shared else "",
                            ",".join(map(str, r.recipients())),
                            topic,
                            partition,
                        )
    for a in batch.admin_results:
        lg.info(
            "%sAdmin request %s (%s): %s%s%s",
            prefix,
            a.request_id,
            a.command,
            a.status.value,
            f" {a.error}" if a.error else "",
            f": {a.message}" if a.message else "",
        )
    for fail in batch.failures:
        lg.error(
            "%sController %d epoch %d failed to change state for %s from %s to %s: %s",
            prefix,
            controller_id,
            epoch,
            fail.item,
            fail.from_state,
            fail.to_state,
            fail.reason,
        )


# ---------------------------------------------------------------------------------------------- the table


class AuditFiles(CheckpointStore, Protocol):
    """The table's file system: a :class:`CheckpointStore` that also writes bytes."""

    def write_bytes(self, uri: str, data: bytes) -> None:
        """Write the whole file under a hidden temporary name, then rename it into place (replacing it)."""
        ...


class HadoopAuditFiles(HadoopCheckpointStore):
    """The table's folder through Hadoop's ``FileSystem`` for its URI (the session's Hadoop configuration)."""

    def __init__(self, spark: Any, root: str) -> None:
        super().__init__(spark, root)
        #: the date folders made so far: one ``mkdirs`` per folder, not per file (each call is a round trip)
        self._made: set[str] = set()

    def write_bytes(self, uri: str, data: bytes) -> None:
        folder, name = parent(uri), uri.rstrip("/").rsplit("/", 1)[1]
        tmp = child(folder, f".{name}.tmp")

        def write() -> None:
            if folder not in self._made:
                self._fs.mkdirs(self._path(folder))
                self._made.add(folder)
            temporary = self._path(tmp)
            out = self._fs.create(temporary, True)
            try:
                out.write(bytearray(data))
            finally:
                out.close()
            target = self._path(uri)
            if not self._fs.rename(temporary, target):
                # HDFS's rename refuses an existing target (a replayed batch's file): replace it
                self._fs.delete(target, False)
                if not self._fs.rename(temporary, target):
                    raise CheckpointError(uri, f"cannot rename {tmp} into place")

        self._call(uri, "write it", write)


class MemoryAuditFiles(MemoryCheckpointStore):
    """An in-memory table folder (unit tests, benchmarks); ``blobs`` holds the files written as bytes."""

    def __init__(self, root: str = "memory:/audit") -> None:
        super().__init__(root)
        self.blobs: dict[str, bytes] = {}
        self.writes = 0

    def write_bytes(self, uri: str, data: bytes) -> None:
        self.writes += 1
        self.blobs[uri] = data

    def exists(self, uri: str) -> bool:
        return uri in self.blobs or super().exists(uri)

    def list_names(self, uri: str) -> list[str]:
        prefix = uri.rstrip("/") + "/"
        names = {k[len(prefix) :].split("/", 1)[0] for k in self.blobs if k.startswith(prefix)}
        return sorted(names | set(super().list_names(uri)))


def default_audit_dir(checkpoint_root: str) -> str:
    """Beside the checkpoint: ``<checkpoint>-audit``."""
    return checkpoint_root.rstrip("/") + "-audit"


def _utc(when: dt.datetime) -> dt.datetime:
    return when.astimezone(dt.UTC) if when.tzinfo else when.replace(tzinfo=dt.UTC)


@dataclass
class AuditLog:
    """Appends each micro-batch's rows to the table exactly once (see the module docstring).

    ``files`` is the table's folder, ``checkpoint`` the query's checkpoint (for the progress file),
    ``clock`` the wall clock (UTC). Called by the dispatcher after its sinks ran, before the batch commits."""

    files: AuditFiles
    checkpoint: CheckpointStore
    controller_id: int
    controller_epoch: int
    clock: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))
    #: Kafka-style log lines as well (``state.change.logger``)
    log_lines: bool = True
    #: what the last call did: "written", "skipped" (replay of a written batch) or "empty"
    last: str = ""
    _known: dict[str, Any] | None = field(default=None, repr=False)
    #: the last batch whose file this object wrote (step 1 of the module docstring)
    _written: int = field(default=-1, repr=False)

    @property
    def progress_uri(self) -> str:
        return child(self.checkpoint.root, PROGRESS_FILE)

    def _progress(self) -> dict[str, Any]:
        # read once per controller: while it holds the lease, this object is the file's only writer (a
        # successor makes its own AuditLog and reads what this one left)
        if self._known is None:
            if self.checkpoint.exists(self.progress_uri):
                self._known = json.loads(self.checkpoint.read_text(self.progress_uri))
            else:
                self._known = {"committed": -1}
        return dict(self._known)

    def _save(self, progress: dict[str, Any]) -> None:
        self.checkpoint.write_text(self.progress_uri, json.dumps(progress, sort_keys=True))
        self._known = progress

    def prepare(self, batch: AuditBatch) -> PreparedRows:
        """The batch's rows but their time, and its requests' digests (:class:`PreparedRows`): computed from
        the batch alone, writing nothing, so the dispatcher makes them on a thread while the request sink
        waits on Kafka, and passes them to the call that writes the batch."""
        return PreparedRows.of(batch, self.controller_id, self.controller_epoch)

    def __call__(self, batch: AuditBatch, prepared: PreparedRows | None = None) -> None:
        """Log and append ``batch`` (``prepared``: :meth:`prepare` of this very batch, else made here)."""
        progress = self._progress()
        if batch.batch_id <= max(int(progress.get("committed", -1)), self._written):
            # a replay of a batch whose rows are in the table already (its log lines were said then too)
            self.last = "skipped"
            return
        if prepared is None or prepared.batch is not batch:
            prepared = self.prepare(batch)
        digests = prepared.digests
        if self.log_lines:
            log_state_changes(batch, self.controller_id, self.controller_epoch, digests=digests)
        if batch.empty:
            self.last = "empty"
            return
        pending = progress.get("pending")
        if isinstance(pending, dict) and int(pending["batch"]) == batch.batch_id:
            when = dt.datetime.fromisoformat(str(pending["time"]))
            uri = str(pending["file"])
        else:
            now = _utc(self.clock())
            when = now.replace(microsecond=now.microsecond // 1000 * 1000)
            stamp = when.strftime("%Y%m%dT%H%M%S") + f"{when.microsecond // 1000:03d}Z"
            uri = child(
                self.files.root, f"date={when.date().isoformat()}", f"part-b{batch.batch_id:012d}-{stamp}.parquet"
            )
            progress = {
                "committed": batch.batch_id - 1,
                "pending": {"batch": batch.batch_id, "time": when.isoformat(), "file": uri},
            }
            self._save(progress)
        table = prepared.table(when)
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="zstd")
        self.files.write_bytes(uri, sink.getvalue())
        self._written = batch.batch_id
        self.last = "written"
