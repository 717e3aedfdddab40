"""The controller's endpoint: a TCP server speaking Kafka's wire protocol, where brokers send their controller
requests (:mod:`channel.answers` says which).

Each accepted connection has a reader thread: a frame is a 4-byte size, the request header of the version
the request's schema names, then the body, decoded with ``kio``. ApiVersions is answered at once; any other
request served is handed to ``on_request(connection, api_key, version, correlation_id, body)``, which
answers it now or later with :meth:`Connection.answer` (Kafka's clients match answers by correlation id and
keep one request in flight to a controller, so answers go out as they come). A request the endpoint does not
serve closes the connection, as a Kafka broker does; so does a frame that cannot be read.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from channel.answers import API_VERSIONS, SERVED, api_versions_response, request_type

__all__ = ["Connection", "ControllerEndpoint"]

log = logging.getLogger("livectl.channel.endpoint")

_MAX_FRAME = 100 * 1024 * 1024


class Connection:
    """One broker's connection to the endpoint."""

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock, self.peer = sock, peer
        self._lock = threading.Lock()
        self.closed = threading.Event()
        #: the broker id the connection's requests named (-1 until one did)
        self.broker_id = -1

    def answer(self, correlation_id: int, response: Any) -> bool:
        """Send ``response`` (a kio response entity) answering request ``correlation_id``; ``False`` when the
        connection is gone."""
        header_type = response.__header_schema__
        buf = io.BytesIO()
        entity_writer(header_type)(buf, header_type(correlation_id=i32(correlation_id)))
        entity_writer(type(response))(buf, response)
        payload = buf.getvalue()
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

    def close(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
            self.sock.close()

    def read_frame(self) -> bytes | None:
        head = self._read(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        if not 0 < size <= _MAX_FRAME:
            raise ValueError(f"a frame of {size} bytes")
        return self._read(size)

    def _read(self, n: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)


RequestHandler = Callable[[Connection, int, int, int, Any], None]


class ControllerEndpoint:
    """Listens on ``host``:``port`` (0: a free port, then :attr:`port` says which) until :meth:`close`."""

    def __init__(
        self, host: str, port: int, on_request: RequestHandler, on_close: Callable[[Connection], None]
    ) -> None:
        self._on_request, self._on_close = on_request, on_close
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
            conn = Connection(sock, f"{addr[0]}:{addr[1]}")
            with self._lock:
                self._connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name=f"endpoint-{conn.peer}", daemon=True).start()

    def _serve(self, conn: Connection) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    frame = conn.read_frame()
                except (OSError, ValueError) as e:
                    if not conn.closed.is_set():
                        log.info("connection from %s: %s", conn.peer, e)
                    return
                if frame is None:
                    return
                if not self._dispatch(conn, frame):
                    return
        finally:
            conn.close()
            with self._lock:
                self._connections.discard(conn)
            self._on_close(conn)

    def _dispatch(self, conn: Connection, frame: bytes) -> bool:
        """Handle one request; ``False`` closes the connection."""
        if len(frame) < 8:
            log.warning("connection from %s: a request of %d bytes", conn.peer, len(frame))
            return False
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
        if api_key == API_VERSIONS and version not in SERVED[API_VERSIONS]:
            # Kafka's rule: an ApiVersions newer than the server's is answered at v0 with the ranges
            return conn.answer(correlation_id, api_versions_response(version))
        served = SERVED.get(api_key)
        if served is None or version not in served:
            log.warning("connection from %s: api %s v%s is not served here: closing", conn.peer, api_key, version)
            return False
        cls = request_type(api_key, version)
        try:
            _header, offset = entity_reader(cls.__header_schema__)(frame, 0)
            body, _ = entity_reader(cls)(frame, offset)
        except Exception as e:  # kio raises its own and the standard library's errors on a bad frame
            log.warning("connection from %s: unreadable api %s v%s: %s", conn.peer, api_key, version, e)
            return False
        if api_key == API_VERSIONS:
            return conn.answer(correlation_id, api_versions_response(version))
        self._on_request(conn, api_key, version, correlation_id, body)
        return not conn.closed.is_set()
