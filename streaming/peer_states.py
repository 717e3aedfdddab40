"""Bucket states shared between the Python workers of one executor, decoded ahead in each.

A Python worker keeps the states of the buckets it ran (:data:`streaming.stateful._STATE_CACHE`), so a
bucket's next batch skips decoding its stored blob — when Spark gives that batch to the same worker. It
often does not: Spark hands a task the worker at the head of its queue of idle workers (first in, first
out), the routing stage takes one and puts it back at the tail, and the buckets' workers return in the
order their tasks end; with two buckets on two workers a bucket's next batch meets the other worker about
half the time. A miss decodes the whole stored state in the task (~0.6 s of CPU per 50k partitions, on
the core the other bucket wants): at 100k partitions a broker failure reached ZooKeeper in 3.9–4.2 s
when both buckets found their states and in 5.3 s when they did not (``bench/README.md``, "Broker
failure: the workers' state caches").

So each worker, once its bucket's step has stored a new state, also writes the stored blob to a folder
of the executor's that every worker of the query sees (:meth:`PeerStates.publish`: the files directory
Spark gives the executor's tasks, one sub-folder per checkpoint). A thread in each worker, woken when a
step ends, decodes every blob there whose state it does not hold (:func:`streaming.stateful.state_dict`
and ``ControllerState.from_dict``, the same decode a miss does) into the same cache, while the worker
waits for its next task; it stops as soon as a task begins (a decode under way finishes). A step finds
a state there only when the blob Spark gives it is the one decoded (its BLAKE2 digest), so a stale or
foreign file is never used; one being decoded when the step needs it is waited for, not decoded twice.
The cost: every worker holds every bucket's state (about twice the workers' memory with two buckets)
and decodes the others' after each batch that changed them, on cores otherwise idle between batches.
Switch: ``spark.livectl.python.shareStates`` (default ``true``).
"""

from __future__ import annotations

import contextlib
import hashlib
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SHARE_STATES_CONF = "spark.livectl.python.shareStates"

#: the file's head: format and decompressed size of the stored blob that follows
_HEAD = struct.Struct(">iq")
#: how long after a step the thread waits before decoding: the driver's work after the batch's job (the
#: sinks) is on the same cores, and a batch that follows at once finds the states as it would have without
QUIET_S = 2.5
#: how long after that the thread looks for the other workers' blobs (their tasks may end later)
LINGER_S = 15.0
_POLL_S = 0.05


def share_states_enabled(spark: Any) -> bool:
    """``spark.livectl.python.shareStates`` of the session: ``true`` (default) or ``false``, any case;
    anything else is refused."""
    value = str(spark.conf.get(SHARE_STATES_CONF, "true"))
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{SHARE_STATES_CONF}: must be true or false, got {value.strip()!r}")
    return text == "true"


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
    runs on this object's thread; without ``background`` there is none, and :meth:`decode_pending` is
    called by hand); ``settle`` runs after a pass that decoded something, unless a step began (the
    worker's collection of what a task leaves, so that the next task does not walk the new objects)."""

    def __init__(
        self,
        cache: dict[int, tuple[bytes, Any]],
        digest: Callable[[bytes], bytes],
        decode: Callable[[int, int, bytes], Any],
        *,
        settle: Callable[[], None] | None = None,
        background: bool = True,
    ) -> None:
        self._cache = cache
        self._settle = settle
        self._background = background
        self._digest = digest
        self._decode = decode
        self._folder: Path | None = None
        self._busy = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._decoding: tuple[int, bytes] | None = None
        self._decoded = threading.Condition(self._lock)
        self._failed: set[tuple[int, bytes]] = set()
        self._thread: threading.Thread | None = None
        self.decodes = 0

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
        """Return once the thread is not decoding this very blob (it may be now: then the cache has it)."""
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
        """Decode every blob in the folder whose state the cache lacks, until a step begins; how many."""
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
            except ValueError:
                continue
            got = read_blob(path)
            if got is None:
                continue
            fmt, size, blob = got
            digest = self._digest(blob)
            held = self._cache.get(bucket)
            if (held is not None and held[0] == digest) or (bucket, digest) in self._failed:
                continue
            with self._lock:
                self._decoding = (bucket, digest)
            try:
                state = self._decode(fmt, size, blob)
            except Exception:  # damaged or of another format: the step decodes its own blob as before
                self._failed.add((bucket, digest))
                state = None
            with self._decoded:
                # not over an entry a step stored meanwhile (its state is newer than any file's)
                if state is not None and self._cache.get(bucket) is held:
                    self._cache[bucket] = (digest, state)
                    self.decodes += 1
                    done += 1
                self._decoding = None
                self._decoded.notify_all()
        if done and self._settle is not None and not self._busy.is_set():
            self._settle()
        return done
