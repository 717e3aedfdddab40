"""Security of livectl's clients, as Kafka configures its own: ZooKeeper ACLs and Kafka client settings.

**ZooKeeper** (Kafka's ``zookeeper.set.acl``). :class:`ZkSecurity` holds the authentication a client
adds to its session — ``digest`` (``user:password``, ZooKeeper's built-in scheme, added with ``addauth``)
or ``sasl`` (``user:password``, SASL DIGEST-MD5 when the session is set up, against a server whose JAAS
``Server`` section lists the user and whose ``authProvider`` is ZooKeeper's
``SASLAuthenticationProvider``: the identity is then ``sasl:<user>``, Kafka's usual non-Kerberos ZooKeeper
set-up; kazoo does it with ``pure-sasl``) — and whether the znodes it creates get ACLs. With
``set_acl`` every znode livectl creates gets Kafka's ``ZkData.defaultAcls`` (:func:`default_acls`): all
rights for the creator's authenticated identity (ZooKeeper's ``CREATOR_ALL_ACL``, i.e. whoever holds the
same credential — the standby controller too), plus read for everyone, except under Kafka's sensitive
roots (``/config/users``, ``/config/brokers``, ``/delegation_token``), which are not world-readable;
Kafka's old ``/consumers`` path stays open. A client without the credential can then read the tree but
cannot change a partition state, ``/controller_epoch`` or anything else livectl created.

**Kafka** (``security.protocol``, SASL and SSL). :class:`KafkaSecurity` takes Kafka's client property
names, as in a Kafka tool's ``--command-config`` file, and gives the keyword arguments of kafka-python's
``KafkaProducer`` / ``KafkaConsumer`` / ``KafkaAdminClient`` (:meth:`KafkaSecurity.client_kwargs`); the
same properties travel to Spark's source as ``kafka.<name>`` options (:meth:`KafkaSecurity.properties`).
An unknown property, or a value kafka-python does not accept, raises :class:`SecurityConfigError` naming
the property and the reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, make_digest_acl_credential

from core.kafka import zkdata
from core.kafka.requests import SECURITY_PROTOCOL_IDS
from sinks.errors import SinkError

ZK_AUTH_SCHEMES = ("digest", "sasl")
#: the SASL mechanism of the ``sasl`` scheme (ZooKeeper's ``DigestLoginModule``)
ZK_SASL_MECHANISM = "DIGEST-MD5"


class SecurityConfigError(SinkError, ValueError):
    """A security setting is malformed; ``key`` names it (without ever echoing a secret)."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"{key}: {reason}")


def sensitive_path(path: str) -> bool:
    """Kafka's ``ZkData.sensitivePath``."""
    return any(path.startswith(root) for root in zkdata.SENSITIVE_ROOT_PATHS)


def default_acls(secure: bool, path: str) -> list[ACL]:
    """Kafka's ``ZkData.defaultAcls(isSecure, path)``."""
    if not secure or path == zkdata.CONSUMERS_PATH:
        return list(OPEN_ACL_UNSAFE)
    acls = list(CREATOR_ALL_ACL)
    if not sensitive_path(path):
        acls += READ_ACL_UNSAFE
    return acls


