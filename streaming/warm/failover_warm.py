"""The failover's ZooKeeper read off the critical path: a standby reads ahead while it waits for the lease,
and a new controller with nothing to replay reads while its query starts.

Kafka's controller reads the whole tree on election (``initializeControllerContext``), and so does livectl:
the snapshot a bucket loads always comes from a read made *after* winning the lease (and after the replay
of the previous controller's unfinished micro-batch, when there is one), so it holds every write of every
earlier controller. What is moved earlier is only work whose result cannot depend on that timing:

- **Reading ahead** (a standby, :class:`ReadAhead`): :class:`streaming.zk.snapshot_reader.SnapshotReader` reads
  the tree at once and again every :data:`READ_AHEAD_INTERVAL_S`, setting a data watch on every
  partition-state znode and remembering what it read and decoded. The read after winning reads afresh
  everything but the state znodes, and of those only the ones whose watch fired (or that are new); it
  decodes only what changed: the same snapshot a cold read gives (the argument is the reader's).
  The same thread ships the snapshots of earlier controllers that
  the checkpoint holds to the executors (:func:`streaming.query.failover.ship_snapshots`), which a takeover
  otherwise does after winning, and decides each bucket's failover batch ahead for the tree it read
  (:mod:`streaming.query.decided`; used only where the tree read after winning gives the same slice).
- **Reading early** (:func:`read_in_background`): with no micro-batch to replay, nothing this controller
  does before its failover reference writes to ZooKeeper (its query's source holds every record back until
  the reference, :mod:`streaming.source.kafka_source`), so the read after winning can run beside the query's
  start instead of after it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from core.snapshot import ZkSnapshot
from streaming.query.decided import Decider
from streaming.runtime.background import in_background
from streaming.zk.snapshot_reader import ReadAbortedError, SnapshotReader

log = logging.getLogger("livectl.app")

#: seconds between a standby's reads ahead: after the first (one get per state znode, setting its watch),
#: each reads the topic znodes and the changed state znodes, and decodes what changed
READ_AHEAD_INTERVAL_S = 10.0
#: the most of a core a standby's read-ahead uses (reading, encoding, deciding): after a round that used W
#: seconds of its thread's CPU it waits at least W x (1 - share) / share, so that a standby sharing a host with
#: the active controller leaves it the CPU while the tree churns (docs/decisions/2026-12-08-standby-work-share.md)
READ_AHEAD_WORK_SHARE = 0.25


def pause_after(work_s: float, interval_s: float, share: float) -> float:
    """Seconds to wait after a round of reading ahead that used ``work_s`` of CPU: the interval, or longer so
    that the rounds use at most ``share`` of a core."""
    return max(interval_s, work_s * (1.0 - share) / share)


class ReadAhead:
    """A standby's reads of the ZooKeeper tree while it waits for the lease, on a thread of their own.

    ``prepare`` runs once first (the shipping of earlier snapshots). A failed read is logged and tried
    again at the next interval: reading ahead only saves work, the read that counts comes after winning.
    Rounds are ``interval_s`` apart, or further when their CPU time would otherwise be more than ``work_share``
    of a core (:func:`pause_after`)."""

    def __init__(
        self,
        reader: SnapshotReader,
        *,
        interval_s: float = READ_AHEAD_INTERVAL_S,
        work_share: float = READ_AHEAD_WORK_SHARE,
        prepare: Callable[[], object] | None = None,
        decider: Decider | None = None,
    ) -> None:
        if not 0.0 < work_share <= 1.0:
            raise ValueError(f"work_share: must be in (0, 1], got {work_share}")
        self.reader = reader
        self.interval_s = interval_s
        self.work_share = work_share
        #: the last round's CPU time and the wait after it (seconds), for the log and the tests
        self.last_round: tuple[float, float] | None = None
        self.prepare = prepare
        self.decider = decider
        self._stop = threading.Event()
        self._deciding = False
        self._thread = threading.Thread(target=self._run, name="livectl-read-ahead", daemon=True)

    def start(self) -> ReadAhead:
        self._thread.start()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Stop reading ahead and wait for a read in progress to end (the next read waits for it anyway); a
        bucket being decided ahead is not waited for (the thread ends after it: the step's own run follows)."""
        self._stop.set()
        if self._thread.is_alive() and not self._deciding:
            self._thread.join(timeout)

    def _run(self) -> None:
        if self.prepare is not None and not self._stop.is_set():
            try:
                self.prepare()
            except Exception as e:  # the winner ships them again
                log.warning("standby: shipping the earlier failover snapshots ahead failed: %r", e)
        while not self._stop.is_set():
            started = time.monotonic()
            cpu_started = time.thread_time()  # the thread's CPU time: waiting on ZooKeeper is not work
            try:
                snapshot = self.reader.read(ahead=True, abort=self._stop)
                read_s = time.monotonic() - started
                # the failover files' text of its topics and partition states, while nothing waits for it
                self.reader.encode_ahead(snapshot)
                log.info(
                    "standby: read ahead %d topics, %d partitions in %.1f s (%d partition-state znodes read); "
                    "encoded for the failover files in %.1f s",
                    len(snapshot.topics),
                    len(snapshot.partition_states),
                    read_s,
                    self.reader.last_state_reads,
                    time.monotonic() - started - read_s,
                )
                if self.decider is not None:
                    self._decide(snapshot)
            except ReadAbortedError:
                return
            except Exception as e:  # ZooKeeper away, a znode not in Kafka's format: the winner's read reports it
                log.warning("standby: reading the ZooKeeper snapshot ahead failed: %r", e)
            work_s = time.thread_time() - cpu_started
            pause = pause_after(work_s, self.interval_s, self.work_share)
            self.last_round = (work_s, pause)
            if pause > self.interval_s:
                log.info("standby: next read ahead in %.0f s (the last round used %.1f s of CPU)", pause, work_s)
            self._stop.wait(pause)

    def _decide(self, snapshot: ZkSnapshot) -> None:
        assert self.decider is not None
        started = time.monotonic()
        self._deciding = True
        try:
            decided = self.decider.update(snapshot, self.reader.state_texts, self._stop)
        except Exception as e:  # the buckets then step as they would without it
            log.warning("standby: deciding the failover batch ahead failed: %r", e)
            return
        finally:
            self._deciding = False
        if decided:
            log.info(
                "standby: decided the failover batch of %d of %d buckets ahead in %.1f s",
                decided,
                self.decider.num_buckets,
                time.monotonic() - started,
            )


def read_in_background(reader: SnapshotReader) -> Future[ZkSnapshot]:
    """Start one :meth:`SnapshotReader.read` on a thread; its outcome is the future's."""
    return in_background(reader.read, "livectl-snapshot-read")
