"""The controller channel: ``livectl.requests`` delivered to real Kafka brokers as Kafka's controller RPCs.

One process beside the controller. Its consumer (group ``livectl-channel`` by default, ``read_committed``:
the controller writes each batch as one transaction) reads every partition of the requests topic; each
message is sent, in the order of its partition (a broker's messages are all in one partition, in the
order the controller decided them), to each broker it names:

* the broker's address is its registration's (``/brokers/ids/<id>`` in the controlled cluster's
  ZooKeeper; the endpoint of the listener ``listener``, else the first);
* a message for a broker not registered, or registered again since (its broker epoch, the registration's
  czxid, is newer than the one the request carries), is dropped: the controller sends the new incarnation
  its own requests, as Kafka's controller drops a dead broker's queue;
* on a new connection the channel asks ApiVersions and sends each request at the highest version both
  speak (and no newer than what Kafka 3.9's controller sends for ``inter_broker_protocol`` when given);
* an unreachable broker that is still registered is retried every ``retry_s`` until it answers or its
  registration goes;
* the answer becomes the events the simulated brokers publish for it (:mod:`channel.convert`) on the
  broker-events topic, keyed by broker id.

Once per message: the consumer's offset of a message is committed only after every addressee answered and
the events were acknowledged by Kafka (``acks=all``). A channel stopped between a broker's answer and the
commit sends that one message again when it restarts; Kafka's broker answers a repeated LeaderAndIsr of
the same leader epoch with ``STALE_CONTROLLER_EPOCH`` for its partitions and changes nothing, and a repeated
UpdateMetadata or StopReplica is idempotent (``docs/real-brokers.md``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka import TopicPartition as KafkaTopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from channel.convert import API_KEYS, OUR_VERSIONS, UnsupportedVersionError, ibp_cap, to_events, to_kafka
from channel.wire import BrokerConnection, WireError
from core.codec.events import event_to_json
from core.errors import FormatError
from core.events import Event
from core.kafka import zkdata
from core.kafka.envelope import BROKER_EVENTS_TOPIC, REQUESTS_TOPIC, Envelope, parse_request
from core.model import Broker

__all__ = ["DEFAULT_GROUP", "ChannelSettings", "ControllerChannel"]

log = logging.getLogger("livectl.channel")

DEFAULT_GROUP = "livectl-channel"


@dataclass(frozen=True)
class ChannelSettings:
    zookeeper: str
    bootstrap_server: str
    requests_topic: str = REQUESTS_TOPIC
    events_topic: str = BROKER_EVENTS_TOPIC
    group: str = DEFAULT_GROUP
    listener: str = "PLAINTEXT"
    #: caps the versions at Kafka 3.9's controller's choice for this inter.broker.protocol.version ("" = none)
    inter_broker_protocol: str = ""
    retry_s: float = 1.0
    request_timeout_s: float = 30.0
    kafka: Mapping[str, Any] | None = None
    zk: Mapping[str, Any] | None = None


class ControllerChannel:
    """Start with :meth:`start`, run with :meth:`run` until :attr:`stopping` is set, then :meth:`close`."""

    def __init__(self, settings: ChannelSettings) -> None:
        self.settings = settings
        self.stopping = threading.Event()
        self._connections: dict[int, tuple[int, BrokerConnection]] = {}
        self._consumer: KafkaConsumer | None = None
        self._producer: KafkaProducer | None = None
        self._zk: KazooClient | None = None
        #: messages delivered (per addressee), for the log and tests
        self.delivered = 0

    def start(self) -> None:
        s = self.settings
        kafka = dict(s.kafka or {})
        self._zk = KazooClient(hosts=s.zookeeper, **dict(s.zk or {}))
        self._zk.start(timeout=15)
        self._consumer = KafkaConsumer(
            s.requests_topic,
            **kafka,
            bootstrap_servers=s.bootstrap_server,
            group_id=s.group,
            enable_auto_commit=False,
            # first start of the group: from the beginning; what is for a broker gone or registered again
            # since is dropped by the broker-epoch rule
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        self._producer = KafkaProducer(**kafka, bootstrap_servers=s.bootstrap_server, acks="all", linger_ms=5)

    def run(self) -> int:
        assert self._consumer is not None
        while not self.stopping.is_set():
            batches = self._consumer.poll(timeout_ms=200, max_records=500)
            for tp, records in batches.items():
                for rec in records:
                    if self.stopping.is_set():
                        return 0
                    if not self._deliver_message(rec.key, rec.value):
                        return 0  # stopped before every addressee answered: not committed, sent again
                    self._commit(tp, rec.offset + 1)
        return 0

    def close(self) -> None:
        for _, conn in self._connections.values():
            conn.close()
        self._connections.clear()
        if self._producer is not None:
            self._producer.close(timeout=5)
        if self._consumer is not None:
            self._consumer.close()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

    # ------------------------------------------------------------------ one message

    def _commit(self, tp: KafkaTopicPartition, offset: int) -> None:
        assert self._consumer is not None and self._producer is not None
        # the events first: a committed offset means the answer reached livectl
        self._producer.flush()
        self._consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})

    def _deliver_message(self, key: bytes | None, value: bytes) -> bool:
        """Deliver one message to each broker it names; ``False`` when stopped before all of them answered."""
        try:
            env = parse_request(key, value)
        except FormatError as e:
            log.error("skipping a malformed request (%s)", e)
            return True
        if env.body.__class__ not in API_KEYS:
            # ControlledShutdownResponse / AlterPartitionResponse answer brokers' own requests: not yet
            log.info("not delivering %s to broker(s) %s (not supported yet)", env.api.value, env.recipients())
            return True
        for broker_id in env.recipients():
            mine = env.for_broker(broker_id)
            if mine is not None and not self._deliver(mine):
                return False
        return True

    def _deliver(self, env: Envelope) -> bool:
        """Send ``env`` to its broker until it answers (``True``; also when the message is dropped) or the
        channel stops (``False``)."""
        body: Any = env.body
        while not self.stopping.is_set():
            broker = self._registration(env.broker_id)
            if broker is None:
                log.info(
                    "broker %s is not registered: dropping %s of batch %s", env.broker_id, env.api.value, env.batch_id
                )
                return True
            if 0 <= body.broker_epoch < broker.epoch:
                log.info(
                    "broker %s registered again (epoch %s > %s): dropping %s of batch %s",
                    env.broker_id,
                    broker.epoch,
                    body.broker_epoch,
                    env.api.value,
                    env.batch_id,
                )
                return True
            try:
                conn = self._connection(broker)
                version = self._version(conn, API_KEYS[type(body)])
                call = to_kafka(body, version, broker_epoch=body.broker_epoch)
                response: Any = conn.send(call.request, call.response_type)
            except WireError as e:
                self._drop_connection(env.broker_id)
                log.warning("broker %s: %s; retrying in %.1f s", env.broker_id, e, self.settings.retry_s)
                self.stopping.wait(self.settings.retry_s)
                continue
            except UnsupportedVersionError as e:
                log.error("broker %s: cannot send %s: %s", env.broker_id, env.api.value, e)
                return True
            self.delivered += 1
            events = to_events(env.broker_id, body, response)
            log.info(
                "broker %s: %s v%s of batch %s (epoch %s) answered error %s",
                env.broker_id,
                env.api.value,
                version,
                env.batch_id,
                env.controller_epoch,
                int(response.error_code.value),
            )
            self._publish(env.broker_id, events)
            return True
        return False

    def _version(self, conn: BrokerConnection, api_key: int) -> int:
        ours = OUR_VERSIONS[api_key]
        if self.settings.inter_broker_protocol:
            cap = ibp_cap(api_key, self.settings.inter_broker_protocol)
            ours = range(ours.start, min(ours.stop, cap + 1))
        version = conn.best_version(api_key, ours)
        if version is None:
            theirs = conn.versions.get(api_key)
            raise UnsupportedVersionError(
                f"api {api_key}: the broker speaks {theirs}, the channel builds {ours.start}-{ours.stop - 1}"
            )
        return version

    def _registration(self, broker_id: int) -> Broker | None:
        assert self._zk is not None
        try:
            data, stat = self._zk.get(zkdata.broker_path(broker_id))
        except NoNodeError:
            return None
        return zkdata.decode_broker_registration(broker_id, data, int(stat.czxid))

    def _connection(self, broker: Broker) -> BrokerConnection:
        held = self._connections.get(broker.id)
        if held is not None and held[0] == broker.epoch:
            return held[1]
        self._drop_connection(broker.id)
        if not broker.endpoints:
            raise WireError(f"broker {broker.id} registered no endpoint")
        endpoint = next((e for e in broker.endpoints if e.listener == self.settings.listener), broker.endpoints[0])
        conn = BrokerConnection(endpoint.host, endpoint.port, timeout_s=self.settings.request_timeout_s)
        try:
            conn.negotiate()
        except WireError:
            conn.close()
            raise
        self._connections[broker.id] = (broker.epoch, conn)
        return conn

    def _drop_connection(self, broker_id: int) -> None:
        held = self._connections.pop(broker_id, None)
        if held is not None:
            held[1].close()

    def _publish(self, broker_id: int, events: list[Event]) -> None:
        assert self._producer is not None
        for ev in events:
            self._producer.send(
                self.settings.events_topic, key=str(broker_id).encode(), value=event_to_json(ev).encode()
            )
