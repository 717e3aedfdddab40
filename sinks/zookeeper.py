"""The ZooKeeper sink: applies one micro-batch of :class:`core.decisions.ZkWrite` in fenced multi-ops.

Contract of :meth:`ZooKeeperSink.write_batch` ``(batch_id, writes)``:

* **Fenced.** Every transaction starts with ``check(/controller_epoch, fence.epoch_zk_version)``. If
  that check fails, another controller was elected: nothing of that transaction is written and
  :class:`sinks.errors.ControllerFencedError` is raised; so is it when the session has expired. This is
  the only ZooKeeper refusal that raises.
* **In order.** Writes take effect in list order: the writes are cut, in order, into transactions of at
  most ``ops_per_transaction`` operations (check and progress included) and ``max_transaction_bytes``
  bytes; a write's operations stay in one transaction unless they alone exceed it (a big
  ``DELETE_TREE``). Transactions are pipelined (``commit_async``, up to ``max_in_flight``). ZooKeeper
  runs one session's requests in order, and each transaction also sets the progress znode at the
  version the previous one produced, so if transaction *k* fails, every later one in flight fails too
  and nothing after *k* is applied before *k*'s remainder: order holds across transactions, whatever
  the paths (a reassignment's "RS first, RS = target last" included).
* **Operations.** ``SET`` / ``DELETE`` use ``expected_version`` as compare-and-set (``-1`` = any).
  ``UPSERT`` sets (any version) a znode that exists when the batch is planned and creates it otherwise.
  ``CREATE`` with ``make_parents`` first creates the missing ancestors (persistent, empty) in the same
  transaction. ``DELETE_TREE`` expands to deletes of all descendants, deepest first, then the znode
  itself at ``expected_version``; a missing tree is nothing to do (Kafka's ``deleteRecursive``).
  Existence of ancestors and the trees are read when the batch is planned; earlier writes of the same
  batch are taken into account.
* **Compare-and-set failures are returned, not raised.** When ZooKeeper refuses a write for another
  reason (``BadVersion`` because the znode changed under us, ``NoNode``, ``NodeExists``,
  ``NotEmpty``), its transaction is rolled back; the sink records that write in
  :attr:`ZkBatchResult.failed`, re-plans from the last committed point without it and goes on. Two
  refusals are re-read and redone first (up to ``_REDO_ATTEMPTS`` times), because what the planner read
  was stale: an ``UPSERT`` (the znode appeared or vanished since) and a ``DELETE_TREE`` answered
  ``NotEmpty`` (a child was added since; Kafka's ``deleteRecursive`` retries too). When the creation of
  a znode is refused with ``NodeExists``, the later writes of the batch beneath it are not attempted
  (:data:`sinks.ports.NOT_ATTEMPTED`): the znode is someone else's. The caller decides what a refusal
  means for the requests built on it (:mod:`streaming.query.refusals`).
* **Idempotent replay by batch id.** Each transaction also writes the progress znode
  ``/livectl/sink/<query_name>`` = ``{"version":1,"batch_id":B,"next":N,"controller_epoch":E,
  "failed":[[index,error],…],"checkpoint":ID}``: after it commits, the first ``N`` writes of batch ``B`` are done
  (applied, refused, or nothing to do), and ``failed`` (left out when empty) lists the writes of ``B``
  refused or not attempted so far. ``write_batch(B, …)`` reads that znode first: if it names ``B``, the
  first ``N`` writes are skipped (counted in ``skipped``) and the recorded refusals are reported again (so
  that a replay holds back the same requests as the first attempt would have). Any other batch id starts
  at write 0: Spark only ever replays the last batch of a run, so a progress znode naming a *later* batch
  comes from an earlier run (a new checkpoint restarts batch ids at 0), and so does one whose
  ``checkpoint`` is not this query's checkpoint identity (when the sink is given one). A crash anywhere therefore leaves
  ZooKeeper, after the replay of ``B``, as a clean run would have; the replay's result reports what it did
  itself (``applied``) besides the recorded refusals. This relies on Spark's replay giving the same writes
  for the same batch id (same input offsets, same state version), whichever controller epoch replays it.
  When trailing writes were refused or were no-ops, one last transaction records ``N = len(writes)``. An
  empty batch touches nothing.

Connection loss or a timeout raises :class:`sinks.errors.SinkUnavailableError`: the batch may be
partly written; replaying it completes it.

:meth:`ZooKeeperSink.check_fence` is the same fence without a write: a transaction holding only the
``check``. The dispatcher runs it before each topic write of a batch, so that a controller that lost
its election (a paused process resumed after a takeover) sends nothing to Kafka either, even in a batch
without ZooKeeper writes. An expired session counts as fenced (the ephemeral ``/controller`` is gone).

With ``acl_for`` (Kafka's ``zookeeper.set.acl``, :mod:`sinks.security`) every znode the sink creates
gets the ACL it gives for its path. The progress znode's parents are created unfenced
(``ensure_path``, empty znodes) on first use.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import (
    KazooException,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.paths import join, normpath
from kazoo.protocol.serialization import Delete, SetData

from core.decisions import ZkOp, ZkWrite
from core.kafka.zkdata import CONTROLLER_EPOCH_PATH, SINK_PROGRESS_ROOT
from sinks.errors import ControllerFencedError, SinkStateError, SinkUnavailableError
from sinks.ports import NOT_ATTEMPTED, FailedWrite, Fence, ZkBatchResult, ZkCode

PROGRESS_VERSION = 1
#: bytes counted per operation beyond path and data (request headers, ACL, version)
_OP_OVERHEAD = 64
#: how often one write refused on stale planning (UPSERT, DELETE_TREE ``NotEmpty``) is re-read and redone
_REDO_ATTEMPTS = 3


def progress_path(query_name: str) -> str:
    """The progress znode of the sink of ``query_name``."""
    if not query_name or "/" in query_name:
        raise ValueError(f"query_name {query_name!r} must be non-empty and contain no '/'")
    return f"{SINK_PROGRESS_ROOT}/{query_name}"


def error_name(exc: BaseException) -> str:
    """ZooKeeper's code name for a kazoo exception: ``BadVersionError()`` -> ``BadVersion``."""
    name = type(exc).__name__
    return name.removesuffix("Error") if name.endswith("Error") else name


