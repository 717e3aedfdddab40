"""TLS of the controller channel on the brokers' SSL listeners, configured as a Kafka broker's own ``ssl.*``.

A Kafka broker's ``ssl.*`` server properties serve both sides of its SSL listeners: its keystore is the
certificate it presents as a server and, to other brokers and its controller, as a client; its truststore
verifies the brokers it connects to and, with ``ssl.client.auth``, the clients that connect to it. The channel
is both too — a client of the brokers' control-plane listener (LeaderAndIsr, UpdateMetadata, StopReplica) and
the controller's endpoint the brokers connect to (ControlledShutdown, AlterPartition) — and takes the same
properties from one file (``livectl channel --security-config``, also ``--ssl-config``), PEM files only
(Python's :mod:`ssl`):

* ``ssl.truststore.location`` (or ``ssl.ca.location``): the CA certificates, PEM; default: the system's;
* ``ssl.keystore.location`` (or ``ssl.certificate.location``): the certificate chain, PEM, holding the key too
  unless ``ssl.key.location`` names it; ``ssl.key.password`` when the key is encrypted;
* ``ssl.client.auth``: ``required``, ``requested`` or ``none`` (Kafka's default) on the endpoint;
* ``ssl.endpoint.identification.algorithm``: ``https`` (Kafka's default: a broker's certificate must name the
  host of its registered endpoint) or empty (not checked);
* ``ssl.truststore.type`` / ``ssl.keystore.type``: ``PEM`` only (accepted so one file can serve Java too).

Which of the endpoint's listener names speak TLS is Kafka's ``listener.security.protocol.map``
(:func:`parse_protocol_map`); which of the brokers' do, their registrations say.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from sinks.security import SecurityConfigError, is_secret, parse_properties

__all__ = [
    "CLIENT_AUTH",
    "KNOWN_PROPERTIES",
    "OVER_TLS",
    "SPOKEN",
    "ChannelTls",
    "parse_protocol_map",
    "protocol_of",
]

#: Kafka's ``ssl.client.auth`` values -> Python's verify mode of a server context
CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
_NAMES = {
    "ssl.truststore.location": "cafile",
    "ssl.ca.location": "cafile",
    "ssl.keystore.location": "certfile",
    "ssl.certificate.location": "certfile",
    "ssl.key.location": "keyfile",
    "ssl.key.password": "key_password",
    "ssl.client.auth": "client_auth",
    "ssl.endpoint.identification.algorithm": "identification",
}
KNOWN_PROPERTIES = tuple(sorted((*_NAMES, "ssl.truststore.type", "ssl.keystore.type")))
#: the protocols the channel speaks, as Kafka names them (SASL: :mod:`channel.sasl`)
SPOKEN = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: of :data:`SPOKEN`, those over TLS
OVER_TLS = ("SSL", "SASL_SSL")


@dataclass(frozen=True)
class ChannelTls:
    """The channel's TLS settings (see the module docstring); ``ChannelTls()``: the system's CAs, no certificate."""

    cafile: str = ""
    certfile: str = ""
    keyfile: str = ""
    key_password: str = ""
    client_auth: str = "none"
    #: Kafka's ``ssl.endpoint.identification.algorithm``: ``https`` or empty
    identification: str = "https"

    def __post_init__(self) -> None:
        if self.client_auth not in CLIENT_AUTH:
            raise SecurityConfigError(
                "ssl.client.auth", f"must be one of {', '.join(CLIENT_AUTH)}, got {self.client_auth!r}"
            )
        if self.identification not in ("", "https"):
            raise SecurityConfigError(
                "ssl.endpoint.identification.algorithm", f"must be https or empty, got {self.identification!r}"
            )
        if self.keyfile and not self.certfile:
            raise SecurityConfigError("ssl.key.location", "needs ssl.keystore.location (the certificate)")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ChannelTls:
        """From Kafka's property names (empty values: unset); an unknown name or bad value raises
        :class:`SecurityConfigError` naming it."""
        fields: dict[str, str] = {}
        for raw_name, raw in props.items():
            name, value = raw_name.strip(), raw.strip()
            if name in ("ssl.truststore.type", "ssl.keystore.type"):
                if value and value.upper() != "PEM":
                    raise SecurityConfigError(name, f"the channel reads PEM files only, got {value!r}")
            elif name in _NAMES:
                if value or name == "ssl.endpoint.identification.algorithm":  # empty there: no host check
                    lowered = name in ("ssl.client.auth", "ssl.endpoint.identification.algorithm")
                    fields[_NAMES[name]] = value.lower() if lowered else value
            else:
                raise SecurityConfigError(name, f"unknown channel SSL property; known: {', '.join(KNOWN_PROPERTIES)}")
        return cls(**fields)

    @classmethod
    def from_file_text(cls, text: str, source: str = "ssl config") -> ChannelTls:
        """From a Java properties file (:func:`sinks.security.parse_properties`)."""
        return cls.from_properties(parse_properties(text, source))

    def client_context(self, *, with_certificate: bool = True) -> ssl.SSLContext:
        """For the channel's connections to the brokers: their certificates verified against the truststore,
        their host checked unless identification is off, the keystore's certificate presented when given and
        ``with_certificate`` (not on a client's forwarded requests: they must not pass as the channel's).
        ``OSError`` / :class:`ssl.SSLError` when a file cannot be read."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.identification == "https"
        ctx.verify_mode = ssl.CERT_REQUIRED
        if self.cafile:
            ctx.load_verify_locations(cafile=self.cafile)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.certfile and with_certificate:
            ctx.load_cert_chain(self.certfile, self.keyfile or None, self.key_password or None)
        return ctx

    def server_context(self) -> ssl.SSLContext:
        """For the controller's endpoint on its SSL listeners: the keystore's certificate, the clients'
        certificates asked per ``ssl.client.auth`` and verified against the truststore. :class:`SecurityConfigError`
        without a keystore; ``OSError`` / :class:`ssl.SSLError` when a file cannot be read."""
        if not self.certfile:
            raise SecurityConfigError(
                "ssl.keystore.location", "the endpoint's certificate is needed to listen with SSL"
            )
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.certfile, self.keyfile or None, self.key_password or None)
        ctx.verify_mode = CLIENT_AUTH[self.client_auth]
        if ctx.verify_mode != ssl.CERT_NONE:
            if self.cafile:
                ctx.load_verify_locations(cafile=self.cafile)
            else:
                ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return ctx

    def __repr__(self) -> str:
        shown = {k: ("***" if is_secret(k) and v else v) for k, v in vars(self).items()}
        return f"ChannelTls({shown})"


def parse_protocol_map(text: str) -> dict[str, str]:
    """Kafka's ``listener.security.protocol.map`` text (``NAME:PROTOCOL,...``) -> name -> protocol, of the
    protocols the channel speaks (:data:`SPOKEN`). ``ValueError`` naming what is wrong."""
    out: dict[str, str] = {}
    for pair in (p.strip() for p in text.split(",")):
        if not pair:
            continue
        name, sep, protocol = pair.partition(":")
        name, protocol = name.strip(), protocol.strip().upper()
        if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"expected NAME:PROTOCOL pairs, got {pair!r}")
        if protocol not in SPOKEN:
            raise ValueError(f"{name}: the channel speaks {', '.join(SPOKEN)}, not {protocol!r}")
        out[name] = protocol
    return out


def protocol_of(name: str, protocols: Mapping[str, str]) -> str:
    """The security protocol of listener ``name``: the map's, else as Kafka's default map has it (a listener
    named after a protocol speaks it: ``SSL`` is SSL, ``SASL_SSL`` SASL_SSL), else PLAINTEXT."""
    if name in protocols:
        return protocols[name]
    return name if name in SPOKEN else "PLAINTEXT"