@dataclass(frozen=True)
class ZkSecurity:
    """ZooKeeper authentication and ACLs of one client (see the module docstring)."""

    #: ``(scheme, credential)`` added to the session, e.g. ``("digest", "livectl:secret")``
    auth: tuple[tuple[str, str], ...] = ()
    set_acl: bool = False

    def __post_init__(self) -> None:
        for scheme, credential in self.auth:
            if scheme not in ZK_AUTH_SCHEMES:
                raise SecurityConfigError(
                    "zookeeper_auth", f"scheme {scheme!r} is not supported; use {', '.join(ZK_AUTH_SCHEMES)}"
                )
            user, sep, password = credential.partition(":")
            if not sep or not user or not password:
                raise SecurityConfigError("zookeeper_auth", f"must look like {scheme}:USER:PASSWORD")
        if sum(1 for scheme, _ in self.auth if scheme == "sasl") > 1:
            raise SecurityConfigError("zookeeper_auth", "a session authenticates with SASL once: one sasl credential")
        if self.set_acl and not self.auth:
            raise SecurityConfigError(
                "zookeeper_set_acl",
                "needs zookeeper_auth (znodes are made writable by the creator's authenticated identity only)",
            )

    @classmethod
    def parse(cls, auth: str, set_acl: bool = False) -> ZkSecurity:
        """From the settings' text: ``""`` (none), ``digest:USER:PASSWORD`` or ``sasl:USER:PASSWORD``."""
        if not auth:
            return cls((), set_acl)
        scheme, sep, credential = auth.partition(":")
        if not sep:
            raise SecurityConfigError("zookeeper_auth", "must look like digest:USER:PASSWORD or sasl:USER:PASSWORD")
        return cls(((scheme, credential),), set_acl)

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``KazooClient`` for this authentication: ``digest`` credentials as
        ``auth_data`` (added after connecting), the ``sasl`` one as ``sasl_options`` (the handshake of every
        connection, before any request)."""
        out: dict[str, Any] = {}
        digests = [(scheme, credential) for scheme, credential in self.auth if scheme == "digest"]
        if digests:
            out["auth_data"] = digests
        for scheme, credential in self.auth:
            if scheme == "sasl":
                user, _, password = credential.partition(":")
                out["sasl_options"] = {"mechanism": ZK_SASL_MECHANISM, "username": user, "password": password}
        return out

    def principals(self) -> list[tuple[str, str]]:
        """The identities ZooKeeper gives a session with this authentication, as ACL ``(scheme, id)``:
        what ``CREATOR_ALL_ACL`` becomes on the znodes it creates (``digest`` ids are hashed)."""
        out = []
        for scheme, credential in self.auth:
            user, _, password = credential.partition(":")
            out.append(("digest", make_digest_acl_credential(user, password)) if scheme == "digest" else ("sasl", user))
        return out

    def acl_for(self, path: str) -> list[ACL] | None:
        """The ACL for a znode created at ``path``; ``None`` (kazoo's open default) without ``set_acl``."""
        return default_acls(True, path) if self.set_acl else None

    def __repr__(self) -> str:
        shown = [f"{scheme}:{credential.partition(':')[0]}:***" for scheme, credential in self.auth]
        return f"ZkSecurity(auth={shown}, set_acl={self.set_acl})"


# ---------------------------------------------------------------------------- Kafka clients

SECURITY_PROTOCOLS = tuple(SECURITY_PROTOCOL_IDS)
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")

#: Kafka client property -> kafka-python keyword (values passed as text)
_TEXT_PROPERTIES = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.ca.location": "ssl_cafile",
    "ssl.keystore.location": "ssl_certfile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
    "ssl.cipher.suites": "ssl_ciphers",
}
_OTHER_PROPERTIES = (
    "sasl.jaas.config",
    "ssl.endpoint.identification.algorithm",
    "ssl.truststore.type",
    "ssl.keystore.type",
)
KNOWN_PROPERTIES = tuple(sorted((*_TEXT_PROPERTIES, *_OTHER_PROPERTIES)))
_SECRET = re.compile(r"password|secret|jaas", re.IGNORECASE)
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_properties(text: str, source: str) -> dict[str, str]:
    """A Java properties file as Kafka's tools and brokers take it: ``name=value`` lines, ``#`` / ``!``
    comments, blank lines. A line without ``=`` raises :class:`SecurityConfigError` naming ``source`` and
    the line."""
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise SecurityConfigError(f"{source} line {number}", "must look like name=value")
        props[name.strip()] = value.strip()
    return props


def is_secret(name: str) -> bool:
    """Whether a property holds a secret (never printed in errors or logs)."""
    return bool(_SECRET.search(name))


