"""The controller lease: Kafka's ZooKeeper-era controller election, for the driver of the query.

Election follows ``KafkaZkClient.registerControllerAndIncrementControllerEpoch`` (Kafka 3.x):

1. Read ``/controller_epoch`` (persistent; content = the epoch as text). If it is absent, create it
   with Kafka's ``InitialControllerEpoch`` ``"0"`` (znode version 0); if that create races with
   another, read it.
2. One multi-op: create the ephemeral ``/controller`` =
   ``{"version":1,"brokerid":<id>,"timestamp":"<ms>"}`` **and** set ``/controller_epoch`` to
   ``epoch + 1`` at the version read in 1. The first controller of a cluster therefore gets epoch 1.
3. If the multi-op fails with ``NodeExists`` or ``BadVersion``, check whether we won anyway (a retry
   after a lost reply): ``/controller`` is ours (our session owns the ephemeral znode) and the epoch
   is the one we wrote. Otherwise another controller is active: **standby**.

:meth:`ControllerLease.acquire` returns the :class:`sinks.ports.Fence` (new epoch + the
``/controller_epoch`` znode version), the token every ZooKeeper sink transaction checks. A standby
waits on a watch of ``/controller`` and runs the election again when the znode goes away (the active
controller's session ended or it resigned).

With ``take_over_from_kafka`` a standby also takes ``/controller`` from a **Kafka broker** (a ZooKeeper-mode
broker's controller: ``/controller`` owned by the session of that broker's ``/brokers/ids/<id>``) elected after
the standby started waiting, i.e. it wins every re-election that happens while it waits (a broker won the
race for a deleted ``/controller``): one multi-op deletes the broker's ``/controller`` at the version read,
creates its own and bumps ``/controller_epoch`` at the version read first, so no other candidate can be
elected in between. Kafka's brokers see a deleted ``/controller`` (``Reelect``): they find this controller
there and elect nothing; the deposed one resigns. The controller found in ``/controller`` when the wait
began, and any livectl controller, is never deposed: the standby waits for it as above.

After winning, the holder is told when it loses the lease: ZooKeeper session expired (``LOST``), or
``/controller`` deleted or owned by another session. Then :attr:`ControllerLease.lost` is set and
``on_lost(reason)`` is called once (from kazoo's thread: it must not block; typically it sets a flag the
driver's loop checks to stop the query). A lost lease is never regained by the same object: build a new
one (and a new sink with the new fence).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, overload

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import WatchedEvent

from core.errors import FormatError
from core.kafka import zkdata
from core.kafka.zkdata import CONTROLLER_EPOCH_PATH, CONTROLLER_PATH
from sinks.ports import Fence
from streaming.errors import StreamingError

log = logging.getLogger(__name__)

#: how long resigning may wait for ZooKeeper (each of its two calls); past it, the session's end does it
RELEASE_TIMEOUT_S = 5.0

#: Kafka's ``KafkaController.InitialControllerEpoch`` / ``InitialControllerEpochZkVersion``
INITIAL_CONTROLLER_EPOCH = 0


class LeaseError(StreamingError):
    """The lease could not be acquired or is held in an inconsistent state; the message says why."""


class LeaseTimeoutError(LeaseError):
    """:meth:`ControllerLease.acquire` waited ``timeout`` seconds as standby without winning."""


def read_controller_id(client: KazooClient) -> int | None:
    """The ``brokerid`` in ``/controller``, or ``None`` if no controller is active."""
    try:
        data, _ = client.get(CONTROLLER_PATH)
    except NoNodeError:
        return None
    try:
        return zkdata.decode_controller(data).broker_id
    except FormatError:
        raise LeaseError(f"{CONTROLLER_PATH} holds malformed JSON {data[:200]!r}") from None


class ControllerLease:
    """Controller election on ``client`` for ``controller_id`` (see the module docstring)."""

    def __init__(
        self,
        client: KazooClient,
        controller_id: int,
        *,
        on_lost: Callable[[str], None] | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        acl_for: Callable[[str], Any] | None = None,
        take_over_from_kafka: bool = False,
    ) -> None:
        self._zk = client
        self._take_over_from_kafka = take_over_from_kafka
        #: ACLs of the znodes the election creates (Kafka's ``zookeeper.set.acl``); None: open
        self._acl_for = acl_for or (lambda _path: None)
        self.controller_id = controller_id
        self._on_lost = on_lost
        self._clock_ms = clock_ms
        self._fence: Fence | None = None
        self._lost = threading.Event()
        self._lost_reason: str | None = None
        self._changed = threading.Event()
        self._lock = threading.Lock()
        self._zk.add_listener(self.on_connection_state)

    # ------------------------------------------------------------------ public

    @property
    def fence(self) -> Fence | None:
        """The fence of the lease held, or ``None`` before winning."""
        return self._fence

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    @property
    def lost_reason(self) -> str | None:
        return self._lost_reason

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until the lease is lost (True) or ``timeout`` passes (False)."""
        return self._lost.wait(timeout)

    def try_acquire(self) -> Fence | None:
        """One election attempt: the fence if this controller won, ``None`` if another one is active."""
        if self._fence is not None:
            return self._fence
        if self._lost.is_set():
            raise LeaseError(
                f"the lease of controller {self.controller_id} was lost ({self._lost_reason}); use a new one"
            )
        epoch, version = self._read_or_create_epoch()
        new_epoch = epoch + 1
        txn = self._zk.transaction()
        txn.create(
            CONTROLLER_PATH,
            zkdata.encode_controller(self.controller_id, self._clock_ms()),
            acl=self._acl_for(CONTROLLER_PATH),
            ephemeral=True,
        )
        txn.set_data(CONTROLLER_EPOCH_PATH, zkdata.encode_controller_epoch(new_epoch), version=version)
        results = txn.commit()
        failure = next((r for r in results if isinstance(r, NodeExistsError | BadVersionError)), None)
        won: Fence | None
        if failure is None:
            if any(isinstance(r, Exception) for r in results):
                raise LeaseError(f"controller election failed: {results!r}")
            won = Fence(new_epoch, results[1].version)
        else:
            won = self._check_won(new_epoch)
        if won is None:
            return None
        return self._won(won, "elected")

    def _won(self, fence: Fence, how: str) -> Fence:
        self._fence = fence
        self._watch_controller()
        log.info("controller %s %s with epoch %s (zk version %s)", self.controller_id, how, *self._fence_tuple())
        return fence

    def try_take_over_from_kafka(self, incumbent: int | None) -> Fence | None:
        """Take ``/controller`` from the Kafka broker holding it (see the module docstring), unless it is
        ``incumbent`` (the ``czxid`` of the ``/controller`` found when the wait began): the fence if this
        controller won, ``None`` if no Kafka broker other than the incumbent holds it or the znodes changed
        since they were read."""
        if self._fence is not None:
            return self._fence
        # the epoch first: an election between the two reads bumps its version, and the multi-op fails
        epoch, version = self._read_or_create_epoch()
        held = self.kafka_broker_controller()
        if held is None or held[1].czxid == incumbent:
            return None
        broker_id, cstat = held
        new_epoch = epoch + 1
        txn = self._zk.transaction()
        txn.delete(CONTROLLER_PATH, version=cstat.version)
        txn.create(
            CONTROLLER_PATH,
            zkdata.encode_controller(self.controller_id, self._clock_ms()),
            acl=self._acl_for(CONTROLLER_PATH),
            ephemeral=True,
        )
        txn.set_data(CONTROLLER_EPOCH_PATH, zkdata.encode_controller_epoch(new_epoch), version=version)
        results = txn.commit()
        if any(isinstance(r, Exception) for r in results):
            log.info("taking /controller from Kafka broker %s failed (%r): looking again", broker_id, results)
            return None
        return self._won(Fence(new_epoch, results[2].version), f"took /controller from Kafka broker {broker_id}")

    def kafka_broker_controller(self) -> tuple[int, Any] | None:
        """``(broker id, stat of /controller)`` when a Kafka broker's controller holds ``/controller`` (the
        znode's session is the one of that broker's registration), else ``None``."""
        try:
            data, cstat = self._zk.get(CONTROLLER_PATH)
            broker_id = zkdata.decode_controller(data).broker_id
            rstat = self._zk.exists(f"/brokers/ids/{broker_id}")
        except (NoNodeError, FormatError):
            return None
        if rstat is None or rstat.ephemeralOwner != cstat.ephemeralOwner:
            return None
        return broker_id, cstat

    @overload
    def acquire(self, timeout: float | None = None) -> Fence: ...

    @overload
    def acquire(self, timeout: float | None = None, *, stop: threading.Event) -> Fence | None: ...

    def acquire(self, timeout: float | None = None, *, stop: threading.Event | None = None) -> Fence | None:
        """Win the election, waiting as standby while another controller is active.

        Returns ``None`` only when ``stop`` is given and gets set while waiting; raises
        :class:`LeaseTimeoutError` after ``timeout`` seconds as standby."""
        deadline = None if timeout is None else time.monotonic() + timeout
        incumbent = self._controller_czxid() if self._take_over_from_kafka else None
        if self._take_over_from_kafka:
            # the moment from which a re-election is this standby's to win (an operator waits for this line)
            log.info(
                "controller %s: ready to take /controller from a Kafka broker elected from now on (held now by %s)",
                self.controller_id,
                read_controller_id(self._zk) if incumbent is not None else "nobody",
            )
        while True:
            if stop is not None and stop.is_set():
                return None
            self._changed.clear()
            fence = self.try_acquire()
            if fence is None and self._take_over_from_kafka:
                fence = self.try_take_over_from_kafka(incumbent)
            if fence is not None:
                return fence
            # standby: wake up when /controller changes; if it vanished meanwhile, retry at once
            if self._zk.exists(CONTROLLER_PATH, watch=self._on_controller_event) is None:
                continue
            # the election is tried again only when /controller or the session changed: every try is a
            # multi-op that ZooKeeper logs (and syncs) even when it fails; a stop request must still be seen
            # promptly, so with one possible the wait wakes at least every 0.2 s to look at it
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise LeaseTimeoutError(
                        f"controller {self.controller_id} stayed standby for {timeout} s; "
                        f"active controller: {read_controller_id(self._zk)}"
                    )
                if self._changed.wait(left if stop is None else min(left or 0.2, 0.2)):
                    break
                if stop is not None and stop.is_set():
                    return None

    def release(self) -> None:
        """Resign: delete ``/controller`` if this session owns it. The fence stops being valid for the
        next controller's election only (the epoch znode is untouched), like Kafka's resignation."""
        with self._lock:
            held = self._fence is not None and not self._lost.is_set()
        # lost before the delete: the watch on /controller, which the delete (or a successor's create) fires
        # on kazoo's thread, then stops quietly instead of reporting the resignation as a loss; and no write
        # this lease fences can go out once a successor can be elected
        self._mark_lost("resigned", notify=False)
        if not held:
            return
        if not self._zk.connected:
            # a request queued while kazoo reconnects waits for the connection, with no end if ZooKeeper is gone
            log.warning("resigning without ZooKeeper: /controller goes when this controller's session expires")
            return
        try:
            _, stat = self._zk.get_async(CONTROLLER_PATH).get(timeout=RELEASE_TIMEOUT_S)
            if stat.ephemeralOwner == self._session_id():
                self._zk.delete_async(CONTROLLER_PATH, version=stat.version).get(timeout=RELEASE_TIMEOUT_S)
        except (NoNodeError, BadVersionError):
            pass
        except (KazooException, KazooTimeoutError) as e:
            reason = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            log.warning("could not delete /controller (%s): it goes when this controller's session expires", reason)

    # ------------------------------------------------------------------ internals

    def _fence_tuple(self) -> tuple[int, int]:
        assert self._fence is not None
        return self._fence.controller_epoch, self._fence.epoch_zk_version

    def _session_id(self) -> int:
        sid: int = self._zk.client_id[0]
        return sid

    def _controller_czxid(self) -> int | None:
        stat = self._zk.exists(CONTROLLER_PATH)
        return None if stat is None else int(stat.czxid)

    def _read_or_create_epoch(self) -> tuple[int, int]:
        try:
            data, stat = self._zk.get(CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            try:
                self._zk.create(
                    CONTROLLER_EPOCH_PATH,
                    zkdata.encode_controller_epoch(INITIAL_CONTROLLER_EPOCH),
                    acl=self._acl_for(CONTROLLER_EPOCH_PATH),
                )
                return INITIAL_CONTROLLER_EPOCH, 0
            except NodeExistsError:
                data, stat = self._zk.get(CONTROLLER_EPOCH_PATH)
        try:
            return zkdata.decode_controller_epoch(data), stat.version
        except FormatError:
            raise LeaseError(f"{CONTROLLER_EPOCH_PATH} holds {data[:50]!r}, not an epoch number") from None

    def _check_won(self, new_epoch: int) -> Fence | None:
        """Kafka's ``checkControllerAndEpoch``, by session rather than by id."""
        try:
            _, cstat = self._zk.get(CONTROLLER_PATH)
        except NoNodeError:
            return None  # it went away meanwhile: the caller's watch will retry
        if cstat.ephemeralOwner != self._session_id():
            return None
        data, estat = self._zk.get(CONTROLLER_EPOCH_PATH)
        epoch = zkdata.decode_controller_epoch(data)
        if epoch == new_epoch:
            return Fence(new_epoch, estat.version)
        raise LeaseError(
            f"{CONTROLLER_PATH} is ours but {CONTROLLER_EPOCH_PATH} is {epoch}, not {new_epoch}: "
            "another controller was elected in between"
        )

    def _on_controller_event(self, event: WatchedEvent) -> None:
        self._changed.set()

    def _watch_controller(self) -> None:
        session = self._session_id()

        def check(data: bytes | None, stat: Any, event: WatchedEvent | None = None) -> bool | None:
            if self._lost.is_set():
                return False  # stop watching
            if stat is None:
                self._mark_lost(f"{CONTROLLER_PATH} was deleted")
                return False
            if stat.ephemeralOwner != session:
                self._mark_lost(f"{CONTROLLER_PATH} is now owned by session {stat.ephemeralOwner:#x}")
                return False
            return None

        self._zk.DataWatch(CONTROLLER_PATH, check)

    def on_connection_state(self, state: str) -> None:
        """kazoo's connection listener: a lost session fences this controller; a (re)connection makes a standby
        look at the lease again."""
        if state == KazooState.LOST and self._fence is not None:
            self._mark_lost("ZooKeeper session lost")
        elif state == KazooState.CONNECTED:
            # (re)connected, perhaps in a new session whose watches are gone: a standby looks again
            self._changed.set()

    def _mark_lost(self, reason: str, *, notify: bool = True) -> None:
        with self._lock:
            if self._lost.is_set():
                return
            self._lost_reason = reason
            self._lost.set()
            held = self._fence is not None
        self._changed.set()
        if held:
            # the process that owns the lease reports the loss (``livectl run``: one line, exit code 3), so
            # it hears first: it quiets the logs before anything else is said (a resumed, paused process)
            if notify and self._on_lost is not None:
                self._on_lost(reason)
            log.info("controller %s lost its lease: %s", self.controller_id, reason)
