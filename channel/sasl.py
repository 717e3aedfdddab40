"""SASL of the controller channel on the brokers' SASL_PLAINTEXT / SASL_SSL listeners, configured as a Kafka broker's.

A ZooKeeper-mode Kafka controller authenticates to the brokers' control-plane listener, and a broker to its
controller's inter-broker listener, with ``sasl.mechanism.inter.broker.protocol`` and the credentials of that
listener's JAAS login (``listener.name.<listener>.<mechanism>.sasl.jaas.config``: ``username`` and
``password``); as a server a broker accepts ``sasl.enabled.mechanisms`` (or
``listener.name.<listener>.sasl.enabled.mechanisms``), checking a PLAIN password against the same JAAS login's
``user_<name>="<password>"`` entries (Kafka's ``PlainServerCallbackHandler``) and a SCRAM proof against the
user's SCRAM credential in ZooKeeper (``/config/users/<user>``, made with ``kafka-configs --alter
--add-config SCRAM-SHA-512=[password=...]``). The channel is both, and takes the same properties from the same
file as its ``ssl.*`` (``livectl channel --security-config``), mechanisms ``PLAIN``, ``SCRAM-SHA-256`` and
``SCRAM-SHA-512``; an unprefixed ``sasl.jaas.config`` serves every listener and mechanism with no login of its
own (livectl's shorthand; a Kafka broker reads only the prefixed form).

The client side runs kafka-python's SASL mechanisms (:func:`client_mechanism`) over the channel's own
connection (:meth:`channel.wire.BrokerConnection.authenticate`); the server side is here: :class:`PlainExchange`
(RFC 4616) and :class:`ScramExchange` (RFC 5802/7677, as Kafka's ``ScramSaslServer``: no channel binding;
extensions such as delegation tokens' ``tokenauth`` are not taken: the user's own credential is checked), one per
connection, started by :meth:`SaslServer.start`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.net.sasl import get_sasl_mechanism

from sinks.security import SecurityConfigError

__all__ = [
    "MECHANISMS",
    "SASL_PROTOCOLS",
    "ChannelSasl",
    "JaasLogin",
    "PlainExchange",
    "SaslFailedError",
    "SaslServer",
    "ScramCredential",
    "ScramExchange",
    "client_mechanism",
    "parse_jaas",
    "parse_scram_credential",
]

#: the SASL mechanisms the channel speaks, both ways
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
_HASHES: Mapping[str, Callable[..., Any]] = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
#: Kafka's ``ScramMechanism.minIterations``
SCRAM_MIN_ITERATIONS = 4096

_LISTENER_JAAS = re.compile(r"listener\.name\.([a-z0-9_.-]+)\.([a-z0-9-]+)\.sasl\.jaas\.config")
_LISTENER_ENABLED = re.compile(r"listener\.name\.([a-z0-9_.-]+)\.sasl\.enabled\.mechanisms")
_JAAS = re.compile(r"^\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$", re.DOTALL)
_JAAS_OPTION = re.compile(r'\s*([A-Za-z0-9_.-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s";]+)')
KNOWN_PROPERTIES = (
    "sasl.mechanism.inter.broker.protocol",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "listener.name.<listener>.<mechanism>.sasl.jaas.config",
    "listener.name.<listener>.sasl.enabled.mechanisms",
)


_OTHER_AUTHZID = "Authentication failed: Client requested an authorization id that is different from username"


class SaslFailedError(Exception):
    """A client's SASL exchange failed: the message is what the client is told (never a secret)."""


@dataclass(frozen=True)
class JaasLogin:
    """One JAAS login module line (``sasl.jaas.config``): the module's class and its options."""

    module: str
    options: Mapping[str, str] = field(default_factory=dict)

    @property
    def username(self) -> str:
        return self.options.get("username", "")

    @property
    def password(self) -> str:
        return self.options.get("password", "")

    def users(self) -> dict[str, str]:
        """PLAIN's server-side users: ``user_<name>="<password>"`` options, name -> password."""
        return {k[len("user_") :]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}

    def __repr__(self) -> str:
        return f"JaasLogin({self.module}, username={self.username!r}, users={sorted(self.users())})"


