"""A real Apache Kafka broker (one KRaft node, :mod:`livectl.kafka_server`) that enforces security: users,
certificates and ACLs made by the test.

Listeners (all on 127.0.0.1): ``SASL_SSL`` (SCRAM-SHA-512 over TLS; the first, the service's
``bootstrap``), ``SSL`` (mutual TLS: a client certificate is required and is the identity) and KRaft's
``CONTROLLER`` (mutual TLS too, with the broker's own certificate). The inter-broker listener is ``SSL``.
A certificate ``CN=name`` and the SCRAM user ``name`` are one principal, ``User:name``
(:data:`kafka_pki.PRINCIPAL_MAPPING_RULES`). The authorizer is KRaft's ``StandardAuthorizer`` with
``allow.everyone.if.no.acl.found=false``: until ACLs are added, only the super users — the broker itself
(``User:kafka-broker``) and the bootstrap admin (``User:admin``, a SCRAM user) — may do anything.

SCRAM users are written into the metadata log when the log directory is formatted (``StorageTool
format --add-scram``); :func:`add_scram_user` adds one later through the Admin API, as an operator would.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_pki import BROKER_CN, PRINCIPAL_MAPPING_RULES, Pki, broker_stores, make_pki

from livectl.kafka_server import KafkaSettings, Listener, ScramCredential, start_kafka
from livectl.spawn import Service
from sinks.security import KafkaSecurity

#: the principals of the tests on a secure broker: a SCRAM user and a certificate each (CN=name), one identity
CONTROLLER, BROKER, ADMIN, OUTSIDER = "controller", "broker-1", "alice", "mallory"
MECHANISM = "SCRAM-SHA-512"
SUPER_ADMIN = "admin"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"

#: batch ids for the tests that write livectl's topics on the session's secure broker: one counter for all of
#: them, above any earlier session's, so no test finds a later batch (another test's) on a tail it replays
BATCH_IDS = itertools.count(int(time.time()) * 100)


@dataclass(frozen=True)
class SecureKafka:
    service: Service
    pki: Pki
    #: SCRAM user -> password
    passwords: Mapping[str, str]
    folder: Path

    @property
    def sasl_bootstrap(self) -> str:
        return self.service.listeners["SASL_SSL"]

    @property
    def ssl_bootstrap(self) -> str:
        return self.service.listeners["SSL"]

    def sasl_properties(self, user: str, password: str | None = None) -> dict[str, str]:
        """Kafka client properties of SCRAM user ``user`` over ``SASL_SSL`` (its password unless given)."""
        secret = self.passwords[user] if password is None else password
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": f'{SCRAM_LOGIN} required username="{user}" password="{secret}";',
            "ssl.truststore.location": str(self.pki.ca),
        }

    def ssl_properties(self, name: str) -> dict[str, str]:
        """Kafka client properties of the certificate ``CN=name`` over ``SSL`` (mutual TLS)."""
        cert = self.pki.client(name)
        props = {
            "security.protocol": "SSL",
            "ssl.truststore.location": str(self.pki.ca),
            "ssl.keystore.location": str(cert.cert),
            "ssl.key.location": str(cert.key),
        }
        if cert.key_password is not None:
            props["ssl.key.password"] = cert.key_password
        return props

    def bootstrap_for(self, props: Mapping[str, str]) -> str:
        return self.sasl_bootstrap if props["security.protocol"] == "SASL_SSL" else self.ssl_bootstrap

    def client_kwargs(self, props: Mapping[str, str]) -> dict[str, Any]:
        """kafka-python keyword arguments of ``props``, through livectl's own mapping (no bootstrap)."""
        return KafkaSecurity.from_properties(props).client_kwargs()

    def command_config(self, name: str, props: Mapping[str, str]) -> Path:
        """``props`` as a Kafka tool's ``--command-config`` file (``<folder>/<name>.properties``)."""
        path = self.folder / f"{name}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        path.chmod(0o600)
        return path

    def admin_kwargs(self) -> dict[str, Any]:
        """The bootstrap super user's kafka-python keyword arguments (no bootstrap: :attr:`sasl_bootstrap`)."""
        return self.client_kwargs(self.sasl_properties(SUPER_ADMIN))


def broker_settings(pki: Pki, passwords: Mapping[str, str]) -> KafkaSettings:
    """The broker's listeners, TLS, SASL and authorizer settings (see the module docstring)."""
    properties = {
        **broker_stores(pki),
        # the KRaft controller listener is mutual TLS as well: the broker's own certificate is its identity there
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "SSL",
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.controller.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": PRINCIPAL_MAPPING_RULES,
        "sasl.enabled.mechanisms": MECHANISM,
        f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{BROKER_CN};User:{SUPER_ADMIN}",
        "allow.everyone.if.no.acl.found": "false",
    }
    return KafkaSettings(
        listeners=(Listener("SASL_SSL"), Listener("SSL")),
        properties=properties,
        scram=tuple(ScramCredential(user, password, MECHANISM) for user, password in passwords.items()),
    )


def start_secure_kafka(
    folder: Path, users: Mapping[str, str], cert_names: tuple[str, ...], encrypted_keys: tuple[str, ...] = ()
) -> SecureKafka:
    """Certificates for ``cert_names``, the SCRAM ``users`` (name -> password) plus the bootstrap admin,
    and the broker started with them in ``folder``."""
    pki = make_pki(folder / "pki", cert_names, encrypted_keys=encrypted_keys)
    passwords = {SUPER_ADMIN: "admin-secret-0", **users}
    service = start_kafka(folder / "kafka", settings=broker_settings(pki, passwords))
    return SecureKafka(service, pki, passwords, folder)


def add_scram_user(kafka: SecureKafka, user: str, password: str) -> SecureKafka:
    """Add (or change) SCRAM user ``user`` through the Admin API as the bootstrap admin; the returned
    record knows its password."""
    from kafka import KafkaAdminClient
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

    admin = KafkaAdminClient(**kafka.admin_kwargs(), bootstrap_servers=kafka.sasl_bootstrap)
    try:
        errors = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, ScramMechanism.SCRAM_SHA_512, password)]
        )
    finally:
        admin.close()
    if errors.get(user):
        raise RuntimeError(f"adding SCRAM user {user} failed: {errors[user]}")
    return SecureKafka(kafka.service, kafka.pki, {**kafka.passwords, user: password}, kafka.folder)
