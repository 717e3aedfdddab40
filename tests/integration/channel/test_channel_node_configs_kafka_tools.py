"""The controller's node's own broker configs, judged by a real Apache Kafka 3.9.2 broker (ZooKeeper mode) and
Kafka's own ``kafka-configs``.

One broker (id 1; clients on ``PLAINTEXT``) under its own ZooKeeper chroot, and a channel in this process
advertised as controller 1000 on every listener (an UpdateMetadata naming controller 1000, delivered from the
bus as livectl's controller sends it). Kafka's Admin client sends ``BROKER 1000`` resources to the node 1000, the
channel:

* ``kafka-configs --describe --entity-type brokers --entity-name 1000`` (and ``--all``, and every broker without
  ``--entity-name``) lists what ``/config/brokers/1000`` and ``/config/brokers/<default>`` hold, with Kafka's
  sources and synonyms;
* ``kafka-configs --alter`` (legacy AlterConfigs) writes ``/config/brokers/1000`` and a ``/config/changes``
  notification; an invalid value is refused with Kafka's words and changes nothing;
* IncrementalAlterConfigs (what ``kafka-reassign-partitions --verify`` sends every node) deletes the throttles,
  set or not; ``validate_only`` writes nothing;
* a config request about anything else (a topic, broker 1, the resources of both nodes at once) is the
  broker's answer, forwarded.
"""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from channel_support import CONTROLLER, EPOCH, channel_beside_a_broker
from kazoo.client import KazooClient
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse
from kio.static.primitive import i8
from waiting import wait_until

from channel.runner import ControllerChannel
from channel.wire import BrokerConnection
from core.kafka import zkdata
from core.kafka.requests import MetadataBroker, MetadataEndpoint, RequestApi, UpdateMetadataRequest
from livectl import local
from livectl.kafka_server import kafka_classpath
from livectl.spawn import find_java
from sinks.entity_configs import write_entity_configs

pytestmark = pytest.mark.integration

LISTENERS = ("CONTROL_PLANE", "INTERNAL", "PLAINTEXT")
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
BROKER, TOPIC = 4, 2
SET, DELETE = 0, 1
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
THROTTLES = (LEADER_RATE, FOLLOWER_RATE, "replica.alter.log.dirs.io.max.bytes.per.second")


@dataclass
class Node:
    svc: local.Service
    zk: KazooClient
    channel: ControllerChannel
    work: Path

    def port(self, listener: str) -> int:
        return self.channel.endpoints[listener].port

    def configs(self, entity: str) -> dict[str, Any] | None:
        """``/config/brokers/<entity>`` as JSON, ``None`` when absent."""
        if not self.zk.exists(f"/config/brokers/{entity}"):
            return None
        data, _ = self.zk.get(f"/config/brokers/{entity}")
        parsed: dict[str, Any] = json.loads(data)
        return parsed

    def notifications(self) -> list[str]:
        """The entity paths of the ``/config/changes`` notifications, oldest first."""
        if not self.zk.exists(zkdata.CONFIG_CHANGES):
            return []
        names = sorted(self.zk.get_children(zkdata.CONFIG_CHANGES))
        return [json.loads(self.zk.get(f"{zkdata.CONFIG_CHANGES}/{n}")[0])["entity_path"] for n in names]

    def kafka_configs(self, *argv: str) -> tuple[int, str, str]:
        """Kafka's own ``kafka-configs`` on the broker's client listener: exit code, stdout, stderr."""
        config = self.work / "admin.properties"
        config.write_text("default.api.timeout.ms=20000\nrequest.timeout.ms=20000\n")
        cmd = [find_java(), "-Xmx128m", "-cp", kafka_classpath(), CONFIG_COMMAND, "--command-config", str(config)]
        cmd += ["--bootstrap-server", self.svc.address, *argv]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
        return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def node(
    zookeeper: local.Service, kafka_broker: local.Service, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Node]:
    work = tmp_path_factory.mktemp("node-configs")
    with channel_beside_a_broker(
        zookeeper.connect,
        kafka_broker.bootstrap,
        work / "broker",
        "node-configs",
        controller_listeners=("CONTROL_PLANE", "INTERNAL"),
        client_listeners=("PLAINTEXT",),
        log_dirs_interval_s=0,
    ) as rig:
        b, channel = rig.broker, rig.channel
        ports = {n: int(b.svc.listeners[n].rsplit(":", 1)[1]) for n in LISTENERS}
        endpoints = tuple(MetadataEndpoint(ports[n], "127.0.0.1", n, 0) for n in LISTENERS)
        rig.bus.send(
            RequestApi.UPDATE_METADATA,
            UpdateMetadataRequest(CONTROLLER, EPOCH, b.epoch, (), (MetadataBroker(1, endpoints),)),
        )
        wait_until("the UpdateMetadata delivered", lambda: channel.delivered == 1)
        yield Node(b.svc, b.zk, channel, work)


