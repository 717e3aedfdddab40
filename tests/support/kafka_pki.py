"""Certificates made by the tests for a TLS Kafka broker and its clients (the ``cryptography`` package
signs; the JDK's ``keytool`` writes the broker's truststore).

:func:`make_pki` makes, in one folder: a CA (``ca.pem``); the broker's key and certificate for
``127.0.0.1`` / ``localhost`` in a PKCS12 keystore (``broker.p12``) and the CA in a PKCS12 truststore
(``truststore.p12``), as a Kafka broker takes them; and for each client name a certificate whose subject is
``CN=<name>`` (``<name>.pem``), its PKCS#8 key (``<name>.key``, encrypted with :attr:`Pki.key_password`
when asked) and both in one file (``<name>-bundle.pem``). The broker maps a certificate's ``CN`` to the
principal ``User:<name>`` (:data:`PRINCIPAL_MAPPING_RULES`), the same principal as a SCRAM user of that
name: a client has one identity over both listeners. For each server name (``servers``) the same PEM files,
the certificate also a server's for ``127.0.0.1`` / ``localhost`` (``livectl channel``'s endpoint, which is a
TLS server to the brokers and a TLS client of theirs with one certificate, as a broker is).
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from livectl.kafka_zk_brokers import LISTENERS

#: Kafka's ``ssl.principal.mapping.rules``: ``CN=name,...`` -> ``User:name``
PRINCIPAL_MAPPING_RULES = "RULE:^CN=([^,]+)(,.*)?$/$1/,DEFAULT"
BROKER_CN = "kafka-broker"
_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class ClientCert:
    """One client's PEM files, as kafka-python takes them (``ssl_certfile``, ``ssl_keyfile``)."""

    name: str
    cert: Path
    key: Path
    #: key and certificate in one file: ``ssl.keystore.location`` alone (a Java client's PEM keystore too)
    bundle: Path
    key_password: str | None


@dataclass(frozen=True)
class Pki:
    folder: Path
    ca: Path
    keystore: Path
    truststore: Path
    #: the password of both PKCS12 stores and of the broker's key
    store_password: str
    clients: dict[str, ClientCert]
    #: server name -> its PEM files (a certificate for 127.0.0.1 / localhost, server and client auth)
    servers: dict[str, ClientCert] = field(default_factory=dict)

    def client(self, name: str) -> ClientCert:
        return self.clients[name]

    def server(self, name: str) -> ClientCert:
        return self.servers[name]


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    usages: Iterable[x509.ObjectIdentifier] = (),
    sans: Iterable[x509.GeneralName] = (),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer if issuer is not None else (_name(subject), key)
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + 30 * _DAY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        usage = {"key_cert_sign": True, "crl_sign": True, "digital_signature": False}
    else:
        usage = {"key_cert_sign": False, "crl_sign": False, "digital_signature": True}
    b = b.add_extension(
        x509.KeyUsage(
            content_commitment=False,
            key_encipherment=False,
            data_encipherment=False,
            key_agreement=not ca,
            encipher_only=False,
            decipher_only=False,
            **usage,
        ),
        critical=True,
    )
    usages = list(usages)
    if usages:
        b = b.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    sans = list(sans)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _keytool() -> str:
    found = shutil.which("keytool")
    if found is None:
        java = shutil.which("java")
        candidate = Path(java).resolve().parent / "keytool" if java else None
        if candidate is None or not candidate.exists():
            raise RuntimeError("keytool (the JDK's) is not on PATH")
        found = str(candidate)
    return found


_LOOPBACK = (x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")))


def make_pki(
    folder: Path,
    clients: Iterable[str],
    *,
    encrypted_keys: Iterable[str] = (),
    store_password: str = "changeit-pki",
    servers: Iterable[str] = (),
) -> Pki:
    """A CA, the broker's PKCS12 stores and a PEM certificate per client and per server name, in ``folder``
    (see the module docstring). The keys of ``encrypted_keys`` are encrypted with ``store_password``."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _cert("livectl-test-ca", ca_key, None, ca=True)
    ca = folder / "ca.pem"
    ca.write_bytes(_pem(ca_cert))
    issuer = (ca_cert.subject, ca_key)

    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker_cert = _cert(
        BROKER_CN,
        broker_key,
        issuer,
        # the broker is a TLS client too: of its own KRaft controller listener (mutual TLS)
        usages=(ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH),
        sans=_LOOPBACK,
    )
    keystore = folder / "broker.p12"
    keystore.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"broker",
            broker_key,
            broker_cert,
            [ca_cert],
            serialization.BestAvailableEncryption(store_password.encode()),
        )
    )
    truststore = folder / "truststore.p12"
    # keytool marks the entry as trusted for Java (a PKCS12 certificate bag alone is not a trust anchor)
    keytool = [_keytool(), "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca), "-storetype", "PKCS12"]
    subprocess.run(
        [*keytool, "-keystore", str(truststore), "-storepass", store_password],
        check=True,
        capture_output=True,
    )

    encrypted = set(encrypted_keys)
    server_names = list(servers)
    made: dict[str, ClientCert] = {}
    for name in [*clients, *server_names]:
        key = ec.generate_private_key(ec.SECP256R1())
        if name in server_names:
            both = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)
            cert = _cert(name, key, issuer, usages=both, sans=_LOOPBACK)
        else:
            cert = _cert(name, key, issuer, usages=(ExtendedKeyUsageOID.CLIENT_AUTH,))
        password = store_password if name in encrypted else None
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password is not None
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        paths = (folder / f"{name}.pem", folder / f"{name}.key", folder / f"{name}-bundle.pem")
        paths[0].write_bytes(_pem(cert))
        paths[1].write_bytes(key_pem)
        paths[2].write_bytes(key_pem + _pem(cert))
        for p in paths[1:]:
            p.chmod(0o600)
        made[name] = ClientCert(name, *paths, key_password=password)
    out = {n: c for n, c in made.items() if n not in server_names}
    return Pki(folder, ca, keystore, truststore, store_password, out, {n: made[n] for n in server_names})


def zk_broker_ssl_properties(pki: Pki, secured: Iterable[str] = ("INTERNAL", "CONTROL_PLANE")) -> dict[str, str]:
    """Server properties of a ZooKeeper-mode broker (:mod:`livectl.kafka_zk_brokers`) whose listeners ``secured``
    speak SSL with this PKI's stores and require a client certificate (``ssl.client.auth=required``); the
    others stay PLAINTEXT. The broker presents its keystore's certificate as a client too (to the other
    brokers and to its controller)."""
    ssl_names = set(secured)
    return {
        "listener.security.protocol.map": ",".join(
            f"{name}:{'SSL' if name in ssl_names else 'PLAINTEXT'}" for name in LISTENERS
        ),
        **broker_stores(pki),
        "ssl.client.auth": "required",
    }


def broker_stores(pki: Pki) -> dict[str, str]:
    """A broker's keystore (its own certificate, :data:`BROKER_CN`) and truststore (the test CA), as Kafka's
    ``ssl.*`` properties."""
    return {
        "ssl.keystore.location": str(pki.keystore),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.password": pki.store_password,
        "ssl.key.password": pki.store_password,
        "ssl.truststore.location": str(pki.truststore),
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.password": pki.store_password,
    }
