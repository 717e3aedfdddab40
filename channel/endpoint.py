"""The controller's endpoint: a TCP server speaking Kafka's wire protocol, where brokers send their controller
requests and clients what they send the controller's node (:mod:`channel.answers` says which it answers).

One endpoint per listener name the channel advertises (a Metadata answer depends on the listener it was asked
on). Each accepted connection has a reader thread: a frame is a 4-byte size, the request header of the version
the request's schema names, then the body. ApiVersions is answered at once, with the endpoint's own APIs and
those it forwards; a request served (:data:`channel.answers.SERVED`) is decoded with ``kio`` and handed to
``on_request(connection, api_key, version, correlation_id, body)``, which answers it now or later with
:meth:`Connection.answer`; any other request but :data:`channel.answers.NOT_FORWARDED` is forwarded as it came
to a broker's endpoint of the same listener and the broker's answer relayed (:mod:`channel.forward`); so is a
request of :data:`channel.answers.PARTLY_SERVED` that ``owns(api_key, body)`` says is not the endpoint's own
(decoded first, then forwarded as it came), and one of :data:`channel.answers.UNLESS_FORWARDED` (Metadata) when
the connection has a broker to forward to (else answered: on a SASL name, or where no broker takes the channel's
forwarding, :mod:`channel.metadata`). The next request of a connection is read only once the one before
is answered, as a Kafka broker mutes a connection while one of its requests is in flight: a client that sends
several at once gets the answers in its order.
A request neither served nor forwarded closes the connection, as a Kafka broker does for an API it does not
know; so does a frame that cannot be read, or a broker to forward to that fails.

Given an :class:`ssl.SSLContext` (``tls``), the endpoint speaks TLS: the listener of that name is one the
brokers secure with SSL (Kafka's ``listener.security.protocol.map``); the handshake is each connection's
thread's first step, and a connection whose handshake fails (a client certificate missing or not trusted
under ``ssl.client.auth=required``) is closed and logged.

Given a :class:`channel.sasl.SaslServer` (``sasl``), the endpoint is a SASL_PLAINTEXT (or, with ``tls``, SASL_SSL)
listener and authenticates each connection as a Kafka broker does (``SaslServerAuthenticator``) before serving
it: ApiVersions is answered (listing SaslHandshake v1 and SaslAuthenticate v0-2), SaslHandshake v1 names an
enabled mechanism (else it is answered ``UNSUPPORTED_SASL_MECHANISM`` with the enabled ones, and the
connection closed), then SaslAuthenticate carries the mechanism's messages; a wrong password or unknown user is
answered ``SASL_AUTHENTICATION_FAILED`` and the connection closed, and so is a connection whose first request is
anything else (Kafka's ``IllegalSaslStateException``). Such an endpoint forwards nothing: the channel would
speak to the brokers with its own credentials for a client it cannot vouch for (Metadata is answered there,
from ZooKeeper: :mod:`channel.metadata`).

Each connection has Kafka's principal (:mod:`channel.authz`): ``User:<name>`` after SASL, ``User:<subject DN>``
of a TLS client's certificate, else ``User:ANONYMOUS``. Given a :class:`channel.authz.ClusterAction`
(``cluster_action``; or, with Kafka's ``AclAuthorizer`` configured, ``may_act``: ``super.users`` and the ACLs
granting ``ClusterAction`` on the ``Cluster``, :mod:`channel.acls`), a broker's request (ControlledShutdown,
AlterPartition, AllocateProducerIds) from a
principal it does not allow is answered ``CLUSTER_AUTHORIZATION_FAILED`` (31) in the response's top-level error
field and never handed on, as Kafka's ``KafkaApis`` refuses it without ``CLUSTER_ACTION``; the first refusal of
each principal and API is logged as a warning, the rest at debug level. Forwarded requests are not checked here
(the broker checks them).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import select
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from channel.answers import (
    ALLOCATE_PRODUCER_IDS,
    ALTER_PARTITION,
    API_VERSIONS,
    CONTROLLED_SHUTDOWN,
    NOT_FORWARDED,
    PARTLY_SERVED,
    SERVED,
    UNLESS_FORWARDED,
    api_versions_response,
    error_response,
    node_versions,
    request_type,
)
from channel.authz import (
    ANONYMOUS,
    CLUSTER_ACTION_APIS,
    CLUSTER_AUTHORIZATION_FAILED,
    ClusterAction,
    sasl_principal,
    tls_principal,
)
from channel.forward import Forwarder, answered
from channel.sasl import Exchange, SaslFailedError, SaslServer
from channel.wire import SASL_AUTHENTICATE, SASL_HANDSHAKE, BrokerConnection, WireError

__all__ = ["Connection", "ControllerEndpoint"]

log = logging.getLogger("livectl.channel.endpoint")

_MAX_FRAME = 100 * 1024 * 1024
#: how long a TLS client may take over its handshake
HANDSHAKE_TIMEOUT_S = 10.0
#: Kafka's error codes of a SASL exchange
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58
#: the SASL APIs a SASL endpoint speaks (SaslHandshake v0, raw tokens after it, is not spoken)
SASL_VERSIONS = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}


class Connection:
    """One broker's or client's connection to the endpoint of listener ``listener``."""

    def __init__(self, sock: socket.socket, peer: str, listener: str = "") -> None:
        self.sock, self.peer, self.listener = sock, peer, listener
        self._lock = threading.Lock()
        self.closed = threading.Event()
        #: set while no request of the connection waits for its answer
        self._idle = threading.Event()
        self._idle.set()
        #: the broker id the connection's requests named (-1 until one did)
        self.broker_id = -1
        #: the broker this connection's requests are forwarded to, once one was needed (reader thread only)
        self.upstream: BrokerConnection | None = None
        #: whether a broker to forward to was looked for (once per connection: none found, none is looked for
        #: again, so its ApiVersions and its requests agree; reader thread only)
        self.upstream_sought = False
        #: what a TLS connection's check for its peer's close read ahead of the next request (reader thread)
        self._ahead = bytearray()
        #: whether the connection may send requests: until its SASL exchange is done, not on a SASL endpoint
        self.authenticated = True
        #: the SASL exchange under way, after SaslHandshake (reader thread)
        self.exchange: Exchange | None = None
        #: Kafka's principal of the connection (:mod:`channel.authz`): set by its TLS handshake and its SASL login
        self.principal = ANONYMOUS

    def answer(self, correlation_id: int, response: Any) -> bool:
        """Send ``response`` (a kio response entity) answering request ``correlation_id``; ``False`` when the
        connection is gone."""
        header_type = response.__header_schema__
        buf = io.BytesIO()
        entity_writer(header_type)(buf, header_type(correlation_id=i32(correlation_id)))
        entity_writer(type(response))(buf, response)
        return self.send(buf.getvalue())

    def send(self, payload: bytes) -> bool:
        """Send one answer (response header and body, as a broker sent it); ``False`` when the connection is
        gone. The connection's next request is read after it."""
        try:
            with self._lock:
                if self.closed.is_set():
                    return False
                try:
                    self.sock.sendall(struct.pack(">i", len(payload)) + payload)
                except OSError as e:
                    log.info("connection from %s: cannot answer: %s", self.peer, e)
                    self.close()
                    return False
            return True
        finally:
            self._idle.set()

    def awaiting(self) -> None:
        """A request was read that will be answered (now or later): hold the next one until it is."""
        self._idle.clear()

    def wait_answered(self) -> bool:
        """Wait until the request read last is answered; ``False`` when the connection closed meanwhile (also
        by its peer: a broker that gave up on a ControlledShutdown reconnects to ask again)."""
        while not self._idle.wait(1.0):
            if self._peer_closed():
                self.close()
        return not self.closed.is_set()

    def _peer_closed(self) -> bool:
        if isinstance(self.sock, ssl.SSLSocket):
            return self._tls_peer_closed()
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
            return bool(readable) and not self.sock.recv(1, socket.MSG_PEEK)
        except (OSError, ValueError):
            return True

    def _tls_peer_closed(self) -> bool:
        """As :meth:`_peer_closed` on a TLS socket, which cannot peek: what is readable is read without waiting
        (under the lock, so no answer is being sent meanwhile) and kept for :meth:`read_frame`; only a close
        says the peer went away (a TLS record without data, such as a session ticket, says nothing)."""
        sock = self.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            if not sock.pending():
                readable, _, _ = select.select([sock], [], [], 0)
                if not readable:
                    return False
            with self._lock:
                if self.closed.is_set():
                    return True
                timeout = sock.gettimeout()
                sock.settimeout(0)
                try:
                    data = sock.recv(65536)
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    return False
                finally:
                    sock.settimeout(timeout)
        except (OSError, ValueError):
            return True
        if not data:
            return True
        self._ahead += data
        return False

    def close(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
            self.sock.close()
        self._idle.set()

    def read_frame(self) -> bytes | None:
        head = self._read(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        if not 0 < size <= _MAX_FRAME:
            raise ValueError(f"a frame of {size} bytes")
        return self._read(size)

    def _read(self, n: int) -> bytes | None:
        chunks = self._ahead[:n]
        del self._ahead[:n]
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)


RequestHandler = Callable[[Connection, int, int, int, Any], None]
#: whether a decoded request of :data:`channel.answers.PARTLY_SERVED` (api key, body) is the endpoint's to answer
Owns = Callable[[int, Any], bool]


class ControllerEndpoint:
    """Listens on ``host``:``port`` (0: a free port, then :attr:`port` says which) until :meth:`close`, as the
    endpoint of ``listener``; requests not served are forwarded with ``forwarder`` (``None``: not at all), and so
    are those of :data:`channel.answers.PARTLY_SERVED` that ``owns`` does not claim (``None``: claims none).
    ``tls``: the server context of an SSL listener (``None``: plaintext); ``sasl``: the SASL server of a SASL
    listener (``None``: none); ``cluster_action``: who may send the brokers' requests (``None``: anyone), unless
    ``may_act`` is given: then it decides whether a connection may (the authorizer's ``CLUSTER_ACTION``)."""

    def __init__(
        self,
        host: str,
        port: int,
        on_request: RequestHandler,
        on_close: Callable[[Connection], None],
        *,
        listener: str = "",
        forwarder: Forwarder | None = None,
        owns: Owns | None = None,
        tls: ssl.SSLContext | None = None,
        sasl: SaslServer | None = None,
        cluster_action: ClusterAction | None = None,
        may_act: Callable[[Connection], bool] | None = None,
    ) -> None:
        self._on_request, self._on_close = on_request, on_close
        self._cluster_action = cluster_action or ClusterAction()
        self._may_act = may_act
        #: brokers' requests refused for their principal, for the log and tests
        self.refusals = 0
        self._refusals_logged: set[tuple[str, int]] = set()
        self._tls = tls
        self._sasl = sasl
        #: the listener's security protocol, as Kafka names it
        self.security_protocol = ("SASL_" if sasl is not None else "") + ("SSL" if tls is not None else "PLAINTEXT")
        #: TLS handshakes completed and failed, for the log and tests
        self.handshakes = self.handshake_failures = 0
        #: SASL exchanges completed and refused, for the log and tests
        self.authentications = self.authentication_failures = 0
        self._owns = owns
        self.listener = listener
        self._forwarder = forwarder
        self._server = socket.create_server((host, port), reuse_port=False)
        self.host, self.port = host, int(self._server.getsockname()[1])
        self._connections: set[Connection] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="controller-endpoint", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            conn.close()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, addr = self._server.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                # the handshake is the connection's thread's (a slow or silent peer must not hold the others)
                sock = self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            conn = Connection(sock, f"{addr[0]}:{addr[1]}", self.listener)
            conn.authenticated = self._sasl is None
            with self._lock:
                self._connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name=f"endpoint-{conn.peer}", daemon=True).start()

    def _serve(self, conn: Connection) -> None:
        try:
            if isinstance(conn.sock, ssl.SSLSocket) and not self._handshake(conn):
                return
            while not self._stopping.is_set():
                try:
                    frame = conn.read_frame()
                except (OSError, ValueError) as e:
                    if not conn.closed.is_set():
                        log.info("connection from %s: %s", conn.peer, e)
                    return
                if frame is None:
                    return
                if not self._dispatch(conn, frame) or not conn.wait_answered():
                    return
        finally:
            conn.close()
            if conn.upstream is not None:
                conn.upstream.close()
            with self._lock:
                self._connections.discard(conn)
            self._on_close(conn)

    def _handshake(self, conn: Connection) -> bool:
        """The TLS handshake of ``conn``, within :data:`HANDSHAKE_TIMEOUT_S`; ``False`` (logged) when it fails."""
        sock = conn.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT_S)
            sock.do_handshake()
            sock.settimeout(None)
        except (OSError, ValueError) as e:
            if not conn.closed.is_set():
                self.handshake_failures += 1
                log.warning("connection from %s on %s: TLS handshake failed: %s", conn.peer, self.listener, e)
            return False
        try:
            conn.principal = tls_principal(sock.getpeercert(binary_form=True))
        except ValueError as e:  # verified by OpenSSL, so not expected: refused rather than taken as anonymous
            self.handshake_failures += 1
            log.warning("connection from %s on %s: unreadable client certificate: %s", conn.peer, self.listener, e)
            return False
        self.handshakes += 1
        log.debug("connection from %s on %s: TLS %s, %s", conn.peer, self.listener, sock.version(), conn.principal)
        return True

    def _dispatch(self, conn: Connection, frame: bytes) -> bool:
        """Handle one request; ``False`` closes the connection."""
        if len(frame) < 8:
            log.warning("connection from %s: a request of %d bytes", conn.peer, len(frame))
            return False
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
        if not conn.authenticated and api_key != API_VERSIONS:
            return self._authenticate(conn, api_key, version, correlation_id, frame)
        if api_key == API_VERSIONS and version not in SERVED[API_VERSIONS]:
            # Kafka's rule: an ApiVersions newer than the server's is answered at v0 with the ranges
            return conn.answer(correlation_id, api_versions_response(version, self._versions(conn)))
        served = SERVED.get(api_key)
        if served is None:
            if api_key in NOT_FORWARDED or self._forwarder is None:
                log.warning("connection from %s: api %s v%s is not served here: closing", conn.peer, api_key, version)
                return False
            return self._forward(conn, api_key, version, correlation_id, frame)
        if version not in served:
            log.warning("connection from %s: api %s v%s is not served here: closing", conn.peer, api_key, version)
            return False
        if api_key in UNLESS_FORWARDED and self._forwarder is not None and self._upstream(conn) is not None:
            return self._forward(conn, api_key, version, correlation_id, frame)
        cls = request_type(api_key, version)
        try:
            _header, offset = entity_reader(cls.__header_schema__)(frame, 0)
            body, _ = entity_reader(cls)(frame, offset)
        except Exception as e:  # kio raises its own and the standard library's errors on a bad frame
            log.warning("connection from %s: unreadable api %s v%s: %s", conn.peer, api_key, version, e)
            return False
        if api_key == API_VERSIONS:
            return conn.answer(correlation_id, api_versions_response(version, self._versions(conn)))
        if api_key in PARTLY_SERVED and (self._owns is None or not self._owns(api_key, body)):
            if self._forwarder is None:
                log.warning("connection from %s: api %s v%s is not served here: closing", conn.peer, api_key, version)
                return False
            return self._forward(conn, api_key, version, correlation_id, frame)
        if api_key in CLUSTER_ACTION_APIS and not self._acts(conn):
            return self._refuse(conn, api_key, version, correlation_id)
        conn.awaiting()
        self._on_request(conn, api_key, version, correlation_id, body)
        return not conn.closed.is_set()

    def _acts(self, conn: Connection) -> bool:
        """Whether ``conn`` may send the brokers' requests."""
        if self._may_act is not None:
            return self._may_act(conn)
        return self._cluster_action.allows(conn.principal)

    def _refuse(self, conn: Connection, api_key: int, version: int, correlation_id: int) -> bool:
        """Answer a broker's request ``CLUSTER_AUTHORIZATION_FAILED``: ``conn``'s principal may not send it."""
        key = (conn.principal, api_key)
        with self._lock:
            self.refusals += 1
            first = key not in self._refusals_logged
            self._refusals_logged.add(key)
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "connection from %s on %s: %s may not send api %s (%s): answered CLUSTER_AUTHORIZATION_FAILED (%s)%s",
            conn.peer,
            self.listener,
            conn.principal,
            api_key,
            _API_NAMES.get(api_key, "?"),
            CLUSTER_AUTHORIZATION_FAILED,
            "; further refusals of it are logged at debug level" if first else "",
        )
        return conn.answer(correlation_id, error_response(api_key, version, CLUSTER_AUTHORIZATION_FAILED))

    def _authenticate(self, conn: Connection, api_key: int, version: int, correlation_id: int, frame: bytes) -> bool:
        """A request of a connection not authenticated yet: SaslHandshake or SaslAuthenticate (Kafka's
        ``SaslServerAuthenticator``); ``False`` closes the connection."""
        assert self._sasl is not None
        low, high = SASL_VERSIONS.get(api_key, (0, -1))
        expected = SASL_HANDSHAKE if conn.exchange is None else SASL_AUTHENTICATE
        if api_key != expected or not low <= version <= high:
            self.authentication_failures += 1
            log.warning(
                "connection from %s on %s: api %s v%s before authenticating (error %s): closing",
                conn.peer,
                self.listener,
                api_key,
                version,
                ILLEGAL_SASL_STATE,
            )
            return False
        kind = "sasl_handshake" if api_key == SASL_HANDSHAKE else "sasl_authenticate"
        request_cls = getattr(importlib.import_module(f"kio.schema.{kind}.v{version}.request"), _SASL_CLASSES[kind])
        response_cls = getattr(
            importlib.import_module(f"kio.schema.{kind}.v{version}.response"),
            _SASL_CLASSES[kind].replace("Request", "Response"),
        )
        try:
            _header, offset = entity_reader(request_cls.__header_schema__)(frame, 0)
            body, _ = entity_reader(request_cls)(frame, offset)
        except Exception as e:  # kio raises its own and the standard library's errors on a bad frame
            log.warning("connection from %s: unreadable api %s v%s: %s", conn.peer, api_key, version, e)
            return False
        if api_key == SASL_HANDSHAKE:
            conn.exchange = self._sasl.start(str(body.mechanism))
            error = 0 if conn.exchange is not None else UNSUPPORTED_SASL_MECHANISM
            answered = conn.answer(
                correlation_id, response_cls(error_code=_error_code(error), mechanisms=self._sasl.mechanisms)
            )
            if error:
                self.authentication_failures += 1
                log.warning(
                    "connection from %s on %s: SASL mechanism %r is not enabled (%s): closing",
                    conn.peer,
                    self.listener,
                    body.mechanism,
                    ",".join(self._sasl.mechanisms),
                )
                return False
            return answered
        exchange = conn.exchange
        assert exchange is not None
        try:
            token = exchange.step(bytes(body.auth_bytes))
        except SaslFailedError as e:
            self.authentication_failures += 1
            mechanism = exchange.mechanism
            log.warning("connection from %s on %s: SASL %s refused: %s", conn.peer, self.listener, mechanism, e)
            conn.answer(correlation_id, _sasl_answer(response_cls, SASL_AUTHENTICATION_FAILED, str(e), b""))
            return False
        if exchange.done:
            conn.authenticated, conn.principal = True, sasl_principal(exchange.principal)
            self.authentications += 1
            log.info(
                "connection from %s on %s: authenticated as %s (SASL %s)",
                conn.peer,
                self.listener,
                exchange.principal,
                exchange.mechanism,
            )
        return conn.answer(correlation_id, _sasl_answer(response_cls, 0, None, token))

    def _upstream(self, conn: Connection) -> BrokerConnection | None:
        if not conn.upstream_sought and self._forwarder is not None:
            conn.upstream_sought = True
            conn.upstream = self._forwarder.open(self.listener)
        return conn.upstream

    def _versions(self, conn: Connection) -> dict[int, tuple[int, int]] | None:
        """What ApiVersions lists on ``conn``: the served APIs and what its broker speaks (``None``: served only);
        on a SASL endpoint, which forwards nothing, the served APIs and SASL's."""
        if self._sasl is not None:
            return dict(sorted((node_versions({}) | SASL_VERSIONS).items()))
        if self._forwarder is None:
            return None
        return Forwarder.versions(self._upstream(conn))

    def _forward(self, conn: Connection, api_key: int, version: int, correlation_id: int, frame: bytes) -> bool:
        """Send ``frame`` to ``conn``'s broker and its answer back; ``False`` closes the connection."""
        upstream = self._upstream(conn)
        if upstream is None:
            log.warning(
                "connection from %s: no broker answers on %s to forward api %s v%s to: closing",
                conn.peer,
                self.listener,
                api_key,
                version,
            )
            return False
        try:
            expected = answered(api_key, frame)
        except ValueError as e:
            log.warning("connection from %s: unreadable api %s v%s: %s", conn.peer, api_key, version, e)
            return False
        if expected:
            conn.awaiting()
        try:
            response = upstream.relay(frame, correlation_id, answered=expected)
        except WireError as e:
            # as when the broker goes away: the client's connection closes and it asks again elsewhere
            log.info("connection from %s: api %s v%s not forwarded: %s: closing", conn.peer, api_key, version, e)
            conn.upstream = None
            upstream.close()
            return False
        return response is None or conn.send(response)


_API_NAMES = {
    CONTROLLED_SHUTDOWN: "ControlledShutdown",
    ALTER_PARTITION: "AlterPartition",
    ALLOCATE_PRODUCER_IDS: "AllocateProducerIds",
}
_SASL_CLASSES = {"sasl_handshake": "SaslHandshakeRequest", "sasl_authenticate": "SaslAuthenticateRequest"}


def _error_code(code: int) -> Any:
    from kio.schema.errors import ErrorCode

    return ErrorCode(code)


def _sasl_answer(cls: Any, error: int, message: str | None, token: bytes) -> Any:
    """A SaslAuthenticateResponse of ``cls``'s version (from v1 with the session lifetime's default: 0, none)."""
    return cls(error_code=_error_code(error), error_message=message, auth_bytes=token)
