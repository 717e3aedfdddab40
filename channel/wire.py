"""One blocking connection to a Kafka broker speaking Kafka's wire protocol, encoded by ``kio``.

A request goes out as Kafka frames it: a 4-byte size, the request header of the version the API's schema
names (v1, or v2 for a flexible version), then the body; the answer carries the response header of its
schema (ApiVersions always answers with header v0) and the body, read with ``kio``'s readers.
:meth:`BrokerConnection.negotiate` asks ApiVersions (v3, which a 3.x broker answers; an older broker
answers v0 with ``UNSUPPORTED_VERSION`` and its ranges) and keeps the broker's version ranges. Given an
:class:`ssl.SSLContext` (``tls``), the connection speaks TLS (an SSL listener), the handshake done on connect.
On a SASL listener, :meth:`BrokerConnection.authenticate` runs a SASL mechanism's exchange as Kafka's clients do:
SaslHandshake v1 names the mechanism, then SaslAuthenticate carries its messages until it is done.
"""

from __future__ import annotations

import importlib
import io
import socket
import ssl
import struct
from typing import Any, TypeVar, cast

from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

__all__ = [
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "UNSUPPORTED_VERSION",
    "BrokerConnection",
    "SaslRefusedError",
    "WireError",
]

#: Kafka's error code for a request version the broker does not speak
UNSUPPORTED_VERSION = 35
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
CLIENT_ID = "livectl-channel"
_MAX_FRAME = 100 * 1024 * 1024

R = TypeVar("R")


class WireError(RuntimeError):
    """The broker could not be reached, closed the connection, or answered something unreadable."""


class SaslRefusedError(WireError):
    """The broker refused the channel's SASL mechanism or credentials (Kafka's error code ``error_code``)."""

    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = error_code


