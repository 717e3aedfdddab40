"""The ``applyInPandasWithState`` step: one call per bucket per micro-batch runs ``core.controller.step``.

Input rows are :data:`streaming.query.routing.ROUTED_SCHEMA`; the function sorts them into stream order
(record time, source topic/partition, offset, split index), turns them into core events (loading the
bucket's slice of a failover snapshot for a ``failover_ref`` row, keeping one tick; which reference and
which events are the policy of :mod:`streaming.query.failover_refs`), runs one ``step`` and
yields the decisions as rows of :data:`OUTPUT_SCHEMA`, followed by one ``metrics`` row with the bucket's
Kafka controller metrics. Rejected records (bucket -1) pass straight through; that group holds no state.
A row's payload of :data:`PACK_MIN_CHARS` or more leaves the bucket zstd-compressed in the ``packed`` column
(:func:`output_frame`); the dispatcher reads every payload through :func:`payloads`.

The step is :func:`core.controller.step_isolating`: an event whose handling raises (a bug; bad input is
refused before it gets here) is left out — the step runs again from the bucket's state without it, so the
new state is exactly that of a step over the other events, and a replay of the micro-batch leaves out the
same event — and comes out as a ``rejected`` row (:func:`quarantine_row`) with the exception, for
``livectl.rejected``. One record never stops the query in a loop.

The bucket's state is one binary blob: the controller state's JSON form compressed with pyarrow's zstd
codec (a 12.5k-partition bucket is ~100–200 kB), plus the format version and the decompressed size. Only
a batch that changes the state rewrites it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import zstandard

from core import controller
from core import decisions as dc
from core import events as ev
from core.codec.decision_rows import decision_row_text
from core.context_codec import context_head
from core.controller.metrics import BUCKET_GAUGES
from core.kafka.error_codes import KafkaError as Errors
from core.kafka.request_encoding import EncodeMemo
from streaming.monitoring import observability
from streaming.query import failover
from streaming.query import outcome as decided
from streaming.query.bucket_keys import bucket_of_key
from streaming.query.failover_refs import Origin, applicable_events, events_of
from streaming.query.request_ids import refuse_reused
from streaming.query.routing import KIND_REJECTED, REJECTED_BUCKET
from streaming.runtime.collector import gc_paused

STATE_FORMAT = 1

#: Spark DDL of the bucket state
STATE_SCHEMA = "format int, size long, blob binary"

#: the metric columns of the decision rows (Kafka's gauge names)
METRIC_COLUMNS = BUCKET_GAUGES

#: the decision rows' column of a payload sent compressed (:func:`output_frame`)
PACKED_COLUMN = "packed"
#: Spark DDL of the decision rows
OUTPUT_SCHEMA = (
    "bucket int, seq int, kind string, payload string, "
    + ", ".join(f"{m} long" for m in METRIC_COLUMNS)
    + f", {PACKED_COLUMN} binary"
)
#: the columns of a decision row as :func:`decision_rows` makes it (:func:`output_frame` adds the packed one)
OUTPUT_COLUMNS = ["bucket", "seq", "kind", "payload", *METRIC_COLUMNS]
#: a payload of at least this many characters leaves the bucket compressed: a failover's request rows are
#: megabytes of JSON each (75 MB for 100k partitions), which the JVM otherwise copies row by row out of the
#: Python worker, into the task's result, to the driver and back to its Python
#: (docs/decisions/2026-11-29-packed-decision-rows.md)
PACK_MIN_CHARS = 64 * 1024
#: decision rows carry zeros in the metric columns: the observed sums then count metrics rows only
_NO_METRICS = (0,) * len(METRIC_COLUMNS)

KIND_METRICS = "metrics"
#: the metrics row's per-broker leader imbalance counts (:func:`core.controller.imbalance`)
IMBALANCE_KEY = "imbalance"
#: the metrics row's leader-balance report: movable partitions per preferred broker and whether an
#: ``elect-leaders --all`` is queued (:func:`core.controller.leader_moves`)
LEADER_MOVES_KEY = "leader_moves"
KIND_ZK = dc.ZkWrite.TYPE
KIND_REQUEST = dc.BrokerRequest.TYPE
KIND_ADMIN_RESULT = dc.AdminResult.TYPE
KIND_FAILURE = dc.StateChangeFailure.TYPE


def dump_state(state: controller.ControllerState) -> tuple[int, int, bytes]:
    """The state as stored: compact JSON (orjson: the standard library's bytes for ASCII text, 5× faster;
    ``to_dict`` is most of the cost) compressed with zstd."""
    raw = orjson.dumps(state.to_dict())
    return STATE_FORMAT, len(raw), pa.compress(raw, codec="zstd", asbytes=True)


def load_state(fmt: int, size: int, blob: bytes) -> controller.ControllerState:
    """Inverse of :func:`dump_state`; reads every blob of format :data:`STATE_FORMAT` (those written with the
    standard library's ``json`` before too: the same JSON)."""
    return controller.ControllerState.from_dict(state_dict(fmt, size, blob))


def state_dict(fmt: int, size: int, blob: bytes) -> dict[str, Any]:
    """The stored state's JSON object (:func:`load_state` without building the state from it)."""
    if fmt != STATE_FORMAT:
        raise ValueError(f"bucket state format {fmt} is not supported by this livectl (reads {STATE_FORMAT})")
    raw = pa.decompress(blob, decompressed_size=size, codec="zstd", asbytes=True)
    loaded: dict[str, Any] = orjson.loads(raw)
    return loaded


#: bucket -> (digest of its stored blob, the state it decodes to), per Python worker. Spark reuses
#: workers, so a bucket's next batch usually finds its state here and skips the decode (a third of a
#: 12.5k-partition bucket's call). ``step`` never mutates its input, so sharing the object is safe; a
#: digest mismatch (another worker ran the bucket since, or a replay) decodes the blob as usual.
_STATE_CACHE: dict[int, tuple[bytes, controller.ControllerState]] = {}


def state_digest(blob: bytes) -> bytes:
    """The name a stored blob's state has in this worker's cache (BLAKE2, 16 bytes)."""
    return hashlib.blake2b(blob, digest_size=16).digest()


def whole_state(bucket: int, fmt: int, size: int, blob: bytes) -> controller.ControllerState:
    """The bucket's whole stored state as a step gets it: from this worker's cache when ``blob`` is the one
    cached, else decoded (context included) and cached."""
    current, undecoded = _stored(bucket, fmt, size, blob)
    return current if undecoded is None else _decoded(bucket, undecoded)


def cached_state(bucket: int) -> controller.ControllerState | None:
    """The state this worker keeps for ``bucket`` (whatever blob it came from), or ``None``."""
    hit = _STATE_CACHE.get(bucket)
    return None if hit is None else hit[1]


def cached_buckets() -> frozenset[int]:
    """The buckets whose states this worker keeps."""
    return frozenset(_STATE_CACHE)


def cache_state(bucket: int, blob: bytes, state: controller.ControllerState) -> None:
    """Keep ``state`` as what the stored ``blob`` of ``bucket`` decodes to (a later step with that blob uses it)."""
    _STATE_CACHE[bucket] = (state_digest(blob), state)


def forget_states(bucket: int | None = None) -> None:
    """Drop the kept state of ``bucket``, or of every bucket: its next step decodes its stored blob."""
    if bucket is None:
        _STATE_CACHE.clear()
    else:
        _STATE_CACHE.pop(bucket, None)


def _stored(
    bucket: int, fmt: int, size: int, blob: bytes
) -> tuple[controller.ControllerState, tuple[bytes, dict[str, Any]] | None]:
    """The bucket's stored state. From the worker's cache when the blob is the one cached (and ``None``);
    otherwise decoded but for its context, of which only the head (:func:`core.context_codec.context_head`), with
    the blob's digest and the state's JSON object to decode it whole from once the step needs the context
    (:func:`decide_rows`: a takeover's failover batch replaces it first, in a worker that never ran the bucket)."""
    digest = state_digest(blob)
    hit = _STATE_CACHE.get(bucket)
    if hit is not None and hit[0] == digest and fmt == STATE_FORMAT:
        return hit[1], None
    data = state_dict(fmt, size, blob)
    return controller.ControllerState.from_dict(data, context=context_head(data["context"])), (digest, data)


def _decoded(bucket: int, undecoded: tuple[bytes, dict[str, Any]]) -> controller.ControllerState:
    """The whole stored state of :func:`_stored`'s ``undecoded`` (then cached)."""
    digest, data = undecoded
    whole = controller.ControllerState.from_dict(data)
    _STATE_CACHE[bucket] = (digest, whole)
    return whole


def quarantine_row(bucket: int, origin: Origin, error: str) -> str:
    """The ``rejected`` row of an event whose processing raised (:func:`core.controller.step_isolating`
    left it out): the dispatcher sends it to ``livectl.rejected`` with the error, and answers an admin
    command among them with Kafka's ``UNKNOWN_SERVER_ERROR``."""
    src, offset, payload = origin
    topic, _, partition = src.rpartition("/")
    return json.dumps(
        {
            "source_topic": topic or src,
            "source_partition": int(partition) if partition.isdigit() else -1,
            "source_offset": offset,
            "payload": payload,
            "expectations": ["internal:step"],
            "reasons": [
                f"bucket {bucket}: processing the event raised {error}; it was left out and the bucket's state "
                "is as it would be without it"
            ],
            "error": Errors.UNKNOWN_SERVER_ERROR.name,
        }
    )


def decision_rows(bucket: int, decisions: Iterable[dc.Decision]) -> list[list[Any]]:
    """The decisions as output rows (:func:`core.codec.decision_rows.decision_row_text`: a broker request's
    ``topicStates`` entries each their own line, as the request sink writes them); partition states that
    several requests of one step share are encoded once (the memos)."""
    rows: list[list[Any]] = []
    memo = EncodeMemo()
    for seq, d in enumerate(decisions):
        rows.append([bucket, seq, d.TYPE, decision_row_text(d, memo), *_NO_METRICS])
    return rows


def make_step(
    checkpoint_dir: str | None,
    config: controller.ControllerConfig | None = None,
    summaries: bool = False,
    num_buckets: int = 0,
) -> Any:
    """The function given to ``applyInPandasWithState`` for the query whose checkpoint is ``checkpoint_dir``
    (its qualified URI). It runs in Python workers on the executors, which read failover snapshots from
    the copies the driver shipped (:class:`streaming.query.failover.ShippedSnapshots`). ``config`` (the settings'
    controller configs with ZooKeeper's dynamic ones, as read at the driver's start) is what a bucket runs
    with from the controller failover of this run on. With ``summaries`` each bucket also reports its
    ``summary`` row (the metrics endpoint and status page are on). With ``num_buckets`` the grouping key
    is a :mod:`streaming.query.bucket_keys` key, and the bucket is that key modulo ``num_buckets``."""
    shipped = failover.ShippedSnapshots()

    def step(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        if num_buckets > 0:
            key = (bucket_of_key(int(key[0]), num_buckets), *key[1:])
        return step_bucket(
            key,
            frames,
            state,
            checkpoint_dir,
            shipped,
            config=config,
            summaries=summaries,
            outcomes=decided.shipped_outcome,
        )

    return step


def step_bucket(
    key: tuple[Any, ...],
    frames: Iterator[pd.DataFrame],
    state: Any,
    checkpoint_dir: str | None = None,
    snapshots: failover.SnapshotFiles | None = None,
    *,
    config: controller.ControllerConfig | None = None,
    summaries: bool = False,
    outcomes: decided.DecidedFiles | None = None,
) -> Iterator[pd.DataFrame]:
    """One bucket's micro-batch (``GroupStateTimeout.NoTimeout``); ``checkpoint_dir`` (when given) is where
    this query's failover snapshots live, ``snapshots`` how to read them (default: the shipped copies),
    ``outcomes`` where failover outcomes decided ahead are (:mod:`streaming.query.decided`; default: none)."""
    bucket = int(key[0])
    frame = pd.concat(list(frames), ignore_index=True)
    if bucket == REJECTED_BUCKET:
        rejected = frame[frame["kind"] == KIND_REJECTED].sort_values(["ts", "src", "offset"], kind="stable")
        rows = [[bucket, i, KIND_REJECTED, p, *_NO_METRICS] for i, p in enumerate(rejected["payload"])]
        yield output_frame(rows)
        return
    with gc_paused():  # the new state is ~0.5M acyclic objects per 12.5k partitions (streaming.runtime.collector)
        out = decide_rows(
            bucket,
            frame,
            state,
            checkpoint_dir,
            snapshots,
            config=config,
            summaries=summaries,
            outcomes=outcomes,
        )
    yield out


def decide_rows(
    bucket: int,
    frame: pd.DataFrame,
    state: Any,
    checkpoint_dir: str | None,
    snapshots: failover.SnapshotFiles | None,
    *,
    config: controller.ControllerConfig | None,
    summaries: bool = False,
    outcomes: decided.DecidedFiles | None = None,
) -> pd.DataFrame:
    """The bucket's step (see :func:`step_bucket`): its state updated, its output frame returned."""
    stored: controller.ControllerState | None = None
    undecoded: tuple[bytes, dict[str, Any]] | None = None
    if state.exists:
        fmt, size, blob = state.get
        current, undecoded = _stored(bucket, int(fmt), int(size), bytes(blob))
        if undecoded is None:
            stored = current
    else:
        current = controller.ControllerState()
    if outcomes is not None and not summaries:
        ahead = decided.take(
            bucket,
            frame,
            current,
            checkpoint_dir=checkpoint_dir,
            snapshots=snapshots if snapshots is not None else failover.ShippedSnapshots(),
            config=config,
            files=outcomes,
        )
        if ahead is not None:  # the standby's outcome of this very batch: the same rows and state bytes
            state.update(ahead.state)
            forget_states(bucket)  # the new state's objects are not here: the next batch decodes it
            return ahead.frame()
    loaded = current.context.controller_id >= 0
    # an admin record whose request_id an earlier one of the batch holds is refused, in every bucket alike
    frame, reused = refuse_reused(bucket, frame)
    origins: list[Origin] = []
    events, skipped = events_of(
        bucket, frame, current.context.epoch, checkpoint_dir, loaded=loaded, origins=origins, snapshots=snapshots
    )
    kept, refused = applicable_events(current, events)
    origins = origins[len(events) - len(kept) :]
    # the stored context is decoded only if the step reads it: a controller failover first replaces it before
    # anything does (a takeover's first batch, in a worker that never ran the bucket: ~0.7 s of a 50k-partition
    # bucket's decode saved); the summary compares the step's elections with it
    if undecoded is not None and (summaries or not kept or not isinstance(kept[0], ev.ControllerFailover)):
        current = stored = _decoded(bucket, undecoded)
        undecoded = None
    # from this run's controller failover on, the bucket runs with the configs the driver read
    new_config = config if any(isinstance(e, ev.ControllerFailover) for e in kept) else None

    def configured(s: controller.ControllerState) -> controller.ControllerState:
        return s if new_config is None else dataclasses.replace(s, config=new_config)

    current = configured(current)
    new_state, decisions, quarantined = controller.step_isolating(current, kept)
    if undecoded is not None and quarantined and quarantined[0].index == 0:
        # the failover itself was left out (handling it raised): the batch's other events apply to the stored
        # context, as they would have without the skipped decode
        stored = _decoded(bucket, undecoded)
        current = configured(stored)
        new_state, decisions, quarantined = controller.step_isolating(current, kept)
    if new_state != stored:
        dumped = dump_state(new_state)
        state.update(dumped)
        cache_state(bucket, dumped[2], new_state)
    # else the batch changed nothing here (ticks only, as in every bucket but one for an admin command):
    # the stored blob stands, so neither re-serialised (0.15 s per 12.5k partitions) nor written to the
    # state store; comparing costs ~3 ms, the unchanged parts being the same objects
    rows = decision_rows(bucket, [*refused, *decisions, *skipped])
    rows.extend([bucket, len(rows) + i, KIND_REJECTED, r, *_NO_METRICS] for i, r in enumerate(reused))
    for q in quarantined:
        rows.append([bucket, len(rows), KIND_REJECTED, quarantine_row(bucket, origins[q.index], q.error), *_NO_METRICS])
    m, counts = controller.metrics_and_imbalance(new_state)
    # per preferred broker (not led by it, preferred by it): the driver sums them for auto leader rebalance
    imbalance = {str(b): list(c) for b, c in counts.items()}
    movable, queued = controller.leader_moves(new_state)
    moves = {"movable": {str(b): n for b, n in movable.items()}, "queued": queued}
    payload = json.dumps({**m, IMBALANCE_KEY: imbalance, LEADER_MOVES_KEY: moves})
    rows.append([bucket, len(rows), KIND_METRICS, payload, *[int(m.get(c, 0)) for c in METRIC_COLUMNS]])
    if summaries:
        # anything besides the metrics row (see summary_payload), or a new cluster min.insync.replicas
        changed = len(rows) > 1 or new_state.config.min_insync_replicas != current.config.min_insync_replicas
        summary = observability.summary_payload(
            current.context,
            new_state.context,
            frame,
            bucket,
            changed=changed,
            cluster_min_isr=new_state.config.min_insync_replicas,
        )
        rows.append([bucket, len(rows), observability.KIND_SUMMARY, summary, *_NO_METRICS])
    return output_frame(rows)


def output_frame(rows: list[list[Any]]) -> pd.DataFrame:
    """The bucket's output: ``rows`` (of :data:`OUTPUT_COLUMNS`) with the :data:`PACKED_COLUMN` of
    :data:`OUTPUT_SCHEMA`. A payload of :data:`PACK_MIN_CHARS` or more goes there as a zstd frame (level 1, its
    size in the frame) of its UTF-8 text, the row's ``payload`` then empty — in ``rows`` too, which the frame
    takes over (a copy would hold a failover's 37 MB texts twice); :func:`payloads` gives them back."""
    packer: zstandard.ZstdCompressor | None = None
    packed: list[bytes | None] = []
    for row in rows:
        payload = row[3]
        if len(payload) < PACK_MIN_CHARS:
            packed.append(None)
            continue
        packer = packer or zstandard.ZstdCompressor(level=1)
        packed.append(packer.compress(payload.encode()))
        row[3] = ""
    out = pd.DataFrame(rows, columns=OUTPUT_COLUMNS)
    for c in METRIC_COLUMNS:
        out[c] = out[c].astype("int64")
    out[PACKED_COLUMN] = pd.Series(packed, index=out.index, dtype=object)
    return out


def payloads(frame: pd.DataFrame) -> list[str]:
    """The payload of each row of a bucket's output (:func:`output_frame`), a packed one decompressed; a frame
    without the :data:`PACKED_COLUMN` (rows made by hand) as it is."""
    texts = list(frame["payload"]) if "payload" in frame.columns else []
    if PACKED_COLUMN not in frame.columns:
        return texts
    unpacker: zstandard.ZstdDecompressor | None = None
    for i, blob in enumerate(frame[PACKED_COLUMN]):
        if isinstance(blob, bytes | bytearray):  # else None: not packed
            unpacker = unpacker or zstandard.ZstdDecompressor()
            texts[i] = unpacker.decompress(blob).decode()
    return texts