def parse_jaas(text: str, name: str = "sasl.jaas.config") -> JaasLogin:
    """A ``sasl.jaas.config`` value: ``<LoginModule class> required key="value" ...;`` (one module).
    :class:`SecurityConfigError` naming ``name`` when it is not that (the value is never echoed)."""
    m = _JAAS.match(text)
    if m is None:
        raise SecurityConfigError(name, 'must look like <LoginModule> required username="..." password="...";')
    options: dict[str, str] = {}
    rest = m.group(3)
    pos = 0
    while pos < len(rest.rstrip()):
        o = _JAAS_OPTION.match(rest, pos)
        if o is None:
            raise SecurityConfigError(name, 'options must look like key="value"')
        value = o.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[o.group(1)] = value
        pos = o.end()
    return JaasLogin(m.group(1), options)


def _mechanisms(name: str, value: str) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(m.strip().upper() for m in value.split(",") if m.strip()))
    bad = [m for m in out if m not in MECHANISMS]
    if bad:
        raise SecurityConfigError(name, f"the channel speaks {', '.join(MECHANISMS)}, not {', '.join(bad)}")
    return out


@dataclass(frozen=True)
class ChannelSasl:
    """The channel's SASL settings (see the module docstring); ``ChannelSasl()``: none."""

    #: ``sasl.mechanism.inter.broker.protocol`` ("": not given; Kafka's default, GSSAPI, is not spoken)
    client_mechanism: str = ""
    #: ``sasl.enabled.mechanisms`` ("": not given)
    enabled: tuple[str, ...] = ()
    #: ``listener.name.<listener>.sasl.enabled.mechanisms``, by lower-case listener name
    listener_enabled: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: JAAS logins by (lower-case listener name, lower-case mechanism); ("", ""): the unprefixed ``sasl.jaas.config``
    logins: Mapping[tuple[str, str], JaasLogin] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ChannelSasl:
        """From Kafka's broker property names (empty values: unset); an unknown name or a bad value raises
        :class:`SecurityConfigError` naming it."""
        client = ""
        enabled: tuple[str, ...] = ()
        listener_enabled: dict[str, tuple[str, ...]] = {}
        logins: dict[tuple[str, str], JaasLogin] = {}
        for raw_name, raw in props.items():
            name, value = raw_name.strip(), raw.strip()
            lowered = name.lower()
            if not value:
                continue
            if name == "sasl.mechanism.inter.broker.protocol":
                named = _mechanisms(name, value)
                if len(named) != 1:
                    raise SecurityConfigError(name, "one mechanism, the channel's own toward the brokers")
                client = named[0]
            elif name == "sasl.enabled.mechanisms":
                enabled = _mechanisms(name, value)
            elif name == "sasl.jaas.config":
                logins["", ""] = parse_jaas(value, name)
            elif (m := _LISTENER_JAAS.fullmatch(lowered)) is not None:
                if m.group(2).upper() not in MECHANISMS:
                    raise SecurityConfigError(name, f"the channel speaks {', '.join(MECHANISMS)}")
                logins[m.group(1), m.group(2)] = parse_jaas(value, name)
            elif (m := _LISTENER_ENABLED.fullmatch(lowered)) is not None:
                listener_enabled[m.group(1)] = _mechanisms(name, value)
            else:
                raise SecurityConfigError(name, f"unknown channel SASL property; known: {', '.join(KNOWN_PROPERTIES)}")
        return cls(client, enabled, listener_enabled, logins)

    def login(self, listener: str, mechanism: str) -> JaasLogin | None:
        """The JAAS login of ``listener`` and ``mechanism``: its own, else the unprefixed ``sasl.jaas.config``."""
        return self.logins.get((listener.lower(), mechanism.lower())) or self.logins.get(("", ""))

    def client_config(self, listener: str) -> dict[str, str]:
        """kafka-python's SASL settings of the channel's connections to the brokers' ``listener``:
        :class:`SecurityConfigError` when the mechanism or the login's username and password are missing."""
        mechanism = self.client_mechanism
        if not mechanism:
            raise SecurityConfigError(
                "sasl.mechanism.inter.broker.protocol", f"needed to reach a SASL endpoint: {', '.join(MECHANISMS)}"
            )
        login = self.login(listener, mechanism)
        if login is None or not login.username or not login.password:
            raise SecurityConfigError(
                f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config",
                'needs username="..." and password="..." (or an unprefixed sasl.jaas.config)',
            )
        return {
            "sasl_mechanism": mechanism,
            "sasl_plain_username": login.username,
            "sasl_plain_password": login.password,
        }

    def server_mechanisms(self, listener: str) -> tuple[str, ...]:
        """The mechanisms the endpoint of ``listener`` enables (:class:`SecurityConfigError` when none is given)."""
        out = self.listener_enabled.get(listener.lower(), self.enabled)
        if not out:
            raise SecurityConfigError(
                "sasl.enabled.mechanisms", f"needed for the SASL listener {listener} ({', '.join(MECHANISMS)})"
            )
        return out

    def server(self, listener: str, scram: Callable[[str, str], ScramCredential | None]) -> SaslServer:
        """The SASL server of the endpoint of ``listener``: PLAIN's users from its JAAS login (``user_*``; one
        is needed when PLAIN is enabled), SCRAM's credentials from ``scram(user, mechanism)``."""
        mechanisms = self.server_mechanisms(listener)
        users: dict[str, str] = {}
        if "PLAIN" in mechanisms:
            login = self.login(listener, "PLAIN")
            users = login.users() if login is not None else {}
            if not users:
                raise SecurityConfigError(
                    f"listener.name.{listener.lower()}.plain.sasl.jaas.config",
                    'PLAIN is enabled: list its users as user_<name>="<password>"',
                )
        return SaslServer(listener, mechanisms, users, scram)

    def __repr__(self) -> str:
        return (
            f"ChannelSasl(client_mechanism={self.client_mechanism!r}, enabled={self.enabled}, "
            f"listener_enabled={dict(self.listener_enabled)}, logins={dict(self.logins)})"
        )


