"""What the sinks accept and return: the fencing token, per-batch results and the sink protocols.

The real sinks (:mod:`sinks.zookeeper`, :mod:`sinks.requests`) and the fakes (:mod:`sinks.memory`)
implement the same :class:`ZkSinkPort` / :class:`RequestSinkPort`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from core.decisions import AdminResult, BrokerRequest, ZkWrite


@dataclass(frozen=True)
class Fence:
    """The fencing token granted with the controller lease: the epoch this controller writes into
    requests and the ``/controller_epoch`` znode version every ZooKeeper transaction checks."""

    controller_epoch: int
    epoch_zk_version: int


class ZkCode(StrEnum):
    """ZooKeeper's names (``KeeperException.Code``, kazoo's exception classes without ``Error``) of the
    refusals the sinks report and their callers act on: the one place livectl spells them."""

    BAD_VERSION = "BadVersion"
    NO_NODE = "NoNode"
    NODE_EXISTS = "NodeExists"
    NOT_EMPTY = "NotEmpty"


#: :attr:`FailedWrite.error` of a write the sink did not attempt (see :class:`FailedWrite`)
NOT_ATTEMPTED = "NotAttempted"


@dataclass(frozen=True)
class FailedWrite:
    """A write that ZooKeeper refused without fencing: ``index`` is its position in the batch's list,
    ``error`` ZooKeeper's code name (a :class:`ZkCode`, as text), or
    :data:`NOT_ATTEMPTED` for a write beneath a znode whose creation ZooKeeper refused earlier in the
    batch (the znode belongs to someone else: nothing is written into it)."""

    index: int
    write: ZkWrite
    error: str


@dataclass(frozen=True)
class ZkBatchResult:
    """Outcome of one micro-batch of ZooKeeper writes.

    ``skipped`` counts the writes an earlier attempt at the same batch id had already done (replay after
    a crash); ``failed`` also repeats the refusals that attempt recorded among them. ``applied`` +
    ``skipped`` + the failures at or after index ``skipped`` = the number of writes given."""

    batch_id: int
    applied: int
    skipped: int
    failed: tuple[FailedWrite, ...]
    transactions: int

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass(frozen=True)
class Rejected:
    """An input record that failed parsing or validation, for ``livectl.rejected``."""

    source_topic: str
    source_partition: int
    source_offset: int
    payload: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class RequestBatchResult:
    """Outcome of one micro-batch of messages: ``written`` sent and acknowledged now, ``skipped``
    already on the topic from an earlier attempt at the same batch id."""

    batch_id: int
    written: int
    skipped: int


class ZkSinkPort(Protocol):
    def write_batch(self, batch_id: int, writes: Sequence[ZkWrite]) -> ZkBatchResult:
        """Apply ``writes`` in order, fenced; idempotent per ``batch_id``. Raises only
        ``ControllerFencedError`` or ``SinkUnavailableError``/``SinkStateError``."""
        ...


class RequestSinkPort(Protocol):
    def write_requests(self, batch_id: int, requests: Sequence[BrokerRequest]) -> RequestBatchResult: ...

    def write_admin_results(self, batch_id: int, results: Sequence[AdminResult]) -> RequestBatchResult: ...

    def write_rejected(self, batch_id: int, rejected: Sequence[Rejected]) -> RequestBatchResult: ...
