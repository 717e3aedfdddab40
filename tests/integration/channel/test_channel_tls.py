"""The controller channel over TLS, judged by a real Apache Kafka 3.9.2 broker (ZooKeeper mode) whose
inter-broker and control-plane listeners are SSL.

Certificates made by the test (:mod:`kafka_pki`): a CA, the broker's PKCS12 stores, and a certificate of the
channel's (``CN=livectl-controller``, for 127.0.0.1: the endpoint's server certificate and the channel's client
certificate, as one keystore is a broker's). The broker maps ``INTERNAL`` and ``CONTROL_PLANE`` to SSL with
``ssl.client.auth=required`` (clients' ``PLAINTEXT`` stays plaintext); the channel has the same ``ssl.*``
(``ssl.client.auth=required`` too) and ``INTERNAL:SSL,CONTROL_PLANE:SSL``. The test plays livectl's controller on
the bus (:mod:`channel_support`), as ``test_channel_endpoint.py`` does. Then:

* the channel's LeaderAndIsr and UpdateMetadata reach the broker over TLS (its control plane speaks nothing
  else) and are answered with no error;
* the controller is advertised on the SSL listeners (UpdateMetadata lists it with protocol SSL): the broker's
  AllocateProducerIds (an idempotent producer), AlterPartition (an ISR shrink) and, on SIGTERM,
  ControlledShutdown reach the endpoint over TLS, with the broker's certificate, and are answered;
* without a client certificate, or speaking plaintext, nothing gets through the endpoint; a client's requests
  it would forward go to the broker without the channel's certificate (refused here: client auth required);
* the channel's ``super.users`` names the broker's certificate (``User:CN=kafka-broker``, the subject Kafka's
  principal builder gives it): a client with another certificate of the CA (``User:CN=outsider``) sending what a
  broker sends gets ``CLUSTER_AUTHORIZATION_FAILED`` in each response, and nothing of it reaches livectl.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from channel_support import CONTROLLER, EndpointSetup, channel_beside_a_broker
from kafka_pki import BROKER_CN, Pki, make_pki, zk_broker_ssl_properties
from kio.schema.allocate_producer_ids.v0.request import AllocateProducerIdsRequest
from kio.schema.allocate_producer_ids.v0.response import AllocateProducerIdsResponse
from kio.schema.alter_partition.v0 import request as alter_partition
from kio.schema.alter_partition.v0.response import AlterPartitionResponse as KafkaAlterPartitionResponse
from kio.schema.controlled_shutdown.v3.request import ControlledShutdownRequest
from kio.schema.controlled_shutdown.v3.response import ControlledShutdownResponse as KafkaControlledShutdownResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i64
from waiting import wait_until

from channel.answers import METADATA, node_versions
from channel.authz import CLUSTER_AUTHORIZATION_FAILED, ClusterAction
from channel.endpoint import Connection, ControllerEndpoint
from channel.tls import ChannelTls
from channel.wire import BrokerConnection, WireError
from core.kafka import zkdata
from core.request_states import metadata_broker
from livectl import local
from livectl.kafka_zk_brokers import ZkBrokerSettings

pytestmark = pytest.mark.integration

CHANNEL_CN = "livectl-controller"
SECURED = ("CONTROL_PLANE", "INTERNAL")


@dataclass
class Setup(EndpointSetup):
    """The channel's setup with the certificates the test made."""

    pki: Pki = field(kw_only=True)