class BrokerConnection:
    """A connection to one broker (``host``, ``port``); requests are sent one at a time, in order."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout_s: float = 30.0,
        client_id: str = CLIENT_ID,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self._correlation = 0
        #: api key -> (min, max) the broker speaks, after :meth:`negotiate`
        self.versions: dict[int, tuple[int, int]] = {}
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise WireError(f"cannot connect to broker {host}:{port}: {e}") from None
        if tls is not None:
            try:
                sock = tls.wrap_socket(sock, server_hostname=host)
            except OSError as e:  # ssl.SSLError and ssl.SSLCertVerificationError among them
                sock.close()
                raise WireError(f"no TLS with broker {host}:{port}: {e}") from None
        self._sock = sock
        #: whether the connection speaks TLS
        self.tls = tls is not None
        #: the SASL mechanism the connection authenticated with ("": none)
        self.sasl = ""

    def close(self) -> None:
        self._sock.close()

    def set_timeout(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for each answer from now on."""
        self._sock.settimeout(timeout_s)

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def negotiate(self) -> dict[int, tuple[int, int]]:
        """Ask ApiVersions and keep the broker's ranges (api key -> (min, max))."""
        response: Any = self.send(
            ApiVersionsRequest(client_software_name="livectl-channel", client_software_version="1"),
            ApiVersionsResponse,
        )
        if response.error_code.value == UNSUPPORTED_VERSION:
            response = self.send(ApiVersionsRequestV0(), ApiVersionsResponseV0)
        if response.error_code.value != 0:
            raise WireError(f"broker {self.host}:{self.port} refused ApiVersions: error {response.error_code.value}")
        self.versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
        return self.versions

    def authenticate(self, mechanism: Any, name: str) -> None:
        """Authenticate with SASL mechanism ``name``, whose exchange ``mechanism`` runs (kafka-python's
        ``auth_bytes`` / ``receive`` / ``is_done`` / ``is_authenticated``, :func:`channel.sasl.client_mechanism`):
        SaslHandshake v1, then SaslAuthenticate (the highest version both sides speak, up to v2) until the
        mechanism is done. :class:`SaslRefusedError` when the broker refuses; :class:`WireError` otherwise."""
        if not self.versions:
            self.negotiate()
        if self.best_version(SASL_HANDSHAKE, range(1, 2)) is None:
            raise WireError(f"broker {self.host}:{self.port} does not speak SaslHandshake v1 (is it a SASL listener?)")
        version = self.best_version(SASL_AUTHENTICATE, range(0, 3))
        if version is None:
            raise WireError(f"broker {self.host}:{self.port} does not speak SaslAuthenticate")
        shake: Any = self.send(SaslHandshakeRequest(mechanism=name), SaslHandshakeResponse)
        if shake.error_code.value != 0:
            raise SaslRefusedError(
                f"broker {self.host}:{self.port} does not enable SASL mechanism {name} (it enables "
                f"{', '.join(shake.mechanisms) or 'none'}): error {shake.error_code.value}",
                int(shake.error_code.value),
            )
        request_module = importlib.import_module(f"kio.schema.sasl_authenticate.v{version}.request")
        response_module = importlib.import_module(f"kio.schema.sasl_authenticate.v{version}.response")
        while not mechanism.is_done():
            answer: Any = self.send(
                request_module.SaslAuthenticateRequest(auth_bytes=mechanism.auth_bytes()),
                response_module.SaslAuthenticateResponse,
            )
            if answer.error_code.value != 0:
                raise SaslRefusedError(
                    f"broker {self.host}:{self.port} refused SASL {name}: error {answer.error_code.value}: "
                    f"{answer.error_message}",
                    int(answer.error_code.value),
                )
            try:
                mechanism.receive(answer.auth_bytes)
            except (ValueError, KeyError) as e:  # kafka-python's SCRAM: a server message or signature that is wrong
                raise WireError(f"broker {self.host}:{self.port}: SASL {name}: {e}") from None
        if not mechanism.is_authenticated():
            raise WireError(f"broker {self.host}:{self.port}: SASL {name} did not authenticate")
        self.sasl = name

    def best_version(self, api_key: int, ours: range) -> int | None:
        """The highest version of ``api_key`` both this side (``ours``) and the broker speak; ``None`` if none."""
        theirs = self.versions.get(api_key)
        if theirs is None:
            return None
        common = [v for v in ours if theirs[0] <= v <= theirs[1]]
        return max(common) if common else None

    def send(self, request: Any, response_type: type[R]) -> R:
        """Send ``request`` (a kio request entity) and read its answer as ``response_type``."""
        self._correlation += 1
        correlation = self._correlation
        header_type = request.__header_schema__
        header = header_type(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=i32(correlation),
            client_id=self.client_id,
        )
        buf = io.BytesIO()
        entity_writer(header_type)(buf, header)
        entity_writer(type(request))(buf, request)
        payload = buf.getvalue()
        try:
            self._sock.sendall(struct.pack(">i", len(payload)) + payload)
            (size,) = struct.unpack(">i", self._read(4))
            if not 0 < size <= _MAX_FRAME:
                raise WireError(f"broker {self.host}:{self.port} sent a frame of {size} bytes")
            frame = self._read(size)
        except OSError as e:
            raise WireError(f"broker {self.host}:{self.port}: {e}") from None
        response_header_type = cast(Any, response_type).__header_schema__
        head, offset = entity_reader(response_header_type)(frame, 0)
        if int(head.correlation_id) != correlation:
            raise WireError(
                f"broker {self.host}:{self.port} answered correlation id {head.correlation_id}, expected {correlation}"
            )
        body, _ = entity_reader(cast(Any, response_type))(frame, offset)
        return cast(R, body)

    def relay(self, frame: bytes, correlation_id: int, *, answered: bool = True) -> bytes | None:
        """Send ``frame`` (a whole request as a client framed it, without its size) as it is, and return the
        broker's answer (the response header and body, without the size), which must carry ``correlation_id``;
        ``None`` without reading when the request gets no answer (``answered`` false: a Produce with acks 0)."""
        try:
            self._sock.sendall(struct.pack(">i", len(frame)) + frame)
            if not answered:
                return None
            (size,) = struct.unpack(">i", self._read(4))
            if not 4 <= size <= _MAX_FRAME:
                raise WireError(f"broker {self.host}:{self.port} sent a frame of {size} bytes")
            response = self._read(size)
        except OSError as e:
            raise WireError(f"broker {self.host}:{self.port}: {e}") from None
        (answered_id,) = struct.unpack_from(">i", response, 0)
        if answered_id != correlation_id:
            raise WireError(
                f"broker {self.host}:{self.port} answered correlation id {answered_id}, expected {correlation_id}"
            )
        return response

    def _read(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(n - len(chunks))
            if not chunk:
                raise WireError(f"broker {self.host}:{self.port} closed the connection")
            chunks += chunk
        return bytes(chunks)


def api_key(schema: Any) -> int:
    """The api key of a kio schema class."""
    return int(cast(i16, schema.__api_key__))
