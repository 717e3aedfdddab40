"""The channel's TLS settings as a Kafka broker's ``ssl.*`` properties, its listener security map, and the
options of ``livectl channel`` that carry them (TLS against a real broker:
tests/integration/channel/test_channel_tls.py)."""

from __future__ import annotations

import argparse
import ssl
from pathlib import Path

import pytest

from channel.cli import register
from channel.tls import ChannelTls, parse_protocol_map, protocol_of
from sinks.security import SecurityConfigError

pytestmark = pytest.mark.unit


def test_kafka_property_names_make_the_settings() -> None:
    text = """
# a broker's ssl.* (PEM)
ssl.truststore.location=/etc/kafka/ca.pem
ssl.keystore.type=PEM
ssl.keystore.location = /etc/kafka/controller.pem
ssl.key.location=/etc/kafka/controller.key
ssl.key.password=s3cret
ssl.client.auth=REQUIRED
! another comment
"""
    tls = ChannelTls.from_file_text(text)
    assert tls == ChannelTls(
        cafile="/etc/kafka/ca.pem",
        certfile="/etc/kafka/controller.pem",
        keyfile="/etc/kafka/controller.key",
        key_password="s3cret",
        client_auth="required",
    )
    assert "s3cret" not in repr(tls)
    assert ChannelTls.from_properties(
        {"ssl.ca.location": "/ca.pem", "ssl.certificate.location": "/c.pem"}
    ) == ChannelTls(cafile="/ca.pem", certfile="/c.pem")
    # Kafka's default checks the host; empty turns it off, as in Kafka
    assert ChannelTls().identification == "https"
    assert ChannelTls.from_properties({"ssl.endpoint.identification.algorithm": ""}).identification == ""
    assert not ChannelTls(identification="").client_context().check_hostname
    assert ChannelTls().client_context().verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
        ({"ssl.endpoint.identification.algorithm": "dns"}, "ssl.endpoint.identification.algorithm"),
        ({"ssl.key.location": "/k.pem"}, "ssl.key.location"),
        ({"sasl.mechanism": "PLAIN"}, "sasl.mechanism"),
    ],
)
def test_a_bad_property_is_named(props: dict[str, str], key: str) -> None:
    with pytest.raises(SecurityConfigError) as e:
        ChannelTls.from_properties(props)
    assert e.value.key == key


def test_a_line_that_is_not_a_property_is_named() -> None:
    with pytest.raises(SecurityConfigError) as e:
        ChannelTls.from_file_text("ssl.ca.location=/ca.pem\nnonsense\n", "ssl.properties")
    assert e.value.key == "ssl.properties line 2"


def test_the_endpoint_needs_a_certificate_to_listen_with_ssl() -> None:
    with pytest.raises(SecurityConfigError) as e:
        ChannelTls(cafile="/ca.pem").server_context()
    assert e.value.key == "ssl.keystore.location"


def test_the_listener_security_protocol_map_is_kafkas() -> None:
    protocols = parse_protocol_map("PLAINTEXT:PLAINTEXT, INTERNAL:ssl,CONTROL_PLANE:SSL")
    assert protocols == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL", "CONTROL_PLANE": "SSL"}
    assert protocol_of("INTERNAL", protocols) == "SSL"
    # not in the map: as Kafka's default map has it
    assert protocol_of("SSL", {}) == "SSL"
    assert protocol_of("CLIENT", {}) == "PLAINTEXT"
    assert protocol_of("SASL_SSL", {}) == "SASL_SSL"
    assert parse_protocol_map("CLIENT:sasl_ssl,CP:SASL_PLAINTEXT") == {"CLIENT": "SASL_SSL", "CP": "SASL_PLAINTEXT"}
    with pytest.raises(ValueError, match="GSSAPI"):
        parse_protocol_map("CLIENT:GSSAPI")
    with pytest.raises(ValueError, match="NAME:PROTOCOL"):
        parse_protocol_map("INTERNAL")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="livectl")
    register(parser.add_subparsers())
    return parser


def test_the_command_refuses_unusable_tls_options_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = _parser()
    missing = tmp_path / "missing.properties"
    args = parser.parse_args(["channel", "--ssl-config", str(missing)])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"livectl channel: --security-config: cannot read {missing}") and err.count("\n") == 1

    # an SSL listener without the endpoint's certificate
    config = tmp_path / "ssl.properties"
    config.write_text(f"ssl.truststore.location={tmp_path / 'ca.pem'}\n")
    args = parser.parse_args(["channel", "--listener-security-protocol-map", "INTERNAL:SSL"])
    assert args.func(args) == 2
    assert "ssl.keystore.location: the endpoint's certificate is needed" in capsys.readouterr().err
    # a CA file that cannot be loaded
    args = parser.parse_args(["channel", "--ssl-config", str(config)])
    assert args.func(args) == 2
    assert "--security-config: cannot load a certificate or key" in capsys.readouterr().err

    with pytest.raises(SystemExit) as e:
        parser.parse_args(["channel", "--listener-security-protocol-map", "CONTROL_PLANE:KERBEROS"])
    assert e.value.code == 2
    assert "the channel speaks PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, not 'KERBEROS'" in capsys.readouterr().err
