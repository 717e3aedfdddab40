"""The state-change log: every decision of a micro-batch, as Parquet rows and as Kafka-style log lines.

Kafka's controller writes what it decided to ``state-change.log`` (logger ``state.change.logger``); operators
read it when something went wrong. livectl does both:

* **log lines** under the logger :data:`~streaming.monitoring.state_change_log.STATE_CHANGE_LOGGER`
  (``state.change.logger``, Kafka's name), each prefixed ``[Controller id=<id> epoch=<epoch>]`` as Kafka's
  ``StateChangeLogger`` prefixes them. Per broker and request type one INFO line (Kafka's "Sending LeaderAndIsr request
  to broker …" summary), admin results at INFO, refused ZooKeeper writes and state-change failures at ERROR; each znode
  write and each partition state sent at DEBUG (Kafka logs those at TRACE; 10k partitions make 10k lines);
* **a Parquet table** (:data:`~streaming.monitoring.audit_rows.AUDIT_SCHEMA`), one row per decision: each ZooKeeper
  write (with its outcome, ``written`` or ``refused``), each partition of each LeaderAndIsr / StopReplica / response
  (the brokers that were sent the same partition state are one row; an UpdateMetadata, which carries the same states to
  every live broker, is one row per broker with its partition count), each admin result, each state-change failure —
  with the micro-batch id, the controller's id and epoch and the batch's time. Files are partitioned by date
  (``date=YYYY-MM-DD/``) in Hive's layout, so Spark SQL (``spark.read.parquet(dir)``) and pyarrow read it as one table
  with a ``date`` column.

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

One progress write per batch, not two (pending, then committed): each write is a round trip to the checkpoint's
file system (``bench/feature_cost.py`` measures it).

The progress file lives in the checkpoint, so a new checkpoint (batch ids starting again at 0) starts a new
sequence; file names carry the first attempt's time as well as the batch id, so the new files never
replace the old ones. The table itself lives outside the checkpoint (by default beside it,
``<checkpoint>-audit``), so deleting a checkpoint keeps the history.

Where each part lives: the rows in :mod:`streaming.monitoring.audit_rows`, the log lines in
:mod:`streaming.monitoring.state_change_log`, both from the requests as :mod:`streaming.monitoring.request_digest`
reads them once; this module appends the table, exactly once per batch.

Every file goes through ``pyarrow.fs`` for the table's URI (:class:`FileSystemAuditFiles`), as the
checkpoint's do (:mod:`streaming.runtime.checkpoint_fs`): ``file:``, ``hdfs://``, ``s3a://``, ….
"""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow.parquet as pq

from streaming.monitoring.audit_rows import AuditBatch, PreparedRows
from streaming.monitoring.state_change_log import log_state_changes
from streaming.runtime.checkpoint_fs import (
    CheckpointStore,
    FileSystemCheckpointStore,
    MemoryCheckpointStore,
    child,
)

#: the progress file, inside the checkpoint
PROGRESS_FILE = "audit-progress.json"


class AuditFiles(CheckpointStore, Protocol):
    """The table's file system: a :class:`CheckpointStore` that also writes bytes."""

    def write_bytes(self, uri: str, data: bytes) -> None:
        """Write the whole file under a hidden temporary name, then rename it into place (replacing it)."""
        ...


class FileSystemAuditFiles(FileSystemCheckpointStore):
    """The table's folder through ``pyarrow.fs`` for its URI, as the checkpoint's files."""

    def __init__(self, location: str, *, default_fs: str | None = None) -> None:
        super().__init__(location, default_fs=default_fs)
        #: the date folders made so far: one ``create_dir`` per folder, not per file (on HDFS a round trip each)
        self._made: set[str] = set()

    def _make_folder(self, path: str) -> None:
        if path not in self._made:
            super()._make_folder(path)
            self._made.add(path)

    def write_bytes(self, uri: str, data: bytes) -> None:
        self._write(uri, data)


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