def client_mechanism(config: Mapping[str, str]) -> Any:
    """kafka-python's SASL mechanism object (``auth_bytes`` / ``receive`` / ``is_done`` / ``is_authenticated``)
    for :meth:`ChannelSasl.client_config`'s settings: a new exchange."""
    return get_sasl_mechanism(config["sasl_mechanism"])(**config)


# ---------------------------------------------------------------------------- the endpoint's side


@dataclass(frozen=True)
class ScramCredential:
    """A user's SCRAM credential as Kafka stores it (``ScramCredential``): salt, stored and server keys, iterations."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def parse_scram_credential(text: str) -> ScramCredential:
    """Kafka's ``ScramCredentialUtils.credentialFromString``: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,
    iterations=<n>``; ``ValueError`` when it is not that."""
    fields = dict(p.split("=", 1) for p in text.split(",") if "=" in p)
    try:
        return ScramCredential(
            base64.b64decode(fields["salt"], validate=True),
            base64.b64decode(fields["stored_key"], validate=True),
            base64.b64decode(fields["server_key"], validate=True),
            int(fields["iterations"]),
        )
    except (KeyError, ValueError) as e:
        raise ValueError(f"not a SCRAM credential: {type(e).__name__}") from None


def _failed(mechanism: str) -> SaslFailedError:
    # Kafka's message for a wrong password or an unknown user alike (nothing said about which)
    return SaslFailedError(
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
    )


class PlainExchange:
    """PLAIN (RFC 4616) against ``users`` (name -> password), as Kafka's ``PlainSaslServer``: one message
    ``authzid NUL authcid NUL passwd``; an authorization id other than the user is refused."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.done = False
        self.principal = ""

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailedError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise SaslFailedError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailedError("Authentication failed: username not specified")
        if authzid and authzid != user:
            raise SaslFailedError(_OTHER_AUTHZID)
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailedError("Authentication failed: Invalid username or password")
        self.done, self.principal = True, user
        return b""


