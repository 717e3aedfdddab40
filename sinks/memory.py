"""In-memory fakes of the sinks, with the same interface and contracts, for tests of the layers above.

* :class:`MemoryZooKeeper` — a znode tree (data + version) with ZooKeeper's create / set / delete rules
  (a delete of a znode with children is refused with ``NotEmpty``; ``delete_tree`` is the recursive one):
  the one in-memory ZooKeeper of the tests.
* :class:`MemoryZkSink` — :class:`sinks.ports.ZkSinkPort` over a :class:`MemoryZooKeeper`: fenced by the
  version of ``/controller_epoch``, compare-and-set, ``make_parents``, ``DELETE_TREE``, failures
  returned, idempotent replay by batch id through the same progress znode as
  :class:`sinks.zookeeper.ZooKeeperSink`. Each write is its own transaction here (``transactions``
  counts writes). ``crash_after`` makes the next ``write_batch`` stop with
  :class:`SinkUnavailableError` after that many writes, to test replay.
* :class:`MemoryRequestSink` — :class:`sinks.ports.RequestSinkPort` that records the messages it
  would send (same merging, ordering, message JSON and replay rule as :class:`sinks.requests.RequestSink`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.decisions import AdminResult, BrokerRequest, ZkOp, ZkWrite
from core.kafka.zkdata import CONTROLLER_EPOCH_PATH
from sinks.errors import ControllerFencedError, SinkUnavailableError
from sinks.ports import NOT_ATTEMPTED, FailedWrite, Fence, Rejected, RequestBatchResult, ZkBatchResult, ZkCode
from sinks.requests import (
    OutboundMessage,
    admin_result_messages,
    rejected_messages,
    request_messages,
)
from sinks.zookeeper import PROGRESS_VERSION, progress_path


class ZkRefusedError(Exception):
    """A refused operation of :class:`MemoryZooKeeper`; ``code`` is ZooKeeper's name for it."""

    def __init__(self, code: str, path: str) -> None:
        self.code = code
        self.path = path
        super().__init__(f"{code}: {path}")


@dataclass
class MemoryZooKeeper:
    """Znodes as ``path -> (data, version)``; the root ``/`` always exists."""

    nodes: dict[str, tuple[bytes, int]] = field(default_factory=lambda: {"/": (b"", 0)})

    @staticmethod
    def _parent(path: str) -> str:
        return path.rsplit("/", 1)[0] or "/"

    def exists(self, path: str) -> bool:
        return path in self.nodes

    def get(self, path: str) -> tuple[bytes, int]:
        if path not in self.nodes:
            raise ZkRefusedError(ZkCode.NO_NODE, path)
        return self.nodes[path]

    def children(self, path: str) -> list[str]:
        if path not in self.nodes:
            raise ZkRefusedError(ZkCode.NO_NODE, path)
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix) :] for p in self.nodes if p.startswith(prefix) and "/" not in p[len(prefix) :])

    def create(self, path: str, data: bytes = b"", make_parents: bool = False) -> None:
        if path in self.nodes:
            raise ZkRefusedError(ZkCode.NODE_EXISTS, path)
        parent = self._parent(path)
        if parent not in self.nodes:
            if not make_parents:
                raise ZkRefusedError(ZkCode.NO_NODE, parent)
            self.create(parent, b"", make_parents=True)
        self.nodes[path] = (data, 0)

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        if path not in self.nodes:
            raise ZkRefusedError(ZkCode.NO_NODE, path)
        old = self.nodes[path][1]
        if version not in (-1, old):
            raise ZkRefusedError(ZkCode.BAD_VERSION, path)
        self.nodes[path] = (data, old + 1)
        return old + 1

    def delete(self, path: str, version: int = -1) -> None:
        if path not in self.nodes:
            raise ZkRefusedError(ZkCode.NO_NODE, path)
        if version not in (-1, self.nodes[path][1]):
            raise ZkRefusedError(ZkCode.BAD_VERSION, path)
        if self.children(path):
            raise ZkRefusedError(ZkCode.NOT_EMPTY, path)
        del self.nodes[path]

    def delete_tree(self, path: str, version: int = -1) -> None:
        if path not in self.nodes:
            return
        if version not in (-1, self.nodes[path][1]):
            raise ZkRefusedError(ZkCode.BAD_VERSION, path)
        prefix = path.rstrip("/") + "/"
        for p in [p for p in self.nodes if p.startswith(prefix)]:
            del self.nodes[p]
        del self.nodes[path]

    def apply(self, w: ZkWrite) -> None:
        """Carry out one of the controller's writes, unfenced, with ZooKeeper's rules (what the sinks do
        with each write of a multi-op); raises :class:`ZkRefusedError` when ZooKeeper would refuse it."""
        data = (w.data or "").encode()
        if w.op is ZkOp.CREATE:
            self.create(w.path, data, w.make_parents)
        elif w.op is ZkOp.SET:
            self.set(w.path, data, w.expected_version)
        elif w.op is ZkOp.DELETE:
            self.delete(w.path, w.expected_version)
        elif w.op is ZkOp.UPSERT:
            if self.exists(w.path):
                self.set(w.path, data, -1)
            else:
                self.create(w.path, data, w.make_parents)
        else:
            self.delete_tree(w.path, w.expected_version)

    def snapshot(self, exclude_prefix: str = "/livectl") -> dict[str, tuple[bytes, int]]:
        """A copy of the tree without the sink's own bookkeeping (for comparing with a clean run)."""
        return {p: v for p, v in self.nodes.items() if not p.startswith(exclude_prefix)}


