"""The channel's SASL settings (a Kafka broker's ``sasl.*`` names) and its server-side exchanges, checked against
kafka-python's own SASL clients (the mechanisms the channel runs toward the brokers)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Protocol

import pytest

from channel.cli import register
from channel.sasl import (
    ChannelSasl,
    PlainExchange,
    SaslFailedError,
    SaslServer,
    ScramCredential,
    ScramExchange,
    client_mechanism,
    parse_jaas,
    parse_scram_credential,
    scram_credential_of,
)
from sinks.security import SecurityConfigError

pytestmark = pytest.mark.unit

SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SALT = b"0123456789"


def test_a_jaas_login_is_read_as_kafka_writes_it() -> None:
    login = parse_jaas(
        f'{PLAIN_LOGIN} required username="admin" password="a\\"b;c" user_admin="hunter2" user_bob="hunter3";'
    )
    assert login.module == PLAIN_LOGIN
    assert (login.username, login.password) == ("admin", 'a"b;c')
    assert login.users() == {"admin": "hunter2", "bob": "hunter3"}
    assert "hunter" not in repr(login) and "b;c" not in repr(login)
    for bad in ("username=a", f"{PLAIN_LOGIN} required username"):
        with pytest.raises(SecurityConfigError) as e:
            parse_jaas(bad, "listener.name.x.plain.sasl.jaas.config")
        assert e.value.key == "listener.name.x.plain.sasl.jaas.config"


def test_the_settings_take_a_brokers_property_names() -> None:
    sasl = ChannelSasl.from_properties(
        {
            "sasl.mechanism.inter.broker.protocol": "scram-sha-512",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512, PLAIN",
            "listener.name.INTERNAL.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.control_plane.scram-sha-512.sasl.jaas.config": f'{SCRAM_LOGIN} required username="livectl" '
            'password="hunter2";',
            "sasl.jaas.config": f'{PLAIN_LOGIN} required user_op="hunter3";',
        }
    )
    assert sasl.client_config("CONTROL_PLANE") == {
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "livectl",
        "sasl_plain_password": "hunter2",
    }
    assert sasl.server_mechanisms("CONTROL_PLANE") == ("SCRAM-SHA-512", "PLAIN")
    assert sasl.server_mechanisms("INTERNAL") == ("PLAIN",)
    assert sasl.server("INTERNAL", lambda u, m: None).users == {"op": "hunter3"}
    assert "hunter" not in repr(sasl) and "hunter" not in repr(sasl.server("INTERNAL", lambda u, m: None))
    # a listener with no login of its own and no unprefixed one: the client side cannot authenticate
    with pytest.raises(SecurityConfigError) as e:
        sasl.client_config("INTERNAL")
    assert e.value.key == "listener.name.internal.scram-sha-512.sasl.jaas.config"


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"sasl.mechanism.inter.broker.protocol": "GSSAPI"}, "sasl.mechanism.inter.broker.protocol"),
        ({"sasl.mechanism.inter.broker.protocol": "PLAIN,SCRAM-SHA-512"}, "sasl.mechanism.inter.broker.protocol"),
        ({"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"}, "sasl.enabled.mechanisms"),
        ({"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name"),
        ({"listener.name.x.gssapi.sasl.jaas.config": "a required;"}, "listener.name.x.gssapi.sasl.jaas.config"),
    ],
)
def test_what_the_channel_does_not_speak_is_refused_by_name(props: dict[str, str], key: str) -> None:
    with pytest.raises(SecurityConfigError) as e:
        ChannelSasl.from_properties(props)
    assert e.value.key == key


def test_the_endpoint_needs_mechanisms_and_plains_users() -> None:
    with pytest.raises(SecurityConfigError) as e:
        ChannelSasl().server("INTERNAL", lambda u, m: None)
    assert e.value.key == "sasl.enabled.mechanisms"
    with pytest.raises(SecurityConfigError) as e:
        ChannelSasl(enabled=("PLAIN",)).server("INTERNAL", lambda u, m: None)
    assert e.value.key == "listener.name.internal.plain.sasl.jaas.config" and "user_<name>" in e.value.reason
    with pytest.raises(SecurityConfigError) as e:
        ChannelSasl().client_config("CONTROL_PLANE")
    assert e.value.key == "sasl.mechanism.inter.broker.protocol"


class SaslClient(Protocol):
    """What these tests use of kafka-python's client SASL mechanism (:func:`channel.sasl.client_mechanism`)."""

    def auth_bytes(self) -> bytes: ...
    def receive(self, auth_bytes: bytes) -> None: ...
    def is_done(self) -> bool: ...
    def is_authenticated(self) -> bool: ...