@pytest.fixture
def setup(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[Setup]:
    pki = make_pki(tmp_path / "pki", ["outsider"], servers=[CHANNEL_CN])
    # a follower that never fetches drops out of the ISR after 2 s (Kafka's default: 30 s)
    broker_settings = ZkBrokerSettings(
        properties={"replica.lag.time.max.ms": "2000", **zk_broker_ssl_properties(pki, SECURED)}
    )
    cert = pki.server(CHANNEL_CN)
    tls = ChannelTls.from_properties(
        {
            "ssl.truststore.location": str(pki.ca),
            "ssl.keystore.location": str(cert.cert),
            "ssl.key.location": str(cert.key),
            "ssl.client.auth": "required",
        }
    )
    with channel_beside_a_broker(
        zookeeper.connect,
        kafka_broker.bootstrap,
        tmp_path / "broker",
        "tls",
        broker_settings,
        listener="CONTROL_PLANE",
        controller_listeners=SECURED,
        tls=tls,
        listener_protocols={"CONTROL_PLANE": "SSL", "INTERNAL": "SSL"},
        cluster_action=ClusterAction.from_properties({"super.users": f"User:CN={BROKER_CN};User:admin"}),
    ) as rig:
        yield Setup.beside(rig, kafka_broker.bootstrap, pki=pki)


def _client_context(pki: Pki, cert: str | None) -> ssl.SSLContext:
    ctx = ChannelTls(cafile=str(pki.ca)).client_context()
    if cert is not None:
        c = pki.server(cert) if cert in pki.servers else pki.client(cert)
        ctx.load_cert_chain(str(c.cert), str(c.key))
    return ctx


def _refused(host: str, port: int, tls: ssl.SSLContext | None) -> bool:
    """Whether ApiVersions to ``host:port`` (over TLS with ``tls``) fails."""
    try:
        with BrokerConnection(host, port, timeout_s=5, tls=tls) as conn:
            conn.negotiate()
    except WireError:
        return True
    return False


def test_the_channel_speaks_tls_both_ways_with_an_ssl_control_plane(setup: Setup) -> None:
    s = setup
    registration = zkdata.decode_broker_registration(1, s.zk.get("/brokers/ids/1")[0], s.epoch)
    assert {e.listener: e.security_protocol for e in registration.endpoints} == {
        "PLAINTEXT": "PLAINTEXT",
        "INTERNAL": "SSL",
        "CONTROL_PLANE": "SSL",
    }
    # the broker's control plane speaks TLS only, and wants a client certificate
    host, port = s.broker("CONTROL_PLANE")
    assert _refused(host, port, None)
    # the endpoint: TLS on both names, advertised as SSL; plaintext and certificate-less clients get nothing
    assert {n: e.security_protocol for n, e in s.channel.endpoints.items()} == dict.fromkeys(SECURED, "SSL")
    port_cp = s.port("CONTROL_PLANE")
    assert _refused("127.0.0.1", port_cp, None)
    assert _refused("127.0.0.1", port_cp, _client_context(s.pki, None))
    with BrokerConnection("127.0.0.1", port_cp, timeout_s=5, tls=_client_context(s.pki, "outsider")) as conn:
        # a certificate of the CA's: ApiVersions answered over TLS, with the endpoint's own APIs only — a client's
        # requests are forwarded without the channel's certificate, which this broker (client auth required)
        # refuses, so none passes as the channel's
        assert conn.negotiate() == node_versions({})
        # User:CN=outsider is not in super.users: a broker's requests are refused in their own shape, the
        # connection kept (a later leak would show: the AllocateProducerIds below would get the second block,
        # broker 9's AlterPartition and ControlledShutdown would be the first such events)
        pair_isr = alter_partition.PartitionData(
            partition_index=i32(0), leader_epoch=i32(0), new_isr=(BrokerId(9),), partition_epoch=i32(0)
        )
        shrink = alter_partition.AlterPartitionRequest(
            broker_id=BrokerId(9),
            broker_epoch=i64(s.epoch),
            topics=(
                alter_partition.TopicData(topic_name=TopicName(f"{s.bus.requests_topic}-pair"), partitions=(pair_isr,)),
            ),
        )
        refused: list[Any] = [
            conn.send(
                ControlledShutdownRequest(broker_id=BrokerId(9), broker_epoch=i64(s.epoch)),
                KafkaControlledShutdownResponse,
            ),
            conn.send(
                AllocateProducerIdsRequest(broker_id=BrokerId(1), broker_epoch=i64(s.epoch)),
                AllocateProducerIdsResponse,
            ),
            conn.send(shrink, KafkaAlterPartitionResponse),
        ]
        assert [int(r.error_code.value) for r in refused] == [CLUSTER_AUTHORIZATION_FAILED] * 3
        assert not refused[0].remaining_partitions and not refused[2].topics
    assert s.channel.endpoints["CONTROL_PLANE"].refusals == 3
    assert s.handshakes() == 1
    wait_until(
        "the two refused handshakes logged", lambda: s.channel.endpoints["CONTROL_PLANE"].handshake_failures == 2
    )

    # LeaderAndIsr and UpdateMetadata over TLS: broker 1 leads "solo" alone and "pair" with broker 2 (never
    # started) in its ISR; the UpdateMetadata lists the registration as livectl's controller does
    solo, pair = s.lead_solo_and_pair(metadata_broker(registration))

    # AllocateProducerIds over TLS on CONTROL_PLANE: an idempotent producer's InitProducerId completes
    s.producer_ids_allocated(solo[0], answered=1)
    assert s.handshakes() >= 2  # the broker's own connection, with its certificate (client auth required)

    # AlterPartition over TLS: broker 2 never fetches, so broker 1 asks to shrink the ISR of "pair"
    asked = s.isr_proposal()
    assert (asked.broker_id, asked.topic, asked.partition, asked.new_isr) == (1, pair[0], 0, (1,))
    s.answer_isr_shrink(asked, pair, answered=2)

    # Metadata, not forwarded here (the broker wants a client certificate), is answered by the endpoint from
    # ZooKeeper: broker 1 at its CONTROL_PLANE address and the controller's node at the channel's
    with BrokerConnection("127.0.0.1", port_cp, timeout_s=5, tls=_client_context(s.pki, "outsider")) as conn:
        assert conn.negotiate()[METADATA] == (0, 12)
        answer = conn.send(MetadataRequest(topics=None, include_topic_authorized_operations=False), MetadataResponse)
        listed = {int(b.node_id): (b.host, int(b.port)) for b in answer.brokers}
        assert listed == {1: (host, port), CONTROLLER: ("127.0.0.1", port_cp)}
        assert int(answer.controller_id) == CONTROLLER and answer.cluster_id
    s.answered(3)

    # ControlledShutdown over TLS on INTERNAL (SIGTERM): answered, the first attempt succeeds
    before = s.channel.endpoints["INTERNAL"].handshakes
    s.controlled_shutdown(answered=4)
    assert s.channel.endpoints["INTERNAL"].handshakes > before


def test_a_tls_client_that_hangs_up_while_its_request_waits_is_let_go(tmp_path: Path) -> None:
    """Over TLS the endpoint cannot peek at a connection to see its peer leave while a request waits for the
    controller (a broker that gave up on a ControlledShutdown reconnects to ask again): it reads ahead instead,
    and the connection is closed within a second or so. No broker needed: the endpoint alone, on loopback."""
    pki = make_pki(tmp_path / "pki", ["broker-1"], servers=[CHANNEL_CN])
    cert = pki.server(CHANNEL_CN)
    server = ChannelTls(
        cafile=str(pki.ca), certfile=str(cert.cert), keyfile=str(cert.key), client_auth="required"
    ).server_context()
    asked: list[tuple[int, int]] = []
    closed = threading.Event()

    def on_request(conn: Connection, api_key: int, version: int, correlation_id: int, body: Any) -> None:
        asked.append((api_key, version))  # never answered: livectl's controller is slow

    endpoint = ControllerEndpoint(
        "127.0.0.1", 0, on_request, lambda conn: closed.set(), listener="INTERNAL", tls=server
    )
    endpoint.start()
    try:
        client = BrokerConnection("127.0.0.1", endpoint.port, timeout_s=5, tls=_client_context(pki, "broker-1"))
        assert client.negotiate() == node_versions({})
        client.set_timeout(1.5)
        with pytest.raises(WireError):
            client.send(
                ControlledShutdownRequest(broker_id=BrokerId(1), broker_epoch=i64(7)), KafkaControlledShutdownResponse
            )
        assert asked == [(7, 3)]
        assert not closed.is_set()  # still waiting for its answer while the client is there
        left = time.monotonic()
        client.close()
        assert closed.wait(10), "the endpoint kept a connection whose peer left"
        assert time.monotonic() - left < 5
        assert endpoint.handshakes == 1 and endpoint.handshake_failures == 0
    finally:
        endpoint.close()
