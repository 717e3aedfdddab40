"""Before Spark starts: are ZooKeeper and Kafka there at all?

``livectl run`` checks both before it pays Spark's start-up, so that a wrong address or a service that is
down is one clear line (exit code 4, like the admin commands) instead of a timeout deep inside the
controller's start. :class:`UnreachableError` names the service, the address as configured and what
failed. Only reachability is checked here; everything else (the lease, topics, ACLs) is the controller's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from streaming.errors import StreamingError
from streaming.settings import Settings


class UnreachableError(StreamingError):
    """``service`` (ZooKeeper or Kafka) at ``address`` could not be reached; ``reason`` says what failed."""

    def __init__(self, service: str, address: str, reason: str) -> None:
        self.service = service
        self.address = address
        self.reason = reason
        super().__init__(f"{service} at {address} is unreachable: {reason}")


@contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """Client libraries log every refused connection attempt; the outcome is reported once, by the caller."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def check_zookeeper(settings: Settings, timeout_s: float = 10.0) -> None:
    """A ZooKeeper session can be opened at ``zookeeper_connect`` (with the configured authentication)
    within ``timeout_s``; raises :class:`UnreachableError` otherwise."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import AuthFailedError, KazooException
    from kazoo.handlers.threading import KazooTimeoutError
    from kazoo.protocol.states import KeeperState

    address = settings.zookeeper_connect
    with _quiet("kazoo"):
        try:
            zk = KazooClient(
                hosts=address, timeout=timeout_s, **settings.zookeeper_security().client_kwargs(), read_only=True
            )
        except (ValueError, KazooException) as e:  # e.g. a port that is not a number
            raise UnreachableError("ZooKeeper", address, f"bad address: {e}") from None
        scheme = settings.zookeeper_auth.partition(":")[0] or "none"
        refused = f"zookeeper_auth: the server refused the {scheme} credential"
        try:
            # polled rather than start(timeout): a SASL refusal during the handshake makes kazoo stop
            # connecting for good (AUTH_FAILED, then CLOSED), which start() would report as a time-out
            # (a client starts CLOSED: only a CLOSED after another state, or at the deadline, is kazoo's own)
            zk.start_async()
            deadline = time.monotonic() + timeout_s
            started = False
            while not zk.connected:
                state = zk.client_state
                gave_up = state == KeeperState.AUTH_FAILED or (state == KeeperState.CLOSED and started)
                if settings.zookeeper_auth and gave_up:
                    raise AuthFailedError()
                started = started or state != KeeperState.CLOSED
                if time.monotonic() >= deadline:
                    if settings.zookeeper_auth and state == KeeperState.CLOSED:
                        raise AuthFailedError()
                    raise KazooTimeoutError()
                time.sleep(0.05)
            # a SASL handshake can also end after the session is up: its refusal comes with the first request
            zk.exists("/")
        except KazooTimeoutError:
            raise UnreachableError("ZooKeeper", address, f"no session within {timeout_s:g} s") from None
        except AuthFailedError:
            raise UnreachableError("ZooKeeper", address, refused) from None
        except KazooException as e:
            raise UnreachableError("ZooKeeper", address, f"{type(e).__name__}: {e}") from None
        finally:
            zk.stop()
            zk.close()


def check_kafka(settings: Settings, timeout_s: float = 10.0) -> None:
    """A Kafka broker answers at ``bootstrap_servers`` (with the configured security) within
    ``timeout_s``; raises :class:`UnreachableError` otherwise."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError, KafkaTimeoutError

    address = settings.bootstrap_servers
    with _quiet("kafka"):
        try:
            consumer = KafkaConsumer(
                **settings.kafka_security().client_kwargs(),
                bootstrap_servers=address,
                bootstrap_timeout_ms=int(timeout_s * 1000),
            )
        except KafkaTimeoutError:
            # no bootstrap server answered in time (kafka-python 3: "Unable to bootstrap from …")
            raise UnreachableError("Kafka", address, f"no broker answered within {timeout_s:g} s") from None
        except KafkaError as e:  # e.g. the security handshake failed
            raise UnreachableError("Kafka", address, f"{type(e).__name__}: {e}") from None
        except (ValueError, OSError) as e:
            raise UnreachableError("Kafka", address, f"bad address: {e}") from None
        try:
            consumer.topics()
        except KafkaError as e:
            raise UnreachableError("Kafka", address, f"metadata request failed: {e}") from None
        finally:
            consumer.close()


def wait_for_kafka(settings: Settings, timeout_s: float, interval_s: float = 1.0) -> None:
    """:func:`check_kafka` until a broker answers, for up to ``timeout_s``; then the last
    :class:`UnreachableError`, its reason saying how long it was waited for."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            check_kafka(settings, timeout_s=max(1.0, min(10.0, deadline - time.monotonic())))
            return
        except UnreachableError as e:
            if time.monotonic() >= deadline:
                raise UnreachableError(e.service, e.address, f"{e.reason} (waited {timeout_s:g} s)") from None
        time.sleep(interval_s)
