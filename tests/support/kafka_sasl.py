"""SASL for the tests' ZooKeeper-mode Kafka brokers (:mod:`livectl.kafka_zk_brokers`) and their clients, as a
Kafka operator writes it: SCRAM users made in the cluster's ZooKeeper by Kafka's own ``kafka-configs
--zookeeper`` (the jars ``scripts/setup`` resolved), JAAS logins per listener and mechanism
(``listener.name.<listener>.<mechanism>.sasl.jaas.config``), and the properties of a Java client
(``--command-config``) or of ``livectl channel`` (``--security-config``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kafka_pki import Pki, broker_stores

from livectl.kafka_server import kafka_classpath
from livectl.kafka_zk_brokers import LISTENERS
from livectl.spawn import find_java

SCRAM, PLAIN = "SCRAM-SHA-512", "PLAIN"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def jaas(module: str, **options: str) -> str:
    """One JAAS login: ``<module> required k="v" ...;``."""
    return f"{module} required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


def make_scram_users(connect: str, passwords: Mapping[str, str], mechanism: str = SCRAM) -> None:
    """Kafka's own ``kafka-configs --zookeeper CONNECT --alter --entity-type users --entity-name USER
    --add-config MECHANISM=[iterations=4096,password=...]`` for each user (side by side: a JVM each)."""

    def make(user: str) -> None:
        cmd = [find_java(), "-Xmx128m", "-cp", kafka_classpath(), "kafka.admin.ConfigCommand", "--zookeeper", connect]
        cmd += ["--alter", "--entity-type", "users", "--entity-name", user]
        cmd += ["--add-config", f"{mechanism}=[iterations=4096,password={passwords[user]}]"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
        if done.returncode != 0:
            raise RuntimeError(
                f"kafka-configs for SCRAM user {user} exited {done.returncode}: {done.stderr}{done.stdout}"
            )

    with ThreadPoolExecutor(max(1, len(passwords))) as pool:
        list(pool.map(make, passwords))


def zk_broker_sasl_properties(
    protocols: Mapping[str, str],
    user: str,
    password: str,
    *,
    pki: Pki | None = None,
    plain_users: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Server properties of a ZooKeeper-mode broker whose listeners ``protocols`` (name -> ``SASL_PLAINTEXT`` or
    ``SASL_SSL``) speak SASL with SCRAM-SHA-512 (also ``sasl.mechanism.inter.broker.protocol``), the broker
    logging in as SCRAM user ``user`` on each of them (to the other brokers and to its controller); its other
    listeners stay PLAINTEXT. ``pki``: the broker's stores, needed for a ``SASL_SSL`` listener.
    ``plain_users``: PLAIN enabled too, these users (name -> password) in each listener's PLAIN login."""
    unknown = set(protocols) - set(LISTENERS)
    if unknown:
        raise ValueError(f"protocols: no such listener {sorted(unknown)}; the brokers have {LISTENERS}")
    if "SASL_SSL" in protocols.values() and pki is None:
        raise ValueError("a SASL_SSL listener needs the broker's stores: give pki")
    props = {
        "listener.security.protocol.map": ",".join(f"{name}:{protocols.get(name, 'PLAINTEXT')}" for name in LISTENERS),
        **(broker_stores(pki) if pki is not None else {}),
        "sasl.mechanism.inter.broker.protocol": SCRAM,
        "sasl.enabled.mechanisms": SCRAM if plain_users is None else f"{SCRAM},{PLAIN}",
    }
    for name in protocols:
        prefix = f"listener.name.{name.lower()}"
        props[f"{prefix}.{SCRAM.lower()}.sasl.jaas.config"] = jaas(SCRAM_LOGIN, username=user, password=password)
        if plain_users is not None:
            users = {f"user_{u}": p for u, p in plain_users.items()}
            props[f"{prefix}.{PLAIN.lower()}.sasl.jaas.config"] = jaas(PLAIN_LOGIN, **users)
    return props


def client_sasl_properties(
    protocol: str, user: str, password: str, *, mechanism: str = SCRAM, ca: Path | None = None
) -> dict[str, str]:
    """A Java Kafka client's properties (a tool's ``--command-config``) logging in as ``user`` over
    ``protocol`` (``SASL_PLAINTEXT``, or ``SASL_SSL`` trusting the PEM CA ``ca``)."""
    props = {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": jaas(PLAIN_LOGIN if mechanism == PLAIN else SCRAM_LOGIN, username=user, password=password),
    }
    if protocol == "SASL_SSL":
        if ca is None:
            raise ValueError("a SASL_SSL client needs the CA: give ca")
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca)}
    return props
