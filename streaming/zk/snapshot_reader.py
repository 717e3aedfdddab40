"""Read ZooKeeper, in Kafka's layout, into the :class:`core.snapshot.ZkSnapshot` a new controller starts from.

What is read (Kafka's ``KafkaController.initializeControllerContext``):

* ``/controller_epoch`` (epoch and znode version; absent: epoch 0, version -1);
* ``/brokers/ids/<id>`` — Kafka's broker registration (v5 JSON), broker epoch = the znode's czxid;
* ``/brokers/topics/<t>`` (assignment, KIP-455 adding / removing replicas, topic id, znode version);
* ``/brokers/topics/<t>/partitions/<p>/state`` for every partition of the assignment, with versions;
* ``/admin/reassign_partitions``, ``/admin/delete_topics/*``, ``/admin/preferred_replica_election``;
* ``/config/topics/<t>``.

Reads are pipelined (up to ``window`` znodes in flight). The partition-state znodes, the bulk of a large
cluster, are read with ZooKeeper's ``multiRead`` (opcode 22, ZooKeeper >= 3.6), 100 per request, the way the
ZooKeeper sink writes them: 100k state znodes take about a second instead of 10-17 s of one request each
(``bench/snapshot_cost.py``); topic, admin and config znodes 20 per request (each kazoo request costs the
driver ~0.25 ms of CPU: ``bench/snapshot_reread.py``). A server without ``multiRead`` answers it as
unimplemented and the read falls back to one ``get_async`` per znode. Znodes that vanish between listing and
reading are skipped (the controller will hear of the change as an event). The JSON codecs are
:mod:`core.kafka.zkdata`'s, the broker registration's included.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import EXCEPTIONS, NoNodeError, UnimplementedError
from kazoo.protocol.serialization import (
    MultiHeader,
    ZnodeStat,
    int_struct,
    multiheader_struct,
    read_buffer,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import Callback, EventType, WatchedEvent

from core.codec.snapshot import StateTexts, remember_state_texts
from core.cordon import CORDONED_BROKERS
from core.errors import FormatError
from core.kafka import zkdata
from core.kafka.zkdata import CONTROLLER_EPOCH_PATH
from core.kafka.zksnapshot import TopicBlock, snapshot_from_znodes
from core.model import Broker
from core.snapshot import ZkSnapshot
from streaming.errors import StreamingError
from streaming.runtime.collector import gc_paused

log = logging.getLogger("livectl.snapshot")

MULTI_READ_SIZE = 100
"""``getData`` operations per ``multiRead`` request (state znodes are ~100 bytes: ~17 KB per answer)."""

TOPIC_MULTI_READ_SIZE = 20
"""The same for topic, admin and config znodes, which are larger (a topic znode lists every partition's
replicas: ~1.2 KB for 100 partitions, up to ZooKeeper's 1 MB per znode)."""


class SnapshotError(StreamingError):
    """A znode could not be decoded; ``path`` names it and ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def parse_broker_registration(broker_id: int, data: bytes | str, czxid: int, path: str = "") -> Broker:
    """:func:`core.kafka.zkdata.decode_broker_registration`, failing with this layer's :class:`SnapshotError`."""
    try:
        return zkdata.decode_broker_registration(broker_id, data, czxid, path)
    except FormatError as e:
        raise SnapshotError(e.field, e.reason) from None


def get_all(
    client: KazooClient,
    paths: Iterable[str],
    window: int,
    watch: Any = None,
    abort: threading.Event | None = None,
) -> dict[str, tuple[bytes, Any]]:
    """``path -> (data, stat)`` for each path that exists, ``window`` requests in flight at most; each
    with a data watch calling ``watch`` when given. ``abort`` set: stop after the window in flight."""
    out: dict[str, tuple[bytes, Any]] = {}
    todo = list(paths)
    for i in range(0, len(todo), window):
        if abort is not None and abort.is_set():
            raise ReadAbortedError()
        handles = [(p, client.get_async(p, watch=watch)) for p in todo[i : i + window]]
        for p, h in handles:
            try:
                out[p] = h.get()
            except NoNodeError:
                continue
    return out


#: state znodes a read ahead has in flight (one get each): winning the lease stops it within one such window
AHEAD_WINDOW = 500

#: changed state znodes above which the read after winning uses ``multiRead`` (no watches) over one get each
BULK_REREAD = 2000


class ReadAbortedError(StreamingError):
    """A standby's read ahead stopped half-way (it won the lease)."""


class MultiRead:
    """ZooKeeper's ``multiRead`` request (opcode 22): several ``getData`` in one round trip, each answered
    on its own (a missing znode fails only its own operation). kazoo 2.11 has no client call for it, so
    this is the request object its connection serialises and answers (``KazooClient._call``)."""

    type = 22
    _GET_DATA = 4
    _ERROR = -1

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __repr__(self) -> str:
        return f"MultiRead({len(self.paths)} paths, first {self.paths[:1]})"

    def serialize(self) -> bytearray:
        b = bytearray()
        for path in self.paths:
            b.extend(MultiHeader(self._GET_DATA, False, -1).serialize())
            b.extend(write_string(path))
            b.append(0)  # no watch (ZooKeeper 3.8 sets none from a multiRead anyway)
        b.extend(multiheader_struct.pack(-1, True, -1))
        return b

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list[tuple[bytes, Any] | Exception]:
        results: list[tuple[bytes, Any] | Exception] = []
        header, offset = MultiHeader.deserialize(data, offset)
        while not header.done:
            if header.type == cls._GET_DATA:
                value, offset = read_buffer(data, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                offset += stat_struct.size
                results.append((value or b"", stat))
            elif header.type == cls._ERROR:
                err = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[err]())
            else:
                raise ValueError(f"multiRead answered an operation of type {header.type}")
            header, offset = MultiHeader.deserialize(data, offset)
        return results


def multi_get_all(
    client: KazooClient, paths: list[str], window: int, per_request: int = MULTI_READ_SIZE
) -> dict[str, tuple[bytes, Any]]:
    """As :func:`get_all`, with ``multiRead`` requests of ``per_request`` paths, ``window`` znodes in
    flight at most. Raises ``UnimplementedError`` from a server without ``multiRead``."""
    out: dict[str, tuple[bytes, Any]] = {}
    chroot = client.chroot or ""
    in_flight = max(1, window // per_request)
    pending: list[tuple[list[str], Any]] = []

    def drain(chunk: list[str], handle: Any) -> None:
        for p, r in zip(chunk, handle.get(), strict=True):
            if isinstance(r, NoNodeError):
                continue
            if isinstance(r, Exception):
                raise r
            out[p] = r

    for i in range(0, len(paths), per_request):
        chunk = paths[i : i + per_request]
        handle = client.handler.async_result()
        client._call(MultiRead([chroot + p for p in chunk]), handle)
        pending.append((chunk, handle))
        if len(pending) >= in_flight:
            drain(*pending.pop(0))
    for item in pending:
        drain(*item)
    return out


def read_znodes(
    client: KazooClient, paths: list[str], window: int = 5000, per_request: int = MULTI_READ_SIZE
) -> dict[str, tuple[bytes, Any]]:
    """``path -> (data, stat)`` for each of ``paths`` that exists: ``multiRead`` (``per_request`` znodes a
    request) where the server has it, one ``get_async`` per znode where it does not."""
    try:
        return multi_get_all(client, paths, window, per_request)
    except UnimplementedError:
        return get_all(client, paths, window)


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        children: list[str] = client.get_children(path)
        return children
    except NoNodeError:
        return []


def read_brokers(client: KazooClient, window: int = 5000) -> tuple[Broker, ...]:
    """The live broker registrations, sorted by id; ids that are not integers are skipped."""
    ids = sorted(int(c) for c in _children(client, zkdata.BROKER_IDS) if c.isdigit())
    got = get_all(client, (zkdata.broker_path(i) for i in ids), window)
    return tuple(
        parse_broker_registration(i, got[p][0], got[p][1].czxid, p) for i in ids if (p := zkdata.broker_path(i)) in got
    )


def _read_controller_epoch(client: KazooClient) -> tuple[int, int]:
    """``/controller_epoch``'s epoch and znode version (absent: 0 and -1)."""
    try:
        data, stat = client.get(CONTROLLER_EPOCH_PATH)
        return zkdata.decode_controller_epoch(data), stat.version
    except NoNodeError:
        return 0, -1
    except FormatError as e:
        raise SnapshotError(e.field, e.reason) from None


def _read_topic_znodes(client: KazooClient, window: int) -> dict[str, tuple[bytes, Any]]:
    topic_paths = [zkdata.topic_path(t) for t in _children(client, zkdata.BROKER_TOPICS)]
    return read_znodes(client, topic_paths, window, TOPIC_MULTI_READ_SIZE)


def _state_paths(path: str, data: bytes) -> list[str]:
    """The partition-state paths the topic znode at ``path`` (with ``data``) assigns."""
    topic = path.rsplit("/", 1)[1]
    try:
        return [zkdata.partition_state_path(topic, p) for p in zkdata.topic_znode_partitions(data)]
    except (ValueError, AttributeError, TypeError) as e:
        raise SnapshotError(path, f"topic znode is not Kafka's JSON: {e}") from None


def _read_admin_znodes(client: KazooClient, window: int) -> dict[str, tuple[bytes, Any]]:
    admin = [zkdata.REASSIGN_PARTITIONS, zkdata.PREFERRED_REPLICA_ELECTION]
    admin += [zkdata.delete_topic_path(t) for t in _children(client, zkdata.DELETE_TOPICS)]
    admin += [zkdata.topic_config_path(t) for t in _children(client, zkdata.CONFIG_TOPICS)]
    admin += [f"{zkdata.OFFLINE_REPLICAS}/{t}" for t in _children(client, zkdata.OFFLINE_REPLICAS)]
    admin.append(CORDONED_BROKERS)
    return read_znodes(client, admin, window, TOPIC_MULTI_READ_SIZE)


def _text(data: bytes, stat: Any) -> tuple[str | None, int]:
    """A znode as :func:`core.kafka.zksnapshot.snapshot_from_znodes` takes it: its data as text, its version."""
    return (data.decode() if data else None, stat.version)


def _as_text(got: dict[str, tuple[bytes, Any]], into: dict[str, tuple[str | None, int]]) -> None:
    for p, (d, st) in got.items():
        into[p] = _text(d, st)


def _decode(
    znodes: dict[str, tuple[str | None, int]],
    brokers: tuple[Broker, ...],
    epoch: tuple[int, int],
    memo: dict[str, tuple[str, int, Any]] | None = None,
    blocks: dict[str, TopicBlock] | None = None,
) -> ZkSnapshot:
    try:
        return snapshot_from_znodes(znodes, brokers, epoch[0], epoch[1], memo, blocks=blocks)
    except (ValueError, KeyError, TypeError) as e:
        raise SnapshotError("/", f"a znode is not in Kafka's format: {e!r}") from None


def read_snapshot(client: KazooClient, *, window: int = 5000) -> ZkSnapshot:
    """Everything a new controller reads, in one pass (see the module docstring)."""
    epoch = _read_controller_epoch(client)
    brokers = read_brokers(client, window)
    znodes: dict[str, tuple[str | None, int]] = {}
    topics = _read_topic_znodes(client, window)
    _as_text(topics, znodes)
    state_paths = [sp for path, (d, _) in topics.items() for sp in _state_paths(path, d)]
    _as_text(read_znodes(client, state_paths, window), znodes)
    _as_text(_read_admin_znodes(client, window), znodes)
    return _decode(znodes, brokers, epoch)


class SnapshotReader:
    """:func:`read_snapshot` with a memory of what it read and decoded last time.

    Every :meth:`read` reads afresh what Kafka's new controller reads (the controller epoch, the broker
    registrations, every topic znode, the admin and config paths) and decodes again only the topic and
    partition-state znodes whose data or version changed (decoding depends on nothing else). The
    partition-state znodes — nearly all of a large cluster — are read again only where they may have
    changed: a standby's read ahead reads each one with a ZooKeeper data watch (one ``get`` each:
    ZooKeeper sets no watch from a ``multiRead``), and until that watch fires the znode is as read. A topic
    whose topic znode is as read last time and none of whose state znodes' watches fired is taken whole from
    the last read (its decoded block: :class:`core.kafka.zksnapshot.TopicBlock`), without visiting its
    partitions. So what :meth:`read` returns is exactly what a fresh :func:`read_snapshot` returns at that
    moment, versions included:

    * a data watch fires on the znode's next change or deletion, and ZooKeeper delivers it to this session
      before the answer to any later request (its ordering guarantee); the watcher is registered with the
      client before the read is sent, so no notification finds it missing, and a path stays marked changed
      until it is read again;
    * :meth:`read` first waits until kazoo has handed every notification received so far to the watcher
      (a marker queued behind them on kazoo's one callback thread): called after the election's answer, it
      sees every change committed before the election;
    * a state znode that did not exist when read has no watch (ZooKeeper sets none on a missing node): it
      is read again every time, and its topic is never taken whole;
    * watches live on the connection, and kazoo 2.11 does not set them again after a reconnection: any
      connection state but ``CONNECTED`` since the last read makes the next one read every state znode
      again (as does a read that failed half-way).

    A standby reads ahead while it waits for the lease (:mod:`streaming.warm.failover_warm`); the read that
    counts is the one made after winning it. Reads run one at a time."""

    def __init__(self, client: KazooClient, *, window: int = 5000) -> None:
        self.client = client
        self.window = window
        self._memo: dict[str, tuple[str, int, Any]] = {}
        self._lock = threading.Lock()
        #: topic -> its partition-state paths -> (data, stat), as read with a data watch set by that read
        self._states: dict[str, dict[str, tuple[bytes, Any]]] = {}
        #: topic -> the last read's decoded block of it, and its topic znode's data and version then
        self._blocks: dict[str, TopicBlock] = {}
        self._block_from: dict[str, tuple[bytes, int]] = {}
        #: topics whose every partition-state znode is in ``_states`` (each with its watch)
        self._watched: set[str] = set()
        #: guards what kazoo's threads change: the paths whose watch fired, and whether watches may be lost
        self._guard = threading.Lock()
        self._changed: set[str] = set()
        self._stale = True
        client.add_listener(self.on_connection_state)
        #: reads completed (a standby's reads ahead included)
        self.reads = 0
        #: partition-state znodes the last read read from ZooKeeper (the others were known unchanged)
        self.last_state_reads = 0
        #: why the last read read those: the watched ones that changed, or why no watch could be relied on
        self.last_state_reason = ""
        #: topics the last read took whole from the read before (no state znode of theirs visited)
        self.last_topics_kept = 0
        #: why the watches cannot be relied on (while ``_stale``)
        self._stale_reason = "no read ahead"
        #: the last read's snapshot and its topic znodes' data (:meth:`topic_data`)
        self._last_topics: tuple[ZkSnapshot, dict[str, bytes]] | None = None
        #: topic znodes and partition-state entries of a read ahead already encoded for the failover files, by
        #: identity: the read after winning keeps those of topics taken whole, whose text the hand-off then
        #: reuses (:meth:`encode_ahead`; :func:`streaming.query.failover.write_snapshot`)
        self.state_texts: StateTexts = {}

    def read(self, *, ahead: bool = False, abort: threading.Event | None = None) -> ZkSnapshot:
        """The snapshot as ZooKeeper holds it now. ``ahead`` (a standby's read while it waits): the state
        znodes not known unchanged are read one request each, setting their watches (slower than
        ``multiRead``, which sets none; off the critical path); ``abort`` stops such a read half-way
        (:class:`ReadAbortedError`). Otherwise, with the watches lost (or never set), every state znode is read
        with ``multiRead``."""
        # the read that counts is on a new controller's critical path, and makes a new object per changed or
        # new znode but no cycle: the collector's passes over everything the driver holds wait until after it
        # (docs/decisions/2026-11-24-collector-paused.md); a standby's long reads ahead keep it on
        paused = contextlib.nullcontext() if ahead else gc_paused()
        with self._lock, paused:
            started = time.monotonic()
            self._drain_notifications()
            epoch = _read_controller_epoch(self.client)
            brokers = read_brokers(self.client, self.window)
            topics = _read_topic_znodes(self.client, self.window)
            with self._guard:
                stale, stale_reason = self._stale, self._stale_reason
                changed, self._changed = self._changed, set()
                if stale and ahead:  # this read sets the watches again
                    self._stale = False
            znodes: dict[str, tuple[str | None, int]] = {}
            # the blocks are taken while the read runs: a read that fails leaves none to keep (the next read
            # decodes every topic again, from the memo), one stopped half-way leaves them as they were
            previous, self._blocks = self._blocks, {}
            try:
                kept, block_from = self._read_topics(
                    topics,
                    znodes,
                    previous,
                    changed=changed,
                    stale=stale,
                    stale_reason=stale_reason,
                    ahead=ahead,
                    abort=abort,
                )
            except ReadAbortedError:
                self._blocks = previous
                raise
            _as_text(_read_admin_znodes(self.client, self.window), znodes)
            snapshot = _decode(znodes, brokers, epoch, self._memo, kept)
            self._blocks, self._block_from = kept, block_from  # now every topic's block
            self._last_topics = (snapshot, {path.rsplit("/", 1)[1]: d for path, (d, _) in topics.items()})
            self.reads += 1
            if not ahead:
                log.info(
                    "ZooKeeper tree read in %.1f s: %d of %d partition-state znodes read (%s); %d of %d topics taken "
                    "whole from the read before",
                    time.monotonic() - started,
                    self.last_state_reads,
                    len(snapshot.partition_states),
                    self.last_state_reason,
                    self.last_topics_kept,
                    len(snapshot.topics),
                )
            return snapshot

    def encode_ahead(self, snapshot: ZkSnapshot) -> None:
        """Encode ``snapshot``'s topic znodes and partition states into :attr:`state_texts` (only those not
        encoded before; those of other snapshots are forgotten). A standby calls it after each read ahead, on
        the thread that reads; nothing else writes :attr:`state_texts`, and the hand-off reads it only once the
        reads ahead have stopped (a lookup checks the object's identity, so a text is never another's)."""
        remember_state_texts(snapshot, self.state_texts)

    def topic_data(self, snapshot: ZkSnapshot) -> dict[str, bytes]:
        """Each topic znode's data as the read that returned ``snapshot`` got it, by topic (what the admin-path
        watcher is primed with: :meth:`streaming.zk.admin_watch.AdminPathWatcher.prime`); empty for a snapshot
        that is not this reader's last."""
        last = self._last_topics
        return last[1] if last is not None and last[0] is snapshot else {}

    @property
    def remembered(self) -> int:
        """How many znodes' decoded values the next read may reuse."""
        return len(self._memo)

    # ------------------------------------------------------------------ internals

    def _mark_stale(self, reason: str) -> None:
        # not logged here (kazoo's thread, perhaps as the process resumes after a pause that cost it the lease,
        # whose loss must be the only thing said): the next read's line gives the reason
        with self._guard:
            if not self._stale:
                self._stale_reason = reason
            self._stale = True

    def on_connection_state(self, state: str) -> None:
        """kazoo's connection listener: in any state but connected the watches cannot be relied on, so the next
        read reads every znode again."""
        if state != KazooState.CONNECTED:
            self._mark_stale(f"ZooKeeper connection {state}")

    def _on_watch(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE or event.path is None:  # kazoo dropped every watcher (session)
            self._mark_stale(f"watches dropped ({event.state})")
            return
        with self._guard:
            self._changed.add(event.path)

    def _drain_notifications(self, timeout: float = 30.0) -> None:
        """Until kazoo's callback thread has run every watcher call queued before now."""
        done = threading.Event()
        self.client.handler.dispatch_callback(Callback("watch", done.set, ()))
        if not done.wait(timeout):
            self._mark_stale(f"watch notifications not delivered in {timeout:.0f} s")

    def _read_topics(
        self,
        topics: dict[str, tuple[bytes, Any]],
        znodes: dict[str, tuple[str | None, int]],
        blocks: dict[str, TopicBlock],
        *,
        changed: set[str],
        stale: bool,
        stale_reason: str,
        ahead: bool,
        abort: threading.Event | None,
    ) -> tuple[dict[str, TopicBlock], dict[str, tuple[bytes, int]]]:
        """The ``blocks`` (the last read's) of the topics taken whole, and each topic's topic znode data and
        version as read now; the other topics' topic znodes (``topics``: every one, as read now) and
        partition-state znodes go into ``znodes``, their state znodes read where not known unchanged. Sets
        ``last_state_reads`` / ``last_state_reason``; keeps ``_states`` and ``_watched`` for the next read."""
        changed_topics = {p.split("/", 4)[3] for p in changed if p.startswith(_TOPICS_PREFIX)}
        kept: dict[str, TopicBlock] = {}
        fresh: dict[str, list[str]] = {}  # topic -> its state paths
        block_from: dict[str, tuple[bytes, int]] = {}
        for path, (data, stat) in topics.items():
            topic = path.rsplit("/", 1)[1]
            source = block_from[topic] = (data, stat.version)
            if (
                not stale
                and topic in self._watched
                and topic not in changed_topics
                and self._block_from.get(topic) == source
                and topic in blocks
            ):
                kept[topic] = blocks[topic]
            else:
                fresh[topic] = _state_paths(path, data)
                znodes[path] = _text(data, stat)
        self.last_topics_kept = len(kept)
        known = self._states
        for topic in [t for t in known if t not in block_from]:  # topics gone
            del known[topic]
        self._watched.intersection_update(block_from)
        paths = [p for ps in fresh.values() for p in ps]
        if stale:
            known.clear()
            self._watched.clear()
        if stale and not ahead:
            # no watch to rely on: read them all, as a cold read does; the next read ahead sets the watches
            self.last_state_reads = len(paths)
            self.last_state_reason = f"all: {stale_reason}"
            _as_text(read_znodes(self.client, paths, self.window), znodes)
            return kept, block_from
        todo = [p for topic, ps in fresh.items() for p in ps if p in changed or p not in known.get(topic, ())]
        self.last_state_reads = len(todo)
        self.last_state_reason = "the others watched, unchanged"
        # many changed (the last controller's large batch): multiRead is quicker than one get each; those get
        # no watch, so the reader forgets them (the next read ahead reads them again)
        bulk = not ahead and len(todo) > BULK_REREAD
        got = read_znodes(self.client, todo, self.window) if bulk else self._watch_and_get(todo, ahead, abort)
        for topic, ps in fresh.items():
            was = known.get(topic, {})
            now = known[topic] = {}
            for p in ps:
                if p in got:
                    value = got[p]
                    if not bulk:
                        now[p] = value
                elif p in was and p not in changed:
                    value = now[p] = was[p]
                else:  # missing
                    continue
                znodes[p] = _text(*value)
            if len(now) == len(ps):
                self._watched.add(topic)
            else:  # a state znode missing (no watch on it) or read without one: read again next time
                self._watched.discard(topic)
        return kept, block_from

    def _watch_and_get(
        self, todo: list[str], ahead: bool, abort: threading.Event | None
    ) -> dict[str, tuple[bytes, Any]]:
        """``todo``'s znodes, one ``get`` each with this reader's data watch."""
        chroot = self.client.chroot or ""
        watchers = self.client._data_watchers
        for p in todo:  # registered before the read: a notification never finds the watcher missing
            watchers[chroot + p].add(self._on_watch)
        try:
            # a read ahead goes in small windows, so that winning the lease stops it within one
            window = min(self.window, AHEAD_WINDOW) if ahead else self.window
            got = get_all(self.client, todo, window, watch=self._on_watch, abort=abort)
            if abort is not None and abort.is_set():
                raise ReadAbortedError()  # before decoding: the read after winning is waiting for the lock
        except ReadAbortedError:
            # stopped, not failed: the watches set on what is known still hold; what this read was to read
            # is read by the next one, as if its watch had fired
            with self._guard:
                self._changed.update(todo)
            raise
        except BaseException:
            self._mark_stale("a read failed half-way")
            raise
        return got


_TOPICS_PREFIX = zkdata.BROKER_TOPICS + "/"
