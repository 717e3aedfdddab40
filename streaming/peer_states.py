"""Bucket states shared between the Python workers of one executor, decoded ahead in each.

A Python worker keeps the states of the buckets it ran (:data:`streaming.stateful._STATE_CACHE`), so a
bucket's next batch skips decoding its stored blob — when Spark gives that batch to the same worker. It
often does not: Spark hands a task the worker at the head of its queue of idle workers (first in, first
out), the routing stage takes one and puts it back at the tail, and the buckets' workers return in the
order their tasks end; with two buckets on two workers a bucket's next batch meets the other worker about
half the time. A miss decodes the whole stored state in the task (~0.6 s of CPU per 50k partitions, on
the core the other bucket wants): at 100k partitions a broker failure reached ZooKeeper in 3.8–4.8 s
when both buckets found their states and in 5.1–5.4 s when they did not (``bench/README.md``, "Broker
failure: the workers' state caches").

So each worker, once its bucket's step has stored a new state, also writes the stored blob to a folder
of the executor's that every worker of the query sees (:meth:`PeerStates.publish`: the files directory
Spark gives the executor's tasks, one sub-folder per checkpoint). A thread in each worker, once the worker
has been idle for :data:`QUIET_S` after a step, decodes every blob there whose state it does not hold
(:func:`streaming.stateful.load_state`, the same decode a miss does) into the same cache, each only while
a core of the machine is idle (:func:`machine_has_idle_core`: on ``local[N]`` the driver's sinks run on
the same cores, and a decode there made a broker failure's ZooKeeper writes slower); as soon as a task
begins it stops, a decode under way at its next topic (``ControllerState.from_dict``'s ``stop``), so the
task has the worker to itself, and the blob is decoded again once the worker is idle. A step finds a state
there only when the blob Spark gives it is the one decoded (its BLAKE2 digest), so a stale or foreign file
is never used.
The cost: every worker holds every bucket's state (about twice the workers' memory with two buckets)
and decodes the others' after each batch that changed them, on cores otherwise idle between batches.
Switch: ``spark.livectl.python.shareStates`` (default ``true``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.errors import DecodeStoppedError
from streaming.spark_flags import spark_flag

SHARE_STATES_CONF = "spark.livectl.python.shareStates"

#: the file's head: format and decompressed size of the stored blob that follows
_HEAD = struct.Struct(">iq")
#: how long after a step the thread waits before decoding: the driver's work after the batch's job (the
#: sinks) is on the same cores, and a batch that follows at once finds the states as it would have without
QUIET_S = 2.5
#: how long after that the thread looks for the other workers' blobs (their tasks may end later) and waits
#: for a core to be free
LINGER_S = 30.0
_POLL_S = 0.05
#: how long the machine's CPU is sampled before a decode (:func:`machine_has_idle_core`)
SAMPLE_S = 0.3


def _cpu_times() -> tuple[float, float] | None:
    """(idle, total) jiffies of the machine from ``/proc/stat``; ``None`` where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [float(v) for v in fields[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0.0)  # idle + iowait
    return idle, sum(values[:8])


def machine_has_idle_core(sample_s: float = SAMPLE_S) -> bool:
    """Whether at least one core of this machine was idle over the last ``sample_s`` (``True`` where the
    machine's CPU cannot be read): a decode then takes no core that the driver's sinks, ZooKeeper or another
    task would have had (on ``local[N]`` they share the executor's cores)."""
    first = _cpu_times()
    time.sleep(sample_s)
    verdict = _a_core_idle_between(first, _cpu_times())
    return True if verdict is None else verdict


def _a_core_idle_between(first: tuple[float, float] | None, second: tuple[float, float] | None) -> bool | None:
    """Whether at least a core's worth of the machine's time was idle between two :func:`_cpu_times`
    readings; ``None`` when they cannot say (a reading missing, or no time between them)."""
    if first is None or second is None or second[1] <= first[1]:
        return None
    idle_share = (second[0] - first[0]) / (second[1] - first[1])
    return idle_share * (os.cpu_count() or 1) >= 1.0


class IdleCoreWatch:
    """Whether a core of the machine was idle since the last look, without waiting: each call at least
    ``window_s`` after the last reading reads ``/proc/stat`` again and judges the time between (calls in
    between get the last verdict). For work that checks often and must give way within a fraction of a
    second when the machine gets busy."""

    def __init__(self, window_s: float = 0.2, clock: Callable[[], float] = time.monotonic) -> None:
        self._window_s = window_s
        self._clock = clock
        self._last: tuple[float, tuple[float, float] | None] | None = None
        self._verdict = True

    def __call__(self) -> bool:
        now = self._clock()
        if self._last is not None and now - self._last[0] < self._window_s:
            return self._verdict
        times = _cpu_times()
        if self._last is not None:
            verdict = _a_core_idle_between(self._last[1], times)
            if verdict is not None:
                self._verdict = verdict
        self._last = (now, times)
        return self._verdict


def share_states_enabled(spark: Any) -> bool:
    """``spark.livectl.python.shareStates`` of the session: ``true`` (default) or ``false``, any case;
    anything else is refused."""
    return spark_flag(spark, SHARE_STATES_CONF)


def folder_for(root: str, checkpoint_dir: str) -> Path:
    """The folder of the query whose checkpoint is ``checkpoint_dir`` under ``root`` (the executor's files
    directory)."""
    key = hashlib.blake2b(checkpoint_dir.encode(), digest_size=8).hexdigest()
    return Path(root) / "livectl-bucket-states" / key


def write_blob(folder: Path, bucket: int, fmt: int, size: int, blob: bytes) -> None:
    """``folder/bucket-<bucket>`` holding the stored blob, replaced whole (a reader never sees half)."""
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"bucket-{bucket}"
    staging = folder / f".bucket-{bucket}.{threading.get_ident()}.tmp"
    staging.write_bytes(_HEAD.pack(fmt, size) + blob)
    staging.replace(final)


def read_blob(path: Path) -> tuple[int, int, bytes] | None:
    """The stored blob of a file :func:`write_blob` wrote; ``None`` if it is not one (or went away)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) < _HEAD.size:
        return None
    fmt, size = _HEAD.unpack_from(data)
    return fmt, size, data[_HEAD.size :]


class PeerStates:
    """One worker's side of the shared states (see the module docstring). ``cache`` is the worker's cache
    (bucket -> (digest, state)), ``digest`` how a blob is named there, ``decode`` a blob to a state (it
    runs on this object's thread and is given a ``stop`` callable, true once a step began, to end early
    with :class:`core.errors.DecodeStoppedError`; without ``background`` there is none, and
    :meth:`decode_pending` is called by hand); ``settle`` runs after a pass that decoded something, unless
    a step began (the worker's collection of what a task leaves, so that the next task does not walk the
    new objects); ``spare`` says whether a decode may start now (by default: a core of the machine is idle)."""

    def __init__(
        self,
        cache: dict[int, tuple[bytes, Any]],
        digest: Callable[[bytes], bytes],
        decode: Callable[[int, int, bytes, Callable[[], bool]], Any],
        *,
        settle: Callable[[], None] | None = None,
        spare: Callable[[], bool] = machine_has_idle_core,
        background: bool = True,
    ) -> None:
        self._cache = cache
        self._settle = settle
        self._spare = spare
        self._background = background
        self._digest = digest
        self._decode = decode
        self._folder: Path | None = None
        self._busy = threading.Event()
        self._wake = threading.Event()
        self._decoding: tuple[int, bytes] | None = None
        self._decoded = threading.Condition()
        self._failed: set[tuple[int, bytes]] = set()
        self._settled: dict[Path, tuple[int, int, int]] = {}
        self._thread: threading.Thread | None = None

    def step_started(self, folder: Path | None) -> None:
        """A step of the query whose folder is ``folder`` begins: the thread stops looking."""
        self._busy.set()
        if folder is not None:
            self._folder = folder

    def publish(self, bucket: int, stored: tuple[int, int, bytes]) -> None:
        """The bucket's new stored blob, for the other workers (never raises: an optimisation only)."""
        if self._folder is None:
            return
        with contextlib.suppress(OSError):
            write_blob(self._folder, bucket, *stored)

    def step_ended(self) -> None:
        """The step is done: the thread (started on first use) looks for the other workers' blobs."""
        self._busy.clear()
        if self._folder is None or not self._background:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="livectl-peer-states", daemon=True)
            self._thread.start()
        self._wake.set()

    def wait_for(self, bucket: int, digest: bytes) -> None:
        """Return once the thread is not decoding this very blob (a step that began stops it at its next
        topic; one that ended just before puts it in the cache)."""
        with self._decoded:
            while self._decoding == (bucket, digest):
                self._decoded.wait()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._busy.wait(QUIET_S):  # the next step began: nothing decoded while batches come
                continue
            deadline = time.monotonic() + LINGER_S
            while not self._busy.is_set() and time.monotonic() < deadline:
                self.decode_pending()
                time.sleep(_POLL_S)

    def decode_pending(self) -> int:
        """Decode every blob in the folder whose state the cache lacks, until a step begins; how many. A
        file already dealt with (decoded, held already, or not decodable) is not read again until it is
        replaced: a poll of the folder reads only its files' metadata."""
        folder = self._folder
        if folder is None:
            return 0
        done = 0
        try:
            paths = sorted(folder.glob("bucket-*"))
        except OSError:
            return 0
        for path in paths:
            if self._busy.is_set():
                break
            try:
                bucket = int(path.name.removeprefix("bucket-"))
                st = path.stat()
            except (ValueError, OSError):
                continue
            signature = (st.st_ino, st.st_mtime_ns, st.st_size)
            if self._settled.get(path) == signature:
                continue
            if not self._spare() or self._busy.is_set():  # no core free now: the next poll looks again
                break
            got = read_blob(path)
            if got is None:
                continue
            fmt, size, blob = got
            digest = self._digest(blob)
            held = self._cache.get(bucket)
            if (held is not None and held[0] == digest) or (bucket, digest) in self._failed:
                self._settled[path] = signature
                continue
            with self._decoded:
                self._decoding = (bucket, digest)
            try:
                state = self._decode(fmt, size, blob, self._busy.is_set)
            except DecodeStoppedError:  # a step began: it comes first (decoded again later if still needed)
                state = None
            except Exception:  # damaged or of another format: the step decodes its own blob as before
                self._failed.add((bucket, digest))
                self._settled[path] = signature
                state = None
            with self._decoded:
                # not over an entry a step stored meanwhile (its state is newer than any file's)
                if state is not None and self._cache.get(bucket) is held:
                    self._cache[bucket] = (digest, state)
                    self._settled[path] = signature
                    done += 1
                self._decoding = None
                self._decoded.notify_all()
        if done and self._settle is not None and not self._busy.is_set():
            self._settle()
        return done