def _run(client: SaslClient, server: PlainExchange | ScramExchange) -> bytes:
    """kafka-python's client mechanism against a server exchange, as SaslAuthenticate carries them."""
    last = b""
    while not client.is_done():
        last = server.step(client.auth_bytes())
        client.receive(last)
    assert client.is_authenticated()
    return last


def _client(mechanism: str, user: str, password: str) -> SaslClient:
    client: SaslClient = client_mechanism(
        {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    )
    return client


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_takes_the_right_password_and_refuses_the_rest(mechanism: str) -> None:
    stored = parse_scram_credential(scram_credential_of(mechanism, "alice-secret", SALT))

    def credentials(user: str, m: str) -> ScramCredential | None:
        return stored if (user, m) == ("alice", mechanism) else None

    server = ScramExchange(mechanism, credentials)
    final = _run(_client(mechanism, "alice", "alice-secret"), server)
    assert final.startswith(b"v=") and server.done and server.principal == "alice"
    for user, password in (("alice", "wrong"), ("bob", "alice-secret")):
        client = _client(mechanism, user, password)
        with pytest.raises(SaslFailedError, match="invalid credentials"):
            _run(client, ScramExchange(mechanism, credentials))
    # a replayed or forged final message: the nonce is the server's own each time
    first = ScramExchange(mechanism, credentials)
    first.step(b"n,,n=alice,r=abc")
    with pytest.raises(SaslFailedError, match="nonce"):
        first.step(b"c=biws,r=abcXYZ,p=AAAA")


def test_a_scram_credential_is_read_as_kafka_stores_it() -> None:
    text = scram_credential_of("SCRAM-SHA-512", "x", SALT, 8192)
    c = parse_scram_credential(text)
    assert (c.salt, c.iterations, len(c.stored_key), len(c.server_key)) == (SALT, 8192, 64, 64)
    with pytest.raises(ValueError, match="not a SCRAM credential"):
        parse_scram_credential("salt=AA==,iterations=4096")
    low = parse_scram_credential(scram_credential_of("SCRAM-SHA-256", "x", SALT, 1000))
    with pytest.raises(SaslFailedError, match="minimum"):
        ScramExchange("SCRAM-SHA-256", lambda u, m: low).step(b"n,,n=x,r=abc")


def test_plain_checks_the_users_password_and_authorization_id() -> None:
    server = SaslServer("INTERNAL", ("PLAIN",), {"bob": "bob-secret"})
    exchange = server.start("PLAIN")
    assert isinstance(exchange, PlainExchange)
    assert _run(_client("PLAIN", "bob", "bob-secret"), exchange) == b""
    assert exchange.principal == "bob"
    assert server.start("SCRAM-SHA-512") is None
    for token, match in (
        (b"\0bob\0wrong", "Invalid username or password"),
        (b"\0nobody\0bob-secret", "Invalid username or password"),
        (b"alice\0bob\0bob-secret", "authorization id"),
        (b"bob\0bob-secret", "3 tokens"),
    ):
        with pytest.raises(SaslFailedError, match=match):
            PlainExchange({"bob": "bob-secret"}).step(token)


def test_the_command_refuses_unusable_sasl_options_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser(prog="livectl")
    register(parser.add_subparsers())
    config = tmp_path / "security.properties"
    config.write_text("sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n")
    args = parser.parse_args(["channel", "--security-config", str(config)])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert "listener.name.control_plane.scram-sha-512.sasl.jaas.config" in err and err.count("\n") == 1
    # a SASL listener of the endpoint without enabled mechanisms
    config.write_text("")
    args = parser.parse_args(
        ["channel", "--security-config", str(config), "--listener-security-protocol-map", "INTERNAL:SASL_PLAINTEXT"]
    )
    assert args.func(args) == 2
    assert "SASL: sasl.enabled.mechanisms: needed for the SASL listener INTERNAL" in capsys.readouterr().err