class _Op(NamedTuple):
    """One operation of a transaction (a tuple: a batch plans tens of thousands of them)."""

    kind: str  # "create" | "set" | "delete"
    path: str
    data: bytes
    version: int
    #: index of the write this operation belongs to
    write: int

    @property
    def size(self) -> int:
        return len(self.path) + len(self.data) + _OP_OVERHEAD


@dataclass
class _Txn:
    ops: list[_Op] = field(default_factory=list)
    size: int = 0
    #: progress after commit: the writes before this index are done
    next: int = 0


@dataclass
class _Progress:
    batch_id: int
    next: int
    #: znode version; ``None`` while the znode does not exist
    zk_version: int | None
    #: (index, error) of the writes of ``batch_id`` refused (or not attempted) so far
    failed: list[tuple[int, str]] = field(default_factory=list)


def _redo(f: FailedWrite) -> bool:
    """Refused because the plan read the tree before someone changed it: read again and redo."""
    return f.write.op is ZkOp.UPSERT or (f.write.op is ZkOp.DELETE_TREE and f.error == ZkCode.NOT_EMPTY)


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b"]`` (top-down, without ``/`` and the path itself)."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


def _depth(path: str) -> int:
    return path.count("/")


def under_chroot(chroot: str, path: str) -> str:
    """``path`` under ``chroot`` as kazoo's own calls send it, from its public ``normpath`` and ``join``."""
    full: str = normpath(join(normpath(join("/", chroot)), path.lstrip("/")))
    return full


def _is_normal(path: str) -> bool:
    """``path`` is what kazoo's normalisation leaves as it is: absolute, no empty, ``.`` or ``..``
    component, no trailing ``/`` (a name starting with ``.`` counts as not normal: it goes through kazoo)."""
    return path.startswith("/") and len(path) > 1 and "//" not in path and "/." not in path and not path.endswith("/")


