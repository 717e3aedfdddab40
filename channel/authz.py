"""Who may send the controller's endpoint the brokers' own requests: Kafka's ``CLUSTER_ACTION`` on the cluster.

Kafka 3.9's ``KafkaApis`` serves ControlledShutdown, AlterPartition and AllocateProducerIds (and the controller's
own LeaderAndIsr, UpdateMetadata and StopReplica, which the endpoint does not take) only to a principal the
authorizer grants ``CLUSTER_ACTION`` on the ``Cluster`` resource; anyone else is answered
``CLUSTER_AUTHORIZATION_FAILED`` (31) in the response's top-level error field. Without ``authorizer.class.name``
every principal is allowed; with one, the principals of ``super.users`` are (and those ACLs grant it). The
channel takes ``super.users`` from its ``--security-config`` (:meth:`ClusterAction.from_properties`): when it is
given, only those principals may send the brokers' requests; when it is not, everyone may, as a broker without
an authorizer allows (the channel reads no ACLs).

A connection's principal is the one Kafka's ``DefaultKafkaPrincipalBuilder`` gives it, with the default
``ssl.principal.mapping.rules``:

* SASL (PLAIN, SCRAM): ``User:<name>`` (:func:`sasl_principal`);
* TLS with a client certificate: ``User:`` and the certificate's subject as Java's ``X500Principal.getName()``
  writes it (RFC 2253, most specific name first, e.g. ``User:CN=broker-1,OU=kafka,O=example``;
  :func:`tls_principal`, :func:`subject_name`);
* TLS without a client certificate, or PLAINTEXT: ``User:ANONYMOUS`` (:data:`ANONYMOUS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from channel.answers import ALLOCATE_PRODUCER_IDS, ALTER_PARTITION, CONTROLLED_SHUTDOWN
from sinks.security import SecurityConfigError

__all__ = [
    "ANONYMOUS",
    "CLUSTER_ACTION_APIS",
    "CLUSTER_AUTHORIZATION_FAILED",
    "SUPER_USERS",
    "ClusterAction",
    "parse_super_users",
    "sasl_principal",
    "subject_name",
    "tls_principal",
]

#: Kafka's ``KafkaPrincipal.ANONYMOUS``: a PLAINTEXT connection's, and a TLS one's without a client certificate
ANONYMOUS = "User:ANONYMOUS"
#: Kafka's error code for a request its principal may not send
CLUSTER_AUTHORIZATION_FAILED = 31
#: of the APIs the endpoint answers itself, those Kafka 3.9's ``KafkaApis`` authorizes with ``CLUSTER_ACTION``
CLUSTER_ACTION_APIS = frozenset({CONTROLLED_SHUTDOWN, ALTER_PARTITION, ALLOCATE_PRODUCER_IDS})
#: the property of ``--security-config`` naming the principals allowed to send them
SUPER_USERS = "super.users"


def sasl_principal(name: str) -> str:
    """The principal of a connection authenticated with SASL (PLAIN or SCRAM) as ``name``."""
    return f"User:{name}"


def parse_super_users(text: str, name: str = SUPER_USERS) -> frozenset[str]:
    """``super.users`` as Kafka's authorizers read it: principals ``Type:name`` separated by ``;``, each trimmed
    (a DN's commas belong to the name: ``User:CN=broker,O=example``). A trailing ``;`` is allowed (Java's split
    drops it); an empty entry or one without ``:`` raises :class:`SecurityConfigError` naming ``name``, and so
    does an empty list (leave the property out to allow everyone)."""
    pieces = [p.strip() for p in text.split(";")]
    while pieces and not pieces[-1]:
        pieces.pop()
    if not pieces:
        raise SecurityConfigError(name, "name at least one principal (Type:name; ...), or leave it out")
    out: set[str] = set()
    for piece in pieces:
        kind, sep, _ = piece.partition(":")
        if not sep or not kind:
            raise SecurityConfigError(name, f"expected principals as Type:name separated by ';', got {piece!r}")
        out.add(piece)
    return frozenset(out)


@dataclass(frozen=True)
class ClusterAction:
    """Who may send the brokers' requests (:data:`CLUSTER_ACTION_APIS`): ``super_users``, or anyone when ``None``
    (no ``super.users``: a Kafka broker without an authorizer)."""

    super_users: frozenset[str] | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClusterAction:
        """From the ``super.users`` of ``props`` (absent or empty: everyone)."""
        for raw_name, raw in props.items():
            if raw_name.strip() == SUPER_USERS and raw.strip():
                return cls(parse_super_users(raw.strip()))
        return cls()

    def allows(self, principal: str) -> bool:
        return self.super_users is None or principal in self.super_users

    def describe(self) -> str:
        """For the channel's start line."""
        if self.super_users is None:
            return "from any principal (no super.users, as a Kafka broker without an authorizer)"
        return "only from super.users " + ";".join(sorted(self.super_users))


# ---------------------------------------------------------------------------- a TLS client's principal