def test_kafka_configs_describes_and_alters_the_controller_s_node(node: Node, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="livectl.channel")
    write_entity_configs(
        node.zk, "brokers", "<default>", {LEADER_RATE: "500", "unclean.leader.election.enable": "false"}
    )
    write_entity_configs(node.zk, "brokers", str(CONTROLLER), {LEADER_RATE: "1000"})

    rc, out, err = node.kafka_configs("--describe", "--entity-type", "brokers", "--entity-name", str(CONTROLLER))
    assert rc == 0, err
    assert out.splitlines() == [
        f"Dynamic configs for broker {CONTROLLER} are:",
        f"  {LEADER_RATE}=1000 sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:{LEADER_RATE}=1000, "
        f"DYNAMIC_DEFAULT_BROKER_CONFIG:{LEADER_RATE}=500}}",
    ], out
    rc, out, err = node.kafka_configs(
        "--describe", "--all", "--entity-type", "brokers", "--entity-name", str(CONTROLLER)
    )
    assert rc == 0, err
    assert out.splitlines()[0] == f"All configs for broker {CONTROLLER} are:", out
    assert (
        "  unclean.leader.election.enable=false sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:unclean.leader.election.enable=false}"
    ) in out.splitlines(), out
    # every node the cluster lists, and the cluster default (answered by the broker, forwarded or asked directly)
    rc, out, err = node.kafka_configs("--describe", "--entity-type", "brokers")
    assert rc == 0, err
    for heading in (
        "Dynamic configs for broker 1 are:",
        f"Dynamic configs for broker {CONTROLLER} are:",
        "Default configs for brokers in the cluster are:",
    ):
        assert heading in out.splitlines(), out

    # --alter sends the legacy AlterConfigs with the whole new set: written, with Kafka's change notification
    before = len(node.notifications())
    rc, out, err = node.kafka_configs(
        "--alter", "--entity-type", "brokers", "--entity-name", str(CONTROLLER), "--add-config", f"{FOLLOWER_RATE}=2000"
    )
    assert (rc, out.strip()) == (0, f"Completed updating config for broker {CONTROLLER}."), err
    assert node.configs(str(CONTROLLER)) == {"version": 1, "config": {LEADER_RATE: "1000", FOLLOWER_RATE: "2000"}}
    assert node.notifications()[before:] == [f"brokers/{CONTROLLER}"]

    # refused with Kafka's words, nothing written
    rc, out, err = node.kafka_configs(
        "--alter", "--entity-type", "brokers", "--entity-name", str(CONTROLLER), "--add-config", f"{LEADER_RATE}=-5"
    )
    assert rc == 1, out
    assert f"Invalid value -5 for configuration {LEADER_RATE}: Value must be at least 0" in err, err
    assert node.configs(str(CONTROLLER)) == {"version": 1, "config": {LEADER_RATE: "1000", FOLLOWER_RATE: "2000"}}

    rc, out, err = node.kafka_configs(
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        str(CONTROLLER),
        "--delete-config",
        f"{LEADER_RATE},{FOLLOWER_RATE}",
    )
    assert rc == 0, err
    assert node.configs(str(CONTROLLER)) == {"version": 1, "config": {}}
    # the channel answered them itself (a broker would have refused them: "Unexpected broker id")
    assert f"DescribeConfigs v4 of the controller's node {CONTROLLER}" in caplog.text
    assert f"the controller's node {CONTROLLER} configs now none" in caplog.text


def _resource(kind: int, name: str, *configs: tuple[str, int, str | None]) -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=i8(kind),
        resource_name=name,
        configs=tuple(AlterableConfig(name=k, config_operation=i8(op), value=v) for k, op, v in configs),
    )


def test_incremental_alter_configs_and_what_is_forwarded(node: Node) -> None:
    write_entity_configs(node.zk, "brokers", str(CONTROLLER), {LEADER_RATE: "1000"})
    with BrokerConnection("127.0.0.1", node.port("PLAINTEXT")) as conn:
        conn.negotiate()
        # what kafka-reassign-partitions --verify sends each node: a DELETE of every broker throttle, set or not
        clear = tuple((t, DELETE, None) for t in THROTTLES)
        validate = IncrementalAlterConfigsRequest(
            resources=(_resource(BROKER, str(CONTROLLER), *clear),), validate_only=True
        )
        answer = conn.send(validate, IncrementalAlterConfigsResponse)
        assert [int(r.error_code.value) for r in answer.responses] == [0]
        assert node.configs(str(CONTROLLER)) == {"version": 1, "config": {LEADER_RATE: "1000"}}
        before = len(node.notifications())
        answer = conn.send(
            IncrementalAlterConfigsRequest(
                resources=(_resource(BROKER, str(CONTROLLER), *clear),), validate_only=False
            ),
            IncrementalAlterConfigsResponse,
        )
        assert [(int(r.error_code.value), r.error_message) for r in answer.responses] == [(0, None)]
        assert node.configs(str(CONTROLLER)) == {"version": 1, "config": {}}
        assert node.notifications()[before:] == [f"brokers/{CONTROLLER}"]

        # the other resources are the broker's: a topic it does not have, broker 1, both nodes' at once
        def described(*resources: tuple[int, str]) -> list[tuple[str, int, str | None]]:
            request = DescribeConfigsRequest(
                resources=tuple(
                    DescribeConfigsResource(resource_type=i8(k), resource_name=n, configuration_keys=None)
                    for k, n in resources
                ),
                include_synonyms=False,
                include_documentation=False,
            )
            response = conn.send(request, DescribeConfigsResponse)
            # a broker's result without a message carries "" (its message's default), the channel's None
            return [(str(r.resource_name), int(r.error_code.value), r.error_message or None) for r in response.results]

        assert described((TOPIC, "no-such-topic")) == [("no-such-topic", 3, None)]  # UNKNOWN_TOPIC_OR_PARTITION
        assert described((BROKER, "1")) == [("1", 0, None)]
        assert described((BROKER, str(CONTROLLER)), (BROKER, "1")) == [
            (str(CONTROLLER), 42, f"Unexpected broker id, expected 1 or empty string, but received {CONTROLLER}"),
            ("1", 0, None),
        ]
        assert described((BROKER, str(CONTROLLER))) == [(str(CONTROLLER), 0, None)]