@dataclass(frozen=True)
class KafkaSecurity:
    """Kafka client security properties, by Kafka's names (see the module docstring)."""

    #: ``(name, value)`` pairs, sorted by name
    items: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        self.client_kwargs()  # validates

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> KafkaSecurity:
        """From Kafka property names; empty values are left out (unset)."""
        return cls(tuple(sorted((k.strip(), v.strip()) for k, v in props.items() if v.strip())))

    @classmethod
    def from_file_text(cls, text: str, source: str = "command config") -> KafkaSecurity:
        """From a Java properties file as Kafka's tools take it (``--command-config``):
        :func:`parse_properties`."""
        return cls.from_properties(parse_properties(text, source))

    @classmethod
    def client_kwargs_from_file(cls, path: Path) -> dict[str, Any]:
        """kafka-python keyword arguments from a ``--command-config`` file (Kafka's tools' option). An
        unreadable or malformed file raises :class:`SecurityConfigError` (``key`` = the option)."""
        try:
            text = path.read_text()
        except OSError as e:
            raise SecurityConfigError("--command-config", f"cannot read {path}: {e.strerror or e}") from None
        try:
            return cls.from_file_text(text, str(path)).client_kwargs()
        except SecurityConfigError as e:
            raise SecurityConfigError("--command-config", f"{path}: {e}") from None

    def properties(self) -> dict[str, str]:
        return dict(self.items)

    def client_kwargs(self) -> dict[str, Any]:
        """kafka-python keyword arguments for these properties."""
        out: dict[str, Any] = {}
        for name, value in self.items:
            if name in _TEXT_PROPERTIES:
                out[_TEXT_PROPERTIES[name]] = value
            elif name == "sasl.jaas.config":
                fields = dict(_JAAS_FIELD.findall(value))
                if "username" not in fields or "password" not in fields:
                    raise SecurityConfigError(
                        name, 'must name username="…" and password="…" (PlainLoginModule / ScramLoginModule)'
                    )
                out["sasl_plain_username"] = fields["username"]
                out["sasl_plain_password"] = fields["password"]
            elif name == "ssl.endpoint.identification.algorithm":
                if value.lower() not in ("", "https"):
                    raise SecurityConfigError(name, f"must be https or empty, got {value!r}")
                out["ssl_check_hostname"] = value.lower() == "https"
            elif name in ("ssl.truststore.type", "ssl.keystore.type"):
                # said for Java's clients (Spark's Kafka source, Kafka's tools), which read PEM only when told:
                # then one properties file serves them and livectl (a PEM keystore holds key and certificate)
                if value.upper() != "PEM":
                    raise SecurityConfigError(name, f"kafka-python reads PEM files only, got {value!r}")
            else:
                raise SecurityConfigError(name, f"unknown Kafka client security property; known: {KNOWN_PROPERTIES}")
        protocol = out.get("security_protocol", "PLAINTEXT")
        if protocol not in SECURITY_PROTOCOLS:
            raise SecurityConfigError("security.protocol", f"must be one of {SECURITY_PROTOCOLS}, got {protocol!r}")
        mechanism = out.get("sasl_mechanism")
        if mechanism is not None and mechanism not in SASL_MECHANISMS:
            raise SecurityConfigError("sasl.mechanism", f"must be one of {SASL_MECHANISMS}, got {mechanism!r}")
        if protocol.startswith("SASL_"):
            if mechanism is None:
                raise SecurityConfigError("sasl.mechanism", f"is required with security.protocol={protocol}")
            needs_password = mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
            if needs_password and ("sasl_plain_username" not in out or "sasl_plain_password" not in out):
                raise SecurityConfigError(
                    "sasl.jaas.config", f"{mechanism} needs a username and password (sasl.jaas.config)"
                )
        return out

    def __repr__(self) -> str:
        shown = {k: ("***" if is_secret(k) else v) for k, v in self.items}
        return f"KafkaSecurity({shown})"