class ZooKeeperSink:
    """Fenced, ordered, idempotent ZooKeeper writes for one controller lease (see the module doc).

    ``client`` is a started :class:`KazooClient`; ``fence`` comes from the lease; ``query_name`` names
    the progress znode (one sink per query)."""

    def __init__(
        self,
        client: KazooClient,
        fence: Fence,
        query_name: str,
        *,
        ops_per_transaction: int = 100,
        max_transaction_bytes: int = 512 * 1024,
        max_in_flight: int = 8,
        timeout_s: float = 30.0,
        acl_for: Callable[[str], Any] | None = None,
        checkpoint_id: str | None = None,
    ) -> None:
        """``checkpoint_id``: the identity of the query's checkpoint, recorded in the progress znode; a
        progress znode recorded for another checkpoint (an earlier run's, whatever its batch id) is not
        taken as this query's progress."""
        if ops_per_transaction < 3:
            raise ValueError(
                f"ops_per_transaction must be at least 3 (check, progress, one write), got {ops_per_transaction}"
            )
        self._zk = client
        self.fence = fence
        self.query_name = query_name
        #: transactions this sink has had committed, all batches together: a count that grows while a large
        #: batch is written (the replay wait's progress, :mod:`streaming.driver.replay_progress`)
        self.transactions_committed = 0
        self._progress_path = progress_path(query_name)
        self._capacity = ops_per_transaction - 2
        self._max_bytes = max_transaction_bytes
        self._max_in_flight = max(1, max_in_flight)
        self._timeout = timeout_s
        self._root_ready = False
        #: the refusals of the batch being written, recorded in the progress znode with each transaction
        self._failed: dict[int, FailedWrite] = {}
        #: the ACL of each znode created (Kafka's ``zookeeper.set.acl``: :mod:`sinks.security`); None: open
        self._acl_for = acl_for or (lambda _path: None)
        self._checkpoint_id = checkpoint_id

    # ------------------------------------------------------------------ public

    def write_batch(self, batch_id: int, writes: Sequence[ZkWrite]) -> ZkBatchResult:
        """Apply ``writes`` for micro-batch ``batch_id``; see the module docstring for the contract."""
        n = len(writes)
        if n == 0:
            return ZkBatchResult(batch_id, 0, 0, (), 0)
        try:
            return self._write_batch(batch_id, writes)
        except SessionExpiredError as e:
            # the session that holds /controller is gone: another controller may be elected by now
            raise ControllerFencedError(CONTROLLER_EPOCH_PATH, self.fence.epoch_zk_version, error_name(e)) from e
        except (KazooTimeoutError, KazooException) as e:
            raise SinkUnavailableError(f"ZooKeeper did not complete batch {batch_id}: {error_name(e)} {e}") from e

    def check_fence(self) -> None:
        """Raise :class:`ControllerFencedError` unless ``/controller_epoch`` is still at the fence's version
        (checked by ZooKeeper itself, in a transaction of one ``check``) and this session is alive; raise
        :class:`SinkUnavailableError` when ZooKeeper cannot say (connection lost, timeout)."""
        try:
            t = self._zk.transaction()
            t.check(CONTROLLER_EPOCH_PATH, self.fence.epoch_zk_version)
            results = t.commit_async().get(timeout=self._timeout)
        except SessionExpiredError as e:
            raise ControllerFencedError(CONTROLLER_EPOCH_PATH, self.fence.epoch_zk_version, error_name(e)) from e
        except (KazooTimeoutError, KazooException) as e:
            raise SinkUnavailableError(f"ZooKeeper could not check the controller epoch: {error_name(e)} {e}") from e
        bad = next((r for r in results if isinstance(r, Exception)), None)
        if bad is not None:
            raise ControllerFencedError(CONTROLLER_EPOCH_PATH, self.fence.epoch_zk_version, error_name(bad))

    def read_progress(self) -> tuple[int, int] | None:
        """``(batch_id, next)`` from the progress znode, or ``None`` if this query never wrote."""
        p = self._read_progress()
        return None if p.zk_version is None else (p.batch_id, p.next)

    # ------------------------------------------------------------------ internals

    def _write_batch(self, batch_id: int, writes: Sequence[ZkWrite]) -> ZkBatchResult:
        n = len(writes)
        if not self._root_ready:
            self._zk.ensure_path(SINK_PROGRESS_ROOT, acl=self._acl_for(SINK_PROGRESS_ROOT))
            self._root_ready = True
        progress = self._read_progress()
        start = 0
        failed: dict[int, FailedWrite] = {}
        if progress.zk_version is not None and progress.batch_id == batch_id:
            start = min(progress.next, n)
            # the refusals an earlier attempt recorded: reported again, and what they hold back stays held
            failed = {i: FailedWrite(i, writes[i], e) for i, e in progress.failed if 0 <= i < n}
        if start >= n:
            return ZkBatchResult(batch_id, 0, n, tuple(failed[i] for i in sorted(failed)), 0)
        self._failed = failed
        redone: dict[int, int] = {}
        transactions = 0
        committed_next = start
        while committed_next < n:
            txns = self._plan(writes, committed_next, failed.keys())
            committed_next, count, failure = self._run(batch_id, writes, txns, progress, committed_next)
            transactions += count
            if failure is None:
                break
            if _redo(failure) and redone.get(failure.index, 0) < _REDO_ATTEMPTS:
                redone[failure.index] = redone.get(failure.index, 0) + 1
                continue  # planned on what it read before; the next plan reads again
            failed[failure.index] = failure
            if failure.write.op is ZkOp.CREATE and failure.error == ZkCode.NODE_EXISTS:
                below = failure.write.path.rstrip("/") + "/"
                for j in range(failure.index + 1, n):
                    if j not in failed and writes[j].path.startswith(below):
                        failed[j] = FailedWrite(j, writes[j], NOT_ATTEMPTED)
        if (progress.batch_id, progress.next) != (batch_id, n) or progress.zk_version is None:
            self._run(batch_id, writes, [_Txn(next=n)], progress, committed_next)
            transactions += 1
        failures = tuple(failed[i] for i in sorted(failed))
        applied = n - start - sum(1 for i in failed if i >= start)
        return ZkBatchResult(batch_id, applied, start, failures, transactions)

    def _read_progress(self) -> _Progress:
        try:
            data, stat = self._zk.get(self._progress_path)
        except NoNodeError:
            return _Progress(-1, 0, None)
        try:
            raw = json.loads(data)
            if self._checkpoint_id is not None and raw.get("checkpoint") != self._checkpoint_id:
                return _Progress(-1, 0, stat.version)  # another checkpoint's: nothing of this query is done
            failed = [(int(i), str(e)) for i, e in raw.get("failed") or ()]
            return _Progress(int(raw["batch_id"]), int(raw["next"]), stat.version, failed)
        except (ValueError, KeyError, TypeError) as e:
            reason = f"progress znode holds malformed JSON {data[:200]!r}: {e}"
            raise SinkStateError(self._progress_path, reason) from None

    def _progress_data(self, batch_id: int, nxt: int) -> bytes:
        body: dict[str, Any] = {
            "version": PROGRESS_VERSION,
            "batch_id": batch_id,
            "next": nxt,
            "controller_epoch": self.fence.controller_epoch,
        }
        if self._checkpoint_id is not None:
            body["checkpoint"] = self._checkpoint_id
        if self._failed:
            body["failed"] = [[i, self._failed[i].error] for i in sorted(self._failed)]
        return json.dumps(body, separators=(",", ":")).encode()

    def _run(
        self, batch_id: int, writes: Sequence[ZkWrite], txns: Iterable[_Txn], progress: _Progress, committed_next: int
    ) -> tuple[int, int, FailedWrite | None]:
        """Commit ``txns`` pipelined, in order. Returns (committed next, transactions committed, the
        first non-fencing failure or None); updates ``progress`` to what ZooKeeper holds. ``txns`` is
        taken one by one as the pipeline has room (the plan cuts the next transactions while ZooKeeper
        applies the first ones); after a failure no further one is taken."""
        in_flight: deque[tuple[_Txn, Any]] = deque()
        expected = progress.zk_version
        committed = 0
        failure: FailedWrite | None = None
        todo: Iterator[_Txn] | None = iter(txns)
        while True:
            while todo is not None and failure is None and len(in_flight) < self._max_in_flight:
                txn = next(todo, None)
                if txn is None:
                    todo = None
                    break
                in_flight.append((txn, self._submit(batch_id, txn, expected)))
                expected = 0 if expected is None else expected + 1
            if not in_flight:
                break
            txn, handle = in_flight.popleft()
            results = handle.get(timeout=self._timeout)
            bad = next(
                (
                    (i, r)
                    for i, r in enumerate(results)
                    if isinstance(r, Exception) and not isinstance(r, RolledBackError | RuntimeInconsistency)
                ),
                None,
            )
            if bad is None:
                stat = results[1]
                progress.zk_version = 0 if isinstance(stat, str) else stat.version
                progress.batch_id, progress.next = batch_id, txn.next
                committed_next = txn.next
                committed += 1
                self.transactions_committed += 1
                continue
            index, exc = bad
            if index == 0:
                raise ControllerFencedError(CONTROLLER_EPOCH_PATH, self.fence.epoch_zk_version, error_name(exc))
            if failure is not None:
                continue  # a later transaction failing because an earlier one did: expected
            if index == 1:
                raise SinkStateError(
                    self._progress_path,
                    f"changed by someone else while writing batch {batch_id} ({error_name(exc)}); "
                    "is a second sink using the same query name?",
                )
            op = txn.ops[index - 2]
            failure = FailedWrite(op.write, writes[op.write], error_name(exc))
        return committed_next, committed, failure

    def _submit(self, batch_id: int, txn: _Txn, expected_progress_version: int | None) -> Any:
        t = self._zk.transaction()
        t.check(CONTROLLER_EPOCH_PATH, self.fence.epoch_zk_version)
        data = self._progress_data(batch_id, txn.next)
        if expected_progress_version is None:
            t.create(self._progress_path, data, acl=self._acl_for(self._progress_path))
        else:
            t.set_data(self._progress_path, data, version=expected_progress_version)
        # the writes' operations as kazoo's own request values, built here: kazoo's per-call checks and
        # path normalisation cost as much as ZooKeeper's commit of them (bench/zk_sink_cost.py), and the
        # core's paths are absolute and normal (others go through kazoo's normalisation)
        root = self._chroot()
        operations = t.operations
        for op in txn.ops:
            if op.kind == "create":  # rare: kazoo's own call (its ACL defaults)
                t.create(op.path, op.data, acl=self._acl_for(op.path))
                continue
            path = op.path
            full = root + path if _is_normal(path) else under_chroot(self._zk.chroot, path)
            if op.kind == "set":
                operations.append(SetData(full, op.data, op.version))
            else:
                operations.append(Delete(full, op.version))
        return t.commit_async()

    def _chroot(self) -> str:
        """The client's chroot as kazoo prefixes it ('' without one)."""
        root = under_chroot(self._zk.chroot, "")
        return "" if root == "/" else root

    # ------------------------------------------------------------------ planning

    def _plan(self, writes: Sequence[ZkWrite], start: int, excluded: Collection[int]) -> Iterator[_Txn]:
        """Cut writes[start:] (without ``excluded``) into transactions, reading what planning needs now;
        the transactions are cut as they are taken (:meth:`_run` submits the first ones meanwhile)."""
        excluded = frozenset(excluded)  # as it is now: the cut runs later
        todo = [i for i in range(start, len(writes)) if i not in excluded]
        creating = [
            writes[i].path for i in todo if writes[i].op in (ZkOp.CREATE, ZkOp.UPSERT) and writes[i].make_parents
        ]
        parents = {a for path in creating for a in _ancestors(path)}
        exists = self._read_exists(parents | {writes[i].path for i in todo if writes[i].op is ZkOp.UPSERT})
        trees = self._read_trees({writes[i].path for i in todo if writes[i].op is ZkOp.DELETE_TREE})
        return self._cut(writes, start, excluded, exists, trees)

    def _cut(
        self,
        writes: Sequence[ZkWrite],
        start: int,
        excluded: Collection[int],
        exists: dict[str, bool],
        trees: dict[str, list[str]],
    ) -> Iterator[_Txn]:
        """The transactions of :meth:`_plan`, in order, each yielded once it is closed."""
        created: set[str] = set()
        deleted: set[str] = set()

        def present(path: str) -> bool:
            if path in created:
                return True
            if path in deleted:
                return False
            return exists.get(path, path in trees)

        txns: list[_Txn] = []
        cur = _Txn()
        cap, max_bytes = self._capacity, self._max_bytes

        def close(nxt: int) -> None:
            nonlocal cur
            cur.next = nxt
            txns.append(cur)
            cur = _Txn()

        for i in range(start, len(writes)):
            if i in excluded:
                continue
            w = writes[i]
            data = (w.data or "").encode()
            ops: list[_Op] = []
            if w.op is ZkOp.CREATE:
                if w.make_parents:
                    for a in _ancestors(w.path):
                        if not present(a):
                            ops.append(_Op("create", a, b"", -1, i))
                            created.add(a)
                            deleted.discard(a)
                ops.append(_Op("create", w.path, data, -1, i))
                created.add(w.path)
                deleted.discard(w.path)
            elif w.op is ZkOp.UPSERT and present(w.path):
                ops.append(_Op("set", w.path, data, -1, i))
            elif w.op is ZkOp.UPSERT:
                if w.make_parents:
                    for a in _ancestors(w.path):
                        if not present(a):
                            ops.append(_Op("create", a, b"", -1, i))
                            created.add(a)
                            deleted.discard(a)
                ops.append(_Op("create", w.path, data, -1, i))
                created.add(w.path)
                deleted.discard(w.path)
            elif w.op is ZkOp.SET:
                ops.append(_Op("set", w.path, data, w.expected_version, i))
            elif w.op is ZkOp.DELETE:
                ops.append(_Op("delete", w.path, b"", w.expected_version, i))
                deleted.add(w.path)
                created.discard(w.path)
            elif present(w.path):
                prefix = w.path.rstrip("/") + "/"
                below = {p for p in trees.get(w.path, ()) if p not in deleted}
                below |= {p for p in created if p.startswith(prefix)}
                for p in sorted(below, key=lambda p: (-_depth(p), p)):
                    ops.append(_Op("delete", p, b"", -1, i))
                ops.append(_Op("delete", w.path, b"", w.expected_version, i))
                deleted |= below | {w.path}
                created -= below | {w.path}
            if not ops:
                continue
            size = sum(o.size for o in ops)
            if len(cur.ops) + len(ops) > cap or cur.size + size > max_bytes:
                if cur.ops:
                    close(i)
                if len(ops) > cap or size > max_bytes:
                    # too big for one transaction: spread it; a replay re-plans what is left of it
                    for o in ops:
                        if len(cur.ops) + 1 > cap or (cur.ops and cur.size + o.size > max_bytes):
                            close(i)
                        cur.ops.append(o)
                        cur.size += o.size
                    continue
            cur.ops.extend(ops)
            cur.size += size
            if txns:
                yield from txns
                txns.clear()
        if cur.ops:
            # the last transaction also covers the no-op and refused writes after its own
            close(len(writes))
        yield from txns

    def _read_exists(self, paths: set[str]) -> dict[str, bool]:
        handles = [(p, self._zk.exists_async(p)) for p in sorted(paths)]
        return {p: h.get(timeout=self._timeout) is not None for p, h in handles}

    def _read_trees(self, roots: set[str]) -> dict[str, list[str]]:
        """Every descendant of each root (roots that do not exist are absent from the result)."""
        out: dict[str, list[str]] = {}
        for root in sorted(roots):
            found: list[str] = []
            level = [root]
            missing_root = False
            while level:
                handles = [(p, self._zk.get_children_async(p)) for p in level]
                level = []
                for p, h in handles:
                    try:
                        children = h.get(timeout=self._timeout)
                    except NoNodeError:
                        if p == root:
                            missing_root = True
                        continue
                    for c in children:
                        child = f"{p.rstrip('/')}/{c}"
                        found.append(child)
                        level.append(child)
            if not missing_root:
                out[root] = found
        return out
