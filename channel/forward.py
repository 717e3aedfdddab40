"""Requests the controller's endpoint does not answer itself, forwarded to a live broker on the same listener.

Kafka's clients see the endpoint as the node of the controller's id, a broker like the others (a ZooKeeper-mode
controller is one), and send it what they send any broker: Metadata, DescribeCluster, DescribeConfigs,
FindCoordinator... The endpoint answers :data:`channel.answers.SERVED` itself and sends everything else but
:data:`channel.answers.NOT_FORWARDED` as it came (the client's header, correlation id and client id) to a
broker, on a connection of the client's own to that broker's endpoint of the same listener name (a
Metadata answer lists the endpoints of the listener it was asked on), and relays the broker's answer as it
came. The endpoint reads a connection's next request only after answering the one before (Kafka's own
rule: a broker mutes a connection while a request of it is in flight), so answers keep the requests'
order, whoever gives them.

:class:`Forwarder` holds those connections; :func:`produce_acks` and :func:`answered` say which requests get
no answer (a Produce with ``acks=0``), pure.
"""

from __future__ import annotations

import logging
import random
import struct
from collections.abc import Callable, Sequence

from channel.answers import node_versions
from channel.wire import BrokerConnection, WireError

__all__ = ["PRODUCE", "Forwarder", "answered", "produce_acks"]

log = logging.getLogger("livectl.channel.forward")

PRODUCE = 0
#: the first Produce version with a flexible header and body (KIP-482), and the first with a transactional id
_PRODUCE_FLEXIBLE, _PRODUCE_TRANSACTIONAL = 9, 3
#: how long a broker may take to accept the forward connection and answer its ApiVersions (a paused broker
#: must not hold a client's first request for a whole request timeout)
CONNECT_TIMEOUT_S = 5.0


def _uvarint(frame: bytes, offset: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if offset >= len(frame):
            raise ValueError("a varint runs past the end of the request")
        byte = frame[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
        if shift > 28:
            raise ValueError("a varint of more than 5 bytes")


def produce_acks(frame: bytes) -> int:
    """The ``acks`` of a Produce request (``frame``: header and body, without the size), read past the header
    (v1 up to Produce v8, v2 with tagged fields from v9) and the transactional id (from v3). ``ValueError``
    when the frame is too short or not a Produce request."""
    try:
        api_key, version = struct.unpack_from(">hh", frame, 0)
        if api_key != PRODUCE:
            raise ValueError(f"api key {api_key} is not Produce")
        (client_id,) = struct.unpack_from(">h", frame, 8)
        offset = 10 + max(client_id, 0)
        flexible = version >= _PRODUCE_FLEXIBLE
        if flexible:
            tags, offset = _uvarint(frame, offset)
            for _ in range(tags):
                _tag, offset = _uvarint(frame, offset)
                size, offset = _uvarint(frame, offset)
                offset += size
        if version >= _PRODUCE_TRANSACTIONAL:
            if flexible:
                length, offset = _uvarint(frame, offset)  # compact nullable string: length + 1, 0 for null
                offset += max(length - 1, 0)
            else:
                (length,) = struct.unpack_from(">h", frame, offset)
                offset += 2 + max(length, 0)
        (acks,) = struct.unpack_from(">h", frame, offset)
    except struct.error:
        raise ValueError("a Produce request too short to hold its acks") from None
    return int(acks)


def answered(api_key: int, frame: bytes) -> bool:
    """Whether the request ``frame`` of ``api_key`` gets an answer: all do but a Produce with ``acks=0``."""
    return api_key != PRODUCE or produce_acks(frame) != 0


class Forwarder:
    """The forward connections of the endpoint's client connections, one broker connection each.

    ``brokers(listener)``: the (host, port, security protocol) of every registered broker's endpoint named
    ``listener``; a client connection's broker is one of them at random that answers ApiVersions, kept until it
    fails (then the client connection is closed, as when its broker goes away, and its next connection gets
    another). ``connect(host, port, protocol, timeout_s)`` opens a connection (default: plaintext, whatever the
    protocol; the channel's :meth:`channel.cluster.Cluster.open_forward` speaks TLS to an SSL endpoint, without the
    channel's certificate)."""

    def __init__(
        self,
        brokers: Callable[[str], Sequence[tuple[str, int, str]]],
        timeout_s: float,
        connect: Callable[[str, int, str, float], BrokerConnection] | None = None,
    ) -> None:
        self._brokers = brokers
        self._timeout_s = timeout_s
        self._connect = connect or (lambda host, port, _protocol, t: BrokerConnection(host, port, timeout_s=t))

    def open(self, listener: str) -> BrokerConnection | None:
        """A negotiated connection to a live broker's endpoint of ``listener``; ``None`` when none answers."""
        candidates = list(self._brokers(listener))
        random.shuffle(candidates)  # spread the clients over the brokers
        for host, port, protocol in candidates:
            try:
                conn = self._connect(host, port, protocol, CONNECT_TIMEOUT_S)
            except WireError as e:
                log.info("%s: %s", listener, e)
                continue
            try:
                conn.negotiate()
            except WireError as e:
                conn.close()
                log.info("%s: %s", listener, e)
                continue
            conn.set_timeout(self._timeout_s)
            return conn
        return None

    @staticmethod
    def versions(upstream: BrokerConnection | None) -> dict[int, tuple[int, int]]:
        """The endpoint's ApiVersions table for a client forwarded to ``upstream`` (``None``: to no broker)."""
        return node_versions(upstream.versions if upstream is not None else {})