class ScramExchange:
    """SCRAM-SHA-256 / -512 (RFC 5802), the server's two steps, as Kafka's ``ScramSaslServer``: the user's
    credential from ``credentials(user, mechanism)`` (``None``: unknown user, refused)."""

    def __init__(self, mechanism: str, credentials: Callable[[str, str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self._hash = _HASHES[mechanism]
        self._credentials = credentials
        self.done = False
        self.principal = ""
        self._state = 0
        self._user = ""
        self._nonce = ""
        self._first_bare = self._server_first = self._binding = ""
        self._credential: ScramCredential | None = None

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self._hash).digest()

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise SaslFailedError(f"Invalid SASL/{self.mechanism} message: not UTF-8") from None
        if self._state == 0:
            return self._first(text)
        if self._state == 1:
            return self._final(text)
        raise SaslFailedError(f"Unexpected SASL/{self.mechanism} message after the exchange")

    def _first(self, text: str) -> bytes:
        m = re.fullmatch(r"(([ny]),(?:a=([^,]*))?,)(n=([^,]*),r=([^,]+)(?:,.*)?)", text)
        if m is None:
            raise SaslFailedError(f"Invalid SASL/{self.mechanism} client-first message")
        gs2_header, _, authzid, first_bare, user, client_nonce = m.groups()
        user = user.replace("=2C", ",").replace("=3D", "=")
        authzid = (authzid or "").replace("=2C", ",").replace("=3D", "=")
        if authzid and authzid != user:
            raise SaslFailedError(_OTHER_AUTHZID)
        credential = self._credentials(user, self.mechanism)
        if credential is None:
            raise _failed(self.mechanism)
        if credential.iterations < SCRAM_MIN_ITERATIONS:
            raise SaslFailedError(f"Iterations {credential.iterations} is less than the minimum {SCRAM_MIN_ITERATIONS}")
        self._user, self._credential = user, credential
        self._first_bare = first_bare
        self._binding = base64.b64encode(gs2_header.encode()).decode()
        self._nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = 1
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        m = re.fullmatch(r"(c=([^,]*),r=([^,]*)(?:,.*?)?),p=([^,]+)", text)
        if m is None:
            raise SaslFailedError(f"Invalid SASL/{self.mechanism} client-final message")
        without_proof, binding, nonce, proof_b64 = m.groups()
        if nonce != self._nonce:
            raise SaslFailedError("Invalid client nonce in the final client message.")
        if binding != self._binding:  # the GS2 header again (base64("n,,"): no channel binding, no authzid)
            raise SaslFailedError("Invalid channel binding in the final client message.")
        assert self._credential is not None
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise SaslFailedError(f"Invalid SASL/{self.mechanism} client proof") from None
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = self._hmac(self._credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise _failed(self.mechanism)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self._hash(client_key).digest(), self._credential.stored_key):
            raise _failed(self.mechanism)
        verifier = base64.b64encode(self._hmac(self._credential.server_key, auth_message)).decode()
        self._state, self.done, self.principal = 2, True, self._user
        return f"v={verifier}".encode()


Exchange = PlainExchange | ScramExchange


@dataclass(frozen=True)
class SaslServer:
    """The SASL server of one endpoint: ``mechanisms`` enabled, PLAIN's ``users``, SCRAM's ``scram`` lookup."""

    listener: str
    mechanisms: tuple[str, ...]
    users: Mapping[str, str] = field(default_factory=dict, repr=False)
    scram: Callable[[str, str], ScramCredential | None] = field(default=lambda _u, _m: None, repr=False)

    def start(self, mechanism: str) -> Exchange | None:
        """A new exchange of ``mechanism``; ``None`` when it is not enabled."""
        if mechanism not in self.mechanisms:
            return None
        if mechanism == "PLAIN":
            return PlainExchange(self.users)
        return ScramExchange(mechanism, self.scram)


def scram_credential_of(mechanism: str, password: str, salt: bytes, iterations: int = SCRAM_MIN_ITERATIONS) -> str:
    """The text Kafka stores for ``password`` (``ScramFormatter``), for tests and operators: what
    :func:`parse_scram_credential` reads."""
    digest = _HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(digest().name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored = digest(client_key).digest()
    server = hmac.new(salted, b"Server Key", digest).digest()

    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode()

    return f"salt={b64(salt)},stored_key={b64(stored)},server_key={b64(server)},iterations={iterations}"
