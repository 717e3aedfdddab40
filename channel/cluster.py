"""The controlled cluster as the channel sees it: the brokers' registrations and topics in ZooKeeper, and the
channel's connection to each broker.

:class:`Cluster` reads ``/brokers/ids/<id>`` (a broker's address and epoch, the registration's czxid) and
``/brokers/topics/<t>`` (Kafka's topic znodes) in the controlled cluster's ZooKeeper, keeps one connection per
broker per registration (a broker registered again gets a new one, negotiated with ApiVersions) and picks the
version of each request both sides speak, capped by ``inter_broker_protocol`` when given. A broker's endpoint
registered with security protocol SSL (its ``listener_security_protocol_map``) is reached over TLS
(:mod:`channel.tls`); one registered SASL_PLAINTEXT or SASL_SSL is authenticated to with the channel's SASL
mechanism and credentials (:mod:`channel.sasl`), after TLS for SASL_SSL. The SCRAM credentials the controller's
endpoint checks are the users' in ZooKeeper (:meth:`Cluster.scram_credential`), as a Kafka broker's. It owns
neither the ZooKeeper client nor any thread: the channel starts the client and calls it from its own.
"""

from __future__ import annotations

import json
import logging
import ssl
import urllib.parse
from collections.abc import Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadArgumentsError, KazooException, NoNodeError

from channel.convert import OUR_VERSIONS, UnsupportedVersionError, ibp_cap
from channel.sasl import ChannelSasl, ScramCredential, client_mechanism, parse_scram_credential
from channel.tls import OVER_TLS, SPOKEN, ChannelTls
from channel.wire import BrokerConnection, WireError
from core.errors import FormatError
from core.kafka import zkdata
from core.kafka.requests import ZERO_UUID, LeaderAndIsrRequest, UpdateMetadataRequest
from core.model import Broker
from core.snapshot import TopicZnode
from sinks.security import SecurityConfigError

__all__ = ["Cluster"]

log = logging.getLogger("livectl.channel")