class MemoryZkSink:
    """:class:`sinks.ports.ZkSinkPort` over a :class:`MemoryZooKeeper` (see the module docstring)."""

    def __init__(self, zk: MemoryZooKeeper, fence: Fence, query_name: str, *, crash_after: int | None = None) -> None:
        self.zk = zk
        self.fence = fence
        self.crash_after = crash_after
        self._progress_path = progress_path(query_name)

    def write_batch(self, batch_id: int, writes: Sequence[ZkWrite]) -> ZkBatchResult:
        n = len(writes)
        if n == 0:
            return ZkBatchResult(batch_id, 0, 0, (), 0)
        start = 0
        failed: list[FailedWrite] = []
        if self.zk.exists(self._progress_path):
            raw = json.loads(self.zk.get(self._progress_path)[0])
            if raw["batch_id"] == batch_id:
                start = min(int(raw["next"]), n)
                failed = [FailedWrite(i, writes[i], e) for i, e in raw.get("failed") or () if 0 <= i < n]
        refused_creates = [
            f.write.path.rstrip("/") + "/"
            for f in failed
            if f.write.op is ZkOp.CREATE and f.error == ZkCode.NODE_EXISTS
        ]
        restored = len(failed)
        done = 0
        for i in range(start, n):
            self._check_fence()
            if self.crash_after is not None and done >= self.crash_after:
                self.crash_after = None
                raise SinkUnavailableError(f"simulated crash after {done} writes of batch {batch_id}")
            if any(writes[i].path.startswith(p) for p in refused_creates):
                failed.append(FailedWrite(i, writes[i], NOT_ATTEMPTED))
                self._record(batch_id, i + 1, failed)
                done += 1
                continue
            try:
                self._apply(writes[i])
            except ZkRefusedError as e:
                failed.append(FailedWrite(i, writes[i], e.code))
                if writes[i].op is ZkOp.CREATE and e.code == ZkCode.NODE_EXISTS:
                    refused_creates.append(writes[i].path.rstrip("/") + "/")
            self._record(batch_id, i + 1, failed)
            done += 1
        new = len(failed) - restored
        return ZkBatchResult(batch_id, n - start - new, start, tuple(sorted(failed, key=lambda f: f.index)), done)

    def check_fence(self) -> None:
        """:meth:`sinks.zookeeper.ZooKeeperSink.check_fence`: raise unless the fence still holds."""
        self._check_fence()

    def _check_fence(self) -> None:
        version = self.zk.nodes.get(CONTROLLER_EPOCH_PATH, (b"", None))[1]
        if version != self.fence.epoch_zk_version:
            reason = ZkCode.NO_NODE if version is None else ZkCode.BAD_VERSION
            raise ControllerFencedError(CONTROLLER_EPOCH_PATH, self.fence.epoch_zk_version, reason)

    def _apply(self, w: ZkWrite) -> None:
        self.zk.apply(w)

    def _record(self, batch_id: int, nxt: int, failed: Sequence[FailedWrite]) -> None:
        body: dict[str, Any] = {
            "version": PROGRESS_VERSION,
            "batch_id": batch_id,
            "next": nxt,
            "controller_epoch": self.fence.controller_epoch,
        }
        if failed:
            body["failed"] = [[f.index, f.error] for f in failed]
        data = json.dumps(body, separators=(",", ":")).encode()
        if self.zk.exists(self._progress_path):
            self.zk.set(self._progress_path, data)
        else:
            self.zk.create(self._progress_path, data, make_parents=True)


@dataclass
class MemoryRequestSink:
    """:class:`sinks.ports.RequestSinkPort` that appends to ``messages`` instead of sending."""

    fence: Fence
    requests_topic: str = "livectl.requests"
    admin_results_topic: str = "livectl.admin-results"
    rejected_topic: str = "livectl.rejected"
    messages: list[OutboundMessage] = field(default_factory=list)

    def _send(self, batch_id: int, out: list[OutboundMessage]) -> RequestBatchResult:
        if not out:
            return RequestBatchResult(batch_id, 0, 0)
        on_topic = [m for m in self.messages if m.topic == out[0].topic]
        # the real sink's tail rule: a later batch id on the topic means an earlier run
        if any(m.identity[0] > batch_id for m in on_topic):
            seen: set[tuple[int, str]] = set()
        else:
            seen = {m.identity for m in on_topic}
        new = [m for m in out if m.identity not in seen]
        self.messages.extend(new)
        return RequestBatchResult(batch_id, len(new), len(out) - len(new))

    def write_requests(self, batch_id: int, requests: Sequence[BrokerRequest]) -> RequestBatchResult:
        return self._send(batch_id, request_messages(self.requests_topic, self.fence, batch_id, requests))

    def write_admin_results(self, batch_id: int, results: Sequence[AdminResult]) -> RequestBatchResult:
        return self._send(batch_id, admin_result_messages(self.admin_results_topic, self.fence, batch_id, results))

    def write_rejected(self, batch_id: int, rejected: Sequence[Rejected]) -> RequestBatchResult:
        return self._send(batch_id, rejected_messages(self.rejected_topic, self.fence, batch_id, rejected))
