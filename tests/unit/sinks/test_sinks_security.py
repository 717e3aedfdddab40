"""Security settings without a server: Kafka's default ZooKeeper ACLs per path, the credentials the settings
demand (digest and SASL), and a Kafka tool's ``--command-config`` properties mapped to the Kafka client."""

from __future__ import annotations

import pytest
from kazoo.security import Permissions

from sinks.security import ZkSecurity, default_acls
from streaming.settings import Settings, SettingsError

SECRET = "livectl:s3cret"

pytestmark = pytest.mark.unit


def test_sensitive_paths_are_not_world_readable_and_open_without_acls() -> None:
    secure = {(a.id.scheme, a.perms) for a in default_acls(True, "/config/users/alice")}
    assert secure == {("auth", Permissions.ALL)}
    assert ("world", Permissions.READ) in {(a.id.scheme, a.perms) for a in default_acls(True, "/brokers/topics/t")}
    assert {(a.id.scheme, a.perms) for a in default_acls(True, "/consumers")} == {("world", Permissions.ALL)}
    assert ZkSecurity().acl_for("/brokers/topics/t") is None


def test_acls_without_a_credential_are_refused_by_the_settings() -> None:
    with pytest.raises(SettingsError) as e:
        Settings(zookeeper_set_acl=True)
    assert e.value.key == "zookeeper_set_acl"
    with pytest.raises(SettingsError) as e:
        Settings(zookeeper_auth="digest:nopassword")
    assert e.value.key == "zookeeper_auth" and "nopassword" not in str(e.value)
    assert "s3cret" not in repr(Settings(zookeeper_auth=f"digest:{SECRET}"))


def test_sasl_settings_are_checked() -> None:
    with pytest.raises(SettingsError) as e:
        Settings(zookeeper_auth="sasl:nopassword")
    assert e.value.key == "zookeeper_auth" and "sasl:USER:PASSWORD" in str(e.value)
    with pytest.raises(SettingsError) as e:
        Settings(zookeeper_auth="kerberos:a:b")
    assert e.value.key == "zookeeper_auth" and "digest, sasl" in str(e.value)
    kwargs = ZkSecurity.parse("sasl:livectl:pw").client_kwargs()
    assert kwargs == {"sasl_options": {"mechanism": "DIGEST-MD5", "username": "livectl", "password": "pw"}}


def test_kafka_security_properties_map_to_kafka_python() -> None:
    from sinks.security import KafkaSecurity, SecurityConfigError

    text = """# like a Kafka tool's --command-config
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="ctl" password="p=w";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/livectl/ca.pem
ssl.endpoint.identification.algorithm=
"""
    sec = KafkaSecurity.from_file_text(text)
    assert sec.client_kwargs() == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "ctl",
        "sasl_plain_password": "p=w",
        "ssl_cafile": "/etc/livectl/ca.pem",
    }
    assert "p=w" not in repr(sec)
    # mutual TLS as Java's clients take it too: a PEM keystore holding key and certificate
    tls = KafkaSecurity.from_properties(
        {"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/etc/livectl/ctl-bundle.pem"}
    )
    assert tls.client_kwargs() == {"security_protocol": "SSL", "ssl_certfile": "/etc/livectl/ctl-bundle.pem"}
    for bad, key in (
        ("security.protocol=SASL_PLAIN\n", "security.protocol"),
        ("security.protocol=SASL_SSL\n", "sasl.mechanism"),
        ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "sasl.jaas.config"),
        ("ssl.truststore.type=JKS\n", "ssl.truststore.type"),
        ("ssl.keystore.type=PKCS12\n", "ssl.keystore.type"),
        ("bootstrap.servers=x\n", "bootstrap.servers"),
        ("no equals sign\n", "command config line 1"),
    ):
        with pytest.raises(SecurityConfigError) as e:
            KafkaSecurity.from_file_text(bad).client_kwargs()
        assert e.value.key == key
