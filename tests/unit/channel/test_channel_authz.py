"""Who may send the controller's endpoint the brokers' own requests (:mod:`channel.authz`): Kafka's principals of
a connection, ``super.users`` as a broker reads it, and the answer of a refused request (the endpoint refusing
a real client's requests while a real broker's pass: tests/integration/channel/test_channel_tls.py).

The expected subjects were written by Java 17's ``X500Principal.getName()`` (what Kafka's default principal
builder takes) for certificates made as here."""

from __future__ import annotations

import argparse
import datetime
import io
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kio.serial import entity_reader, entity_writer

from channel.answers import ALLOCATE_PRODUCER_IDS, ALTER_PARTITION, CONTROLLED_SHUTDOWN, error_response
from channel.authz import (
    ANONYMOUS,
    CLUSTER_ACTION_APIS,
    CLUSTER_AUTHORIZATION_FAILED,
    ClusterAction,
    parse_super_users,
    sasl_principal,
    subject_name,
    tls_principal,
)
from channel.cli import register
from sinks.security import SecurityConfigError

pytestmark = pytest.mark.unit

A = x509.NameAttribute


def _certificate(subject: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(x509.Name([A(NameOID.COMMON_NAME, "livectl-test-ca")]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


SUBJECTS = [
    pytest.param(
        x509.Name([A(NameOID.COMMON_NAME, "kafka-broker")]),
        "CN=kafka-broker",
        id="cn-alone",
    ),
    pytest.param(
        x509.Name(
            [
                A(NameOID.COUNTRY_NAME, "US"),
                A(NameOID.ORGANIZATION_NAME, "Acme"),
                A(NameOID.ORGANIZATIONAL_UNIT_NAME, "Kafka"),
                A(NameOID.COMMON_NAME, "broker-1"),
            ]
        ),
        "CN=broker-1,OU=Kafka,O=Acme,C=US",
        id="most-specific-first",
    ),
    pytest.param(
        x509.Name(
            [
                A(NameOID.ORGANIZATION_NAME, "#lead"),
                A(NameOID.ORGANIZATIONAL_UNIT_NAME, " spaced  "),
                A(NameOID.LOCALITY_NAME, 'q"uo\\te<>;'),
                A(NameOID.COMMON_NAME, "a,b+c=d_e@f#g"),
            ]
        ),
        'CN=a\\,b\\+c\\=d_e@f\\#g,L=q\\"uo\\\\te\\<\\>\\;,OU=\\ spaced\\ \\ ,O=\\#lead',
        id="escaped",
    ),
    pytest.param(
        x509.Name(
            [
                A(NameOID.DOMAIN_COMPONENT, "example"),
                A(NameOID.DOMAIN_COMPONENT, "com"),
                A(NameOID.USER_ID, "u1"),
                A(NameOID.EMAIL_ADDRESS, "ops@example.com"),
                A(NameOID.SERIAL_NUMBER, "42"),
                A(NameOID.STATE_OR_PROVINCE_NAME, "Zoë Land"),
                A(NameOID.STREET_ADDRESS, "1 Main St"),
                A(NameOID.TITLE, "boss"),
                A(NameOID.COMMON_NAME, "Zoë"),
            ]
        ),
        "CN=Zoë,2.5.4.12=#0c04626f7373,STREET=1 Main St,ST=Zoë Land,2.5.4.5=#13023432,"
        "1.2.840.113549.1.9.1=#160f6f7073406578616d706c652e636f6d,UID=u1,DC=com,DC=example",
        id="keywords-and-oids",
    ),
    pytest.param(
        x509.Name(
            [
                x509.RelativeDistinguishedName([A(NameOID.COMMON_NAME, "x"), A(NameOID.USER_ID, "y")]),
                x509.RelativeDistinguishedName([A(NameOID.ORGANIZATION_NAME, "o")]),
            ]
        ),
        "O=o,CN=x+UID=y",
        id="multi-valued",
    ),
    pytest.param(
        x509.Name([A(NameOID.COMMON_NAME, "nul\x00x")]),
        "CN=nul\\00x",
        id="nul",
    ),
]


@pytest.mark.parametrize(("subject", "expected"), SUBJECTS)
def test_a_tls_clients_principal_is_its_subject_as_java_writes_it(subject: x509.Name, expected: str) -> None:
    certificate = _certificate(subject)
    assert subject_name(certificate) == expected
    assert tls_principal(certificate) == "User:" + expected


def test_the_other_principals_are_kafkas() -> None:
    assert tls_principal(None) == ANONYMOUS == "User:ANONYMOUS"  # no client certificate
    assert sasl_principal("broker") == "User:broker"
    for bad in (b"", b"\x30\x00", b"\x30\x03\x02\x01\x01", b"\x04\x02ab", b"\x30\x85\x00\x00\x00\x00\x01"):
        with pytest.raises(ValueError):
            subject_name(bad)


def test_super_users_are_read_as_a_brokers() -> None:
    assert parse_super_users("User:broker;User:admin") == {"User:broker", "User:admin"}
    # a DN's commas belong to the principal; entries are trimmed; a trailing ';' is dropped, as Java's split does
    assert parse_super_users(" User:CN=broker-1,OU=Kafka,O=Acme ; User:ANONYMOUS ;") == {
        "User:CN=broker-1,OU=Kafka,O=Acme",
        "User:ANONYMOUS",
    }
    for bad in ("broker", "User:a;;User:b", ":x", ";", "User:a; nobody"):
        with pytest.raises(SecurityConfigError, match=r"super\.users"):
            parse_super_users(bad)


def test_without_super_users_anyone_may_send_the_brokers_requests() -> None:
    anyone = ClusterAction.from_properties({})
    assert anyone == ClusterAction() and anyone.super_users is None
    assert anyone.allows(ANONYMOUS) and anyone.allows("User:whoever")
    assert ClusterAction.from_properties({"super.users": "  "}) == anyone  # an empty value is unset, as elsewhere
    only = ClusterAction.from_properties({" super.users ": "User:broker;User:CN=kafka-broker"})
    assert only.allows("User:broker") and only.allows("User:CN=kafka-broker")
    # Kafka's principals compare by type and name, case and all
    for other in ("User:admin", "user:broker", "User:Broker", "User:CN=kafka-broker,O=x", ANONYMOUS):
        assert not only.allows(other)
    assert "super.users User:CN=kafka-broker;User:broker" in only.describe()
    assert "any principal" in anyone.describe()


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (CONTROLLED_SHUTDOWN, 0),
        (CONTROLLED_SHUTDOWN, 3),
        (ALTER_PARTITION, 0),
        (ALTER_PARTITION, 3),
        (ALLOCATE_PRODUCER_IDS, 0),
    ],
)
def test_a_refused_request_is_answered_in_its_own_shape(api_key: int, version: int) -> None:
    assert api_key in CLUSTER_ACTION_APIS
    response = error_response(api_key, version, CLUSTER_AUTHORIZATION_FAILED)
    buf = io.BytesIO()
    entity_writer(type(response))(buf, response)
    decoded, _ = entity_reader(type(response))(buf.getvalue(), 0)
    assert int(decoded.error_code.value) == 31
    assert not getattr(decoded, "remaining_partitions", ()) and not getattr(decoded, "topics", ())
    if api_key == ALLOCATE_PRODUCER_IDS:
        assert (decoded.producer_id_start, decoded.producer_id_len) == (0, 0)


def test_the_command_refuses_a_bad_super_users_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser(prog="livectl")
    register(parser.add_subparsers())
    config = tmp_path / "security.properties"
    config.write_text("super.users=User:broker;admin\n")
    args = parser.parse_args(["channel", "--security-config", str(config)])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--security-config" in err and "super.users" in err and "'admin'" in err