class Cluster:
    """The brokers and topics of the cluster whose ZooKeeper ``zk`` is, and the channel's connections to them.

    ``listener`` names the brokers' listener the channel connects to (else their first);
    ``inter_broker_protocol`` caps the versions at Kafka 3.9's controller's choice for it ("" = none); ``tls``: how
    an SSL endpoint is reached; ``sasl``: how a SASL one is authenticated to."""

    def __init__(
        self,
        zk: KazooClient,
        listener: str,
        inter_broker_protocol: str,
        request_timeout_s: float,
        tls: ChannelTls | None = None,
        *,
        sasl: ChannelSasl | None = None,
    ) -> None:
        self.zk = zk
        self._tls = tls or ChannelTls()
        self._sasl = sasl or ChannelSasl()
        #: TLS client contexts, made when first needed: with the keystore's certificate, and without (forwarding)
        self._client_contexts: dict[bool, ssl.SSLContext] = {}
        self._listener = listener
        self._inter_broker_protocol = inter_broker_protocol
        self._request_timeout_s = request_timeout_s
        self._connections: dict[int, tuple[int, BrokerConnection]] = {}
        self._topic_names: dict[str, str] = {}

    # ------------------------------------------------------------------ registrations

    def registration(self, broker_id: int) -> Broker | None:
        """The broker's registration; ``None`` when it is not registered."""
        try:
            data, stat = self.zk.get(zkdata.broker_path(broker_id))
        except NoNodeError:
            return None
        return zkdata.decode_broker_registration(broker_id, data, int(stat.czxid))

    def registered(self) -> list[Broker]:
        """Every registered broker (none when ZooKeeper cannot be read: logged)."""
        out: list[Broker] = []
        try:
            for child in self.zk.get_children(zkdata.BROKER_IDS):
                broker = self.registration(int(child)) if child.isdigit() else None
                if broker is not None:
                    out.append(broker)
        except NoNodeError:  # no broker ever registered
            return out
        except (KazooException, FormatError) as e:
            log.warning("cannot read the brokers' registrations: %s", e)
        return out

    def secured_listeners(self, names: Iterable[str]) -> dict[str, str]:
        """Of ``names``, those a registered broker secures (name -> its security protocol)."""
        wanted = set(names)
        return {
            e.listener: e.security_protocol
            for b in self.registered()
            for e in b.endpoints
            if e.listener in wanted and e.security_protocol != "PLAINTEXT"
        }

    def broker_endpoints(self, listener: str) -> list[tuple[str, int, str]]:
        """(host, port, security protocol) of every registered broker's endpoint named ``listener`` that the
        channel forwards a client's requests to (PLAINTEXT or SSL: not SASL, where the channel would speak with its
        own credentials for the client), where the endpoint of that name forwards what it does not answer itself."""
        return [
            (e.host, e.port, e.security_protocol)
            for b in self.registered()
            for e in b.endpoints
            if e.listener == listener and e.security_protocol in ("PLAINTEXT", "SSL")
        ]

    def open(
        self,
        host: str,
        port: int,
        protocol: str,
        timeout_s: float,
        *,
        with_certificate: bool = True,
        listener: str = "",
    ) -> BrokerConnection:
        """A new connection to a broker's endpoint of security ``protocol`` (PLAINTEXT; SSL: over TLS, presenting
        the channel's certificate if it has one and ``with_certificate``; SASL_PLAINTEXT / SASL_SSL: authenticated
        with the channel's SASL login for ``listener``, over TLS for SASL_SSL); :class:`WireError` when it cannot be
        made or authenticated (:class:`channel.wire.SaslRefusedError` when refused), or for a protocol not spoken."""
        if protocol not in SPOKEN:
            raise WireError(f"broker endpoint {host}:{port} is {protocol}: the channel speaks {', '.join(SPOKEN)} only")
        sasl_config: dict[str, str] | None = None
        if protocol.startswith("SASL_"):
            try:
                sasl_config = self._sasl.client_config(listener)
            except SecurityConfigError as e:
                raise WireError(f"broker endpoint {host}:{port} ({listener}) is {protocol}: {e}") from None
        tls = None
        if protocol in OVER_TLS:
            tls = self._client_contexts.get(with_certificate)
            if tls is None:
                try:
                    tls = self._tls.client_context(with_certificate=with_certificate)
                except OSError as e:  # the files were readable at start: gone or changed since
                    raise WireError(f"cannot set up TLS to {host}:{port}: {e}") from None
                self._client_contexts[with_certificate] = tls
        conn = BrokerConnection(host, port, timeout_s=timeout_s, tls=tls)
        if sasl_config is not None:
            try:
                conn.authenticate(client_mechanism(sasl_config), sasl_config["sasl_mechanism"])
            except WireError:
                conn.close()
                raise
        return conn

    def open_forward(self, host: str, port: int, protocol: str, timeout_s: float) -> BrokerConnection:
        """A connection for a client's forwarded requests: over TLS without the channel's certificate, so a
        broker never takes a client's request for the channel's own (its principal, a super user's as a
        controller's often is); a broker that requires client certificates refuses it. Never SASL (the channel's
        credentials would speak for the client): :class:`WireError`."""
        if protocol.startswith("SASL_"):
            raise WireError(f"broker endpoint {host}:{port} is {protocol}: a client's requests are not forwarded there")
        return self.open(host, port, protocol, timeout_s, with_certificate=False)

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """``user``'s SCRAM credential of ``mechanism`` in ZooKeeper (``/config/users/<user>``, the user's name
        sanitized as Kafka's ``Sanitizer`` does), as a Kafka broker checks a SCRAM client; ``None`` when there is
        none or it cannot be read (logged)."""
        path = f"/config/users/{urllib.parse.quote(user, safe='').replace('*', '%2A')}"
        try:
            data, _ = self.zk.get(path)
            text = json.loads(data)["config"].get(mechanism)
            return None if text is None else parse_scram_credential(text)
        except NoNodeError:
            return None
        except (KazooException, ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("cannot read the SCRAM credential of user %r at %s: %s", user, path, type(e).__name__)
            return None

    # ------------------------------------------------------------------ connections

    def connection(self, broker: Broker) -> BrokerConnection:
        """The channel's connection to ``broker`` at its registration's epoch, negotiated when new."""
        held = self._connections.get(broker.id)
        if held is not None and held[0] == broker.epoch:
            return held[1]
        self.drop_connection(broker.id)
        if not broker.endpoints:
            raise WireError(f"broker {broker.id} registered no endpoint")
        endpoint = next((e for e in broker.endpoints if e.listener == self._listener), broker.endpoints[0])
        e = endpoint
        conn = self.open(e.host, e.port, e.security_protocol, self._request_timeout_s, listener=e.listener)
        try:
            conn.negotiate()
        except WireError:
            conn.close()
            raise
        self._connections[broker.id] = (broker.epoch, conn)
        return conn

    def drop_connection(self, broker_id: int) -> None:
        held = self._connections.pop(broker_id, None)
        if held is not None:
            held[1].close()

    def close(self) -> None:
        """Close every connection (not the ZooKeeper client: the channel's)."""
        for _, conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def version(self, conn: BrokerConnection, api_key: int) -> int:
        """The highest version of ``api_key`` both the channel and the broker speak (:class:`UnsupportedVersionError`
        when none)."""
        ours = OUR_VERSIONS[api_key]
        if self._inter_broker_protocol:
            cap = ibp_cap(api_key, self._inter_broker_protocol)
            ours = range(ours.start, min(ours.stop, cap + 1))
        version = conn.best_version(api_key, ours)
        if version is None:
            theirs = conn.versions.get(api_key)
            raise UnsupportedVersionError(
                f"api {api_key}: the broker speaks {theirs}, the channel builds {ours.start}-{ours.stop - 1}"
            )
        return version

    # ------------------------------------------------------------------ topics

    def learn_topic_ids(self, body: Any) -> None:
        """Remember the topic ids a request delivered to a broker names."""
        if isinstance(body, LeaderAndIsrRequest | UpdateMetadataRequest):
            for s in body.partitions:
                if s.topic_id != ZERO_UUID:
                    self._topic_names[s.topic_id] = s.topic

    def topic_name(self, topic_id: str) -> str | None:
        """The topic ``topic_id`` names: from the requests delivered, else from ZooKeeper's topic znodes."""
        name = self._topic_names.get(topic_id)
        if name is not None:
            return name
        try:
            for topic in self.zk.get_children(zkdata.BROKER_TOPICS):
                if topic in self._topic_names.values():
                    continue
                try:
                    data, _ = self.zk.get(zkdata.topic_path(topic))
                except NoNodeError:
                    continue
                tid = zkdata.topic_znode_id(data)
                if tid:
                    self._topic_names[tid] = topic
        except (KazooException, FormatError) as e:
            log.warning("cannot read the topic ids in ZooKeeper: %s", e)
        return self._topic_names.get(topic_id)

    def topic_znodes(self, topics: Iterable[str] | None) -> list[TopicZnode]:
        """The ``/brokers/topics/<t>`` znodes of ``topics`` (``None``: every topic), read at once; a topic without
        one is left out, and so is one whose znode is not Kafka's format (logged)."""
        names = self.zk.get_children(zkdata.BROKER_TOPICS) if topics is None else list(topics)
        pending = []
        for name in names:
            try:
                pending.append((name, self.zk.get_async(zkdata.topic_path(name))))
            except ValueError:  # not a name a znode can have: no such topic
                continue
        out: list[TopicZnode] = []
        for name, result in pending:
            try:
                data, stat = result.get(timeout=self._request_timeout_s)
            except (NoNodeError, BadArgumentsError):
                continue
            try:
                out.append(zkdata.decode_topic_znode(name, data.decode(), int(stat.version)))
            except (ValueError, TypeError, AttributeError, KeyError) as e:
                log.warning("%s: not a topic znode (%s): left out of ListPartitionReassignments", name, e)
        return out