def tls_principal(certificate: bytes | None) -> str:
    """The principal of a TLS connection whose client presented ``certificate`` (DER; ``None``: none, as
    :meth:`ssl.SSLSocket.getpeercert` with ``binary_form`` says): ``User:`` and its subject
    (:func:`subject_name`), else :data:`ANONYMOUS`. ``ValueError`` when the certificate cannot be read."""
    if certificate is None:
        return ANONYMOUS
    return "User:" + subject_name(certificate)


#: the attribute types Java names in RFC 2253 form (``AVAKeyword``); any other is written as its dotted OID
_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.1": "UID",
    "0.9.2342.19200300.100.1.25": "DC",
}
#: the DER string types Java writes as text (others, and every attribute without a keyword: ``#`` and hex)
_STRING_TAGS = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1C, 0x1E})
#: what Java escapes with a backslash anywhere in a value (RFC 2253's specials, and ``=`` and ``#``)
_ESCAPED = frozenset(',=+<>#;"\\')
_SEQUENCE, _SET, _OID = 0x30, 0x31, 0x06


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """The DER element at ``pos``: (tag, start of its value, end of it)."""
    if pos + 2 > len(data):
        raise ValueError("a truncated DER element")
    tag, first = data[pos], data[pos + 1]
    if tag & 0x1F == 0x1F:
        raise ValueError("a DER tag of several bytes")
    pos += 2
    if first < 0x80:
        length = first
    else:
        n = first & 0x7F
        if not 1 <= n <= 4 or pos + n > len(data):
            raise ValueError("a DER length that cannot be read")
        length = int.from_bytes(data[pos : pos + n], "big")
        pos += n
    if pos + length > len(data):
        raise ValueError("a DER element longer than its container")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """The elements between ``start`` and ``end``: (tag, value start, value end, element start)."""
    out = []
    pos = start
    while pos < end:
        tag, vstart, vend = _tlv(data, pos)
        if vend > end:
            raise ValueError("a DER element longer than its container")
        out.append((tag, vstart, vend, pos))
        pos = vend
    return out


def _oid(value: bytes) -> str:
    if not value:
        raise ValueError("an empty OID")
    arcs: list[int] = []
    n = 0
    for b in value:
        n = (n << 7) | (b & 0x7F)
        if not b & 0x80:
            arcs.append(n)
            n = 0
    if not arcs or n:
        raise ValueError("an OID that cannot be read")
    first = arcs[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(str(a) for a in (*head, *arcs[1:]))


def _escape(text: str) -> str:
    """A value as Java's ``AVA.toRFC2253String`` writes it: specials and ``=``/``#`` after a backslash, NUL as
    ``\\00``, leading and trailing spaces (and CRs) after a backslash."""
    chars = ["\\" + c if c in _ESCAPED else "\\00" if c == "\0" else c for c in text]
    lead = 0
    while lead < len(chars) and chars[lead] in (" ", "\r"):
        lead += 1
    trail = len(chars) - 1
    while trail >= 0 and chars[trail] in (" ", "\r"):
        trail -= 1
    return "".join("\\" + c if i < lead or i > trail else c for i, c in enumerate(chars))


def subject_name(certificate: bytes) -> str:
    """The subject of an X.509 ``certificate`` (DER) as Java's ``X500Principal.getName()`` writes it, which Kafka's
    default principal builder takes whole: RFC 2253, the relative names from the last to the first, a multi-valued
    one's attributes joined by ``+`` in their order; CN, C, L, ST, STREET, O, OU, UID and DC by keyword, any other
    attribute as its dotted OID and ``#`` with the hex of its DER value (``emailAddress`` is
    ``1.2.840.113549.1.9.1=#16...``); a string value's bytes read as UTF-8, as Java does whatever the string
    type. ``ValueError`` when it is not a certificate."""
    tag, start, end = _tlv(certificate, 0)
    if tag != _SEQUENCE:
        raise ValueError("not a certificate")
    parts = _children(certificate, start, end)
    if not parts or parts[0][0] != _SEQUENCE:
        raise ValueError("not a certificate")
    _, tbs_start, tbs_end, _ = parts[0]
    fields = _children(certificate, tbs_start, tbs_end)
    if not fields:
        raise ValueError("not a certificate")
    if fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5 or fields[4][0] != _SEQUENCE:
        raise ValueError("a certificate without a subject")
    _, name_start, name_end, _ = fields[4]
    rdns: list[str] = []
    for rdn_tag, rdn_start, rdn_end, _ in _children(certificate, name_start, name_end):
        if rdn_tag != _SET:
            raise ValueError("a relative name that is not a SET")
        avas = []
        for ava_tag, ava_start, ava_end, _ in _children(certificate, rdn_start, rdn_end):
            parts = _children(certificate, ava_start, ava_end)
            if ava_tag != _SEQUENCE or len(parts) != 2 or parts[0][0] != _OID:
                raise ValueError("an attribute that is not (type, value)")
            oid = _oid(certificate[parts[0][1] : parts[0][2]])
            value_tag, value_start, value_end, element_start = parts[1]
            keyword = _KEYWORDS.get(oid)
            if keyword is None or value_tag not in _STRING_TAGS:
                avas.append(f"{keyword or oid}=#{certificate[element_start:value_end].hex()}")
            else:
                text = certificate[value_start:value_end].decode("utf-8", errors="replace")
                avas.append(f"{keyword}={_escape(text)}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))
