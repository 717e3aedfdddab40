"""Kafka's own admin tools against a livectl-controlled cluster of real brokers (issue 42, "The controller's
endpoint"): ``kafka-topics --create / --alter --partitions / --delete`` and ``kafka-leader-election``, run as
their classes from the jars ``scripts/setup`` resolved, send CreateTopics, CreatePartitions, DeleteTopics and
ElectLeaders to the controller, which is ``livectl channel``: each becomes livectl's admin command and is
answered from livectl's result. ``kafka-reassign-partitions --execute`` first asks ListPartitionReassignments
(answered by the channel from the topic znodes), then sends AlterPartitionReassignments; kafka-python's Admin
client sends it too, and CreateTopics with ``validate_only`` and -1 defaults. ``kafka-reassign-partitions
--verify`` clears the broker throttles of every node the cluster lists, and ``kafka-configs --describe
--entity-type brokers`` asks every node for its configs: the controller's node is the channel, which answers
DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of its own id from and to ``/config/brokers/<id>``.

Real processes only, one cluster for the module (:func:`bench.harness.real_brokers.running_cluster`): the
session's ZooKeeper (a chroot) and Kafka bus, ``livectl run`` (started first: it holds ``/controller``),
``livectl channel`` and three Apache Kafka 3.9.2 brokers in ZooKeeper mode. The tools are bootstrapped on the
brokers' inter-broker listener, where the brokers' metadata lists the channel's endpoint as the controller
(as on their client listener: ``tests/e2e/test_kafka_fault_invariants.py`` runs ``kafka-topics`` there).
Each change is checked where Kafka keeps it, ZooKeeper in Kafka's layout, and on the brokers (their metadata,
records written and read back); each tool's exit code and output are Kafka's; a refusal (the topic exists)
carries Kafka's message.

The tests run in order on one topic; by hand (``pytest -m e2e tests/e2e/test_kafka_admin_tools.py``), not in CI.
"""

from __future__ import annotations

import json
import logging
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import NoReassignmentInProgressError, TopicAlreadyExistsError

from admin.reassign.throttles import BROKER_THROTTLES, TOPIC_THROTTLES
from bench import harness as cm
from bench.harness.real_brokers import (
    TOPIC_COMMAND,
    Cluster,
    consume,
    describe_partitions,
    kafka_view,
    produce,
    running_cluster,
)
from core.events import ElectLeaders
from core.kafka.configs import LEADER_THROTTLED_RATE
from core.model import ElectionType, TopicPartition
from livectl import local
from livectl.kafka_server import kafka_classpath
from livectl.kafka_zk_brokers import INTER_BROKER_LISTENER, ZkBrokerSettings
from livectl.spawn import find_java

pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)

BROKERS = (1, 2, 3)
#: nothing but the tools moves a leader
BROKER_SETTINGS = ZkBrokerSettings(properties={"auto.leader.rebalance.enable": "false"})
#: take_over_from_kafka: a controller that resigned and waits again wins the next re-election from the brokers
LIVECTL = {"auto_leader_rebalance_enable": False, "take_over_from_kafka": True}
REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
#: bytes/s: enough for the few records here to move at once
THROTTLE = "50000000"
LEADER_ELECTION_COMMAND = "org.apache.kafka.tools.LeaderElectionCommand"
TOPIC = "k-orders"
#: what Kafka's tools print when their Admin client sent the channel's endpoint a Metadata request
NO_METADATA = "does not support METADATA"


class Tools:
    """The module's cluster and Kafka's tools bootstrapped on its brokers' inter-broker listener."""

    def __init__(self, cluster: Cluster, work: Path) -> None:
        self.cluster, self.work = cluster, work
        self.records: list[bytes] = []

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap(INTER_BROKER_LISTENER)

    def run(self, tool: str, *argv: str, config_option: str = "--command-config") -> tuple[int, str]:
        """Kafka's ``tool`` class with ``argv`` and ``--bootstrap-server``: its exit code and what it printed on
        stdout (where Kafka's tools print their results and errors; stderr, its log, is logged here). Run once:
        the channel's endpoint, which the Admin client counts among the brokers here, serves Metadata."""
        with tempfile.TemporaryDirectory(dir=self.work) as folder:
            config = Path(folder) / "admin.properties"
            config.write_text("default.api.timeout.ms=60000\nrequest.timeout.ms=30000\n")
            cmd = [find_java(), "-Xmx128m", "-cp", kafka_classpath(), tool, config_option, str(config)]
            cmd += ["--bootstrap-server", self.bootstrap, *argv]
            started = time.monotonic()
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False, cwd=folder)
        log.info(
            "%s %s: exit %s in %.1f s\nstdout: %s\nstderr: %s",
            tool.rsplit(".", 1)[1],
            " ".join(argv),
            done.returncode,
            time.monotonic() - started,
            done.stdout.strip(),
            done.stderr.strip()[-3000:],
        )
        assert NO_METADATA not in done.stdout, done.stdout
        return done.returncode, done.stdout

    def znode(self, path: str) -> dict[str, Any] | None:
        return self.cluster.m.znode(path)[0]

    def channel_log(self) -> str:
        return self.cluster.channel_log.read_text()

    def controller_id(self) -> int:
        """livectl's controller id: the node the channel's endpoint is to Kafka's clients."""
        held = self.znode("/controller")
        assert held is not None
        return int(held["brokerid"])

    def settled(self, count: int) -> dict[int, dict[str, Any]] | None:
        """The topic's partition states when it has ``count`` partitions, each led by one of its replicas with
        every replica in its ISR and no reassignment going on; else ``None``."""
        topic = self.znode(f"/brokers/topics/{TOPIC}")
        if topic is None or len(topic["partitions"]) != count or topic.get("adding_replicas"):
            return None
        states = {}
        for p, replicas in topic["partitions"].items():
            st = self.znode(f"/brokers/topics/{TOPIC}/partitions/{p}/state")
            if st is None or st["leader"] not in replicas or sorted(st["isr"]) != sorted(replicas):
                return None
            states[int(p)] = {**st, "replicas": replicas}
        return states

    def served_as_in_zookeeper(self, count: int) -> dict[int, dict[str, Any]]:
        """Waits until the topic has settled with ``count`` partitions and every broker's metadata (Kafka's own
        view) serves the leaders and ISRs ZooKeeper holds; returns the states."""
        states: dict[int, dict[str, Any]] = cm.wait_until(
            f"{TOPIC} settled with {count} partitions", lambda: self.settled(count), 90
        )

        def served() -> bool:
            for broker in BROKERS:
                view = kafka_view(self.cluster.brokers[broker].address, TOPIC)
                if view != {p: (st["leader"], sorted(st["isr"])) for p, st in states.items()}:
                    return False
            return True

        cm.wait_until(f"every broker serving {TOPIC} as ZooKeeper has it", served, 60)
        return states

    def write_and_read_back(self, partitions: int) -> None:
        """Records to every partition of the topic (``acks=all``) and all of the topic's records read back."""
        batch = [f"r{len(self.records) + i}".encode() for i in range(10 * partitions)]
        produce(self.cluster.bootstrap(), TOPIC, batch, partitions=partitions)
        self.records += batch
        got = consume(self.cluster.bootstrap(), TOPIC, partitions=partitions)
        assert sorted(got) == sorted(self.records)


@pytest.fixture(scope="module")
def tools(
    zookeeper: local.Service, kafka_broker: local.Service, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tools]:
    work = tmp_path_factory.mktemp("kafka-admin-tools")
    with running_cluster(zookeeper.connect, kafka_broker.bootstrap, work, BROKER_SETTINGS) as c:
        m = c.m
        started = time.monotonic()
        controller = m.start_controller(LIVECTL)
        c.start_channel()
        m.wait_loaded(controller, timeout=240)
        # the query answering a command first: its Python workers are up (on a loaded machine a first start that
        # times out makes the controller resign, and a broker started meanwhile would win /controller)
        m.send_admin(ElectLeaders("warm-up", ElectionType.PREFERRED, (TopicPartition("none", 0),)))
        cm.wait_until("the controller's query answering", lambda: m.results("warm-up"), 240, interval=2)
        held, _ = m.znode("/controller")
        assert held is not None and held["brokerid"] == controller.controller_id
        with ThreadPoolExecutor(len(BROKERS)) as pool:
            list(pool.map(c.start_broker, BROKERS))
        cm.wait_until("the Kafka brokers registered", lambda: set(m.registered_brokers()) == set(BROKERS), 60)
        assert m.znode("/controller")[0] == held, "a Kafka broker took /controller"
        cm.wait_until(
            "livectl's UpdateMetadata delivered to each broker",
            lambda: all(f"broker {b}: UpdateMetadata" in c.channel_log.read_text() for b in BROKERS),
            180,
        )
        log.info("cluster up in %.0f s", time.monotonic() - started)
        yield Tools(c, work)


def test_kafka_topics_create(tools: Tools) -> None:
    rc, out = tools.run(
        TOPIC_COMMAND,
        "--create",
        "--topic",
        TOPIC,
        "--partitions",
        "3",
        "--replication-factor",
        "2",
        "--config",
        "retention.ms=3600000",
    )
    assert (rc, out.strip()) == (0, f"Created topic {TOPIC}."), out
    # the request came to the channel, at the version Kafka 3.9's Admin client speaks, as livectl's command
    assert "CreateTopics v7 from" in tools.channel_log(), tools.channel_log()[-3000:]
    # ZooKeeper in Kafka's layout: the topic znode with an id, 3 partitions of 2 distinct live replicas, the config
    topic = tools.znode(f"/brokers/topics/{TOPIC}")
    assert topic is not None and topic["topic_id"] and topic["version"] == 3, topic
    assert sorted(topic["partitions"]) == ["0", "1", "2"], topic
    for replicas in topic["partitions"].values():
        assert len(set(replicas)) == 2 and set(replicas) <= set(BROKERS), topic
    assert tools.znode(f"/config/topics/{TOPIC}") == {"version": 1, "config": {"retention.ms": "3600000"}}
    # the brokers host it: leaders and ISRs as in ZooKeeper, records written and read back
    tools.served_as_in_zookeeper(3)
    tools.write_and_read_back(3)
    # Kafka's own --describe agrees
    rc, out = tools.run(TOPIC_COMMAND, "--describe", "--topic", TOPIC)
    assert rc == 0, out
    described = describe_partitions(out)
    assert described["topic"]["PartitionCount"] == "3" and described["topic"]["ReplicationFactor"] == "2", described
    assert "retention.ms=3600000" in described["topic"]["Configs"], described
    assert described["topic"]["TopicId"] == topic["topic_id"], described


def test_kafka_topics_create_refused_with_kafkas_message(tools: Tools) -> None:
    rc, out = tools.run(TOPIC_COMMAND, "--create", "--topic", TOPIC, "--partitions", "1", "--replication-factor", "1")
    assert rc == 1, out
    assert f"Topic '{TOPIC}' already exists." in out, out
    rc, out = tools.run(
        TOPIC_COMMAND, "--create", "--topic", "k-too-wide", "--partitions", "1", "--replication-factor", "4"
    )
    assert rc == 1, out
    assert "Replication factor: 4 larger than available brokers: 3." in out, out
    assert tools.znode("/brokers/topics/k-too-wide") is None
    # --if-not-exists: Kafka's tool takes TOPIC_ALREADY_EXISTS for done
    rc, out = tools.run(
        TOPIC_COMMAND, "--create", "--if-not-exists", "--topic", TOPIC, "--partitions", "1", "--replication-factor", "1"
    )
    assert rc == 0, out


def test_kafka_topics_alter_partitions(tools: Tools) -> None:
    before = tools.znode(f"/brokers/topics/{TOPIC}")
    assert before is not None
    rc, out = tools.run(TOPIC_COMMAND, "--alter", "--topic", TOPIC, "--partitions", "5")
    assert (rc, out) == (0, ""), out  # Kafka's tool says nothing when it succeeds
    assert "CreatePartitions v3 from" in tools.channel_log()
    topic = tools.znode(f"/brokers/topics/{TOPIC}")
    assert topic is not None and sorted(topic["partitions"]) == ["0", "1", "2", "3", "4"], topic
    assert topic["topic_id"] == before["topic_id"]
    for p, replicas in before["partitions"].items():
        assert topic["partitions"][p] == replicas
    for p in ("3", "4"):
        assert len(set(topic["partitions"][p])) == 2 and set(topic["partitions"][p]) <= set(BROKERS), topic
    tools.served_as_in_zookeeper(5)
    tools.write_and_read_back(5)
    # fewer partitions: Kafka's refusal, livectl's words
    rc, out = tools.run(TOPIC_COMMAND, "--alter", "--topic", TOPIC, "--partitions", "4")
    assert rc == 1, out
    assert "Topic currently has 5 partitions, 4 would not be an increase." in out, out


def _reassign_to_the_broker_it_lacks(tools: Tools, partition: int) -> tuple[list[int], list[int]]:
    """(the partition's replicas, a target: the broker it lacks first, then its first replica)."""
    topic = tools.znode(f"/brokers/topics/{TOPIC}")
    assert topic is not None
    current = topic["partitions"][str(partition)]
    (missing,) = set(BROKERS) - set(current)
    return current, [missing, current[0]]


def _reassigned(tools: Tools, partition: int, current: list[int], target: list[int]) -> None:
    states = tools.served_as_in_zookeeper(5)
    topic = tools.znode(f"/brokers/topics/{TOPIC}")
    assert topic is not None and topic["partitions"][str(partition)] == target, topic
    assert not topic.get("adding_replicas") and not topic.get("removing_replicas"), topic
    assert states[partition]["leader"] == current[0], states[partition]  # the leader was in the target: it stays
    tools.write_and_read_back(5)


def test_alter_partition_reassignments_from_kafka_pythons_admin_client(tools: Tools) -> None:
    """AlterPartitionReassignments from kafka-python's Admin client (a real client of the API; Kafka's own tool
    needs ListPartitionReassignments first, the next test): a partition moved to the broker it lacked, and a
    cancellation of a partition that is not being reassigned refused with Kafka's NO_REASSIGNMENT_IN_PROGRESS."""
    current, target = _reassign_to_the_broker_it_lacks(tools, 0)
    admin = KafkaAdminClient(bootstrap_servers=tools.bootstrap, request_timeout_ms=30_000)
    try:
        answer = admin.alter_partition_reassignments({KafkaTopicPartition(TOPIC, 0): target})
        assert answer == {KafkaTopicPartition(TOPIC, 0): None}, answer
        _reassigned(tools, 0, current, target)
        answer = admin.alter_partition_reassignments({KafkaTopicPartition(TOPIC, 2): None})
        assert answer == {KafkaTopicPartition(TOPIC, 2): NoReassignmentInProgressError}, answer
    finally:
        admin.close()
    assert "AlterPartitionReassignments v0 from" in tools.channel_log()


def test_kafka_reassign_partitions_execute(tools: Tools) -> None:
    current, target = _reassign_to_the_broker_it_lacks(tools, 1)
    plan = tools.work / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 1, "replicas": target}]}))
    rc, out = tools.run(REASSIGN_COMMAND, "--execute", "--reassignment-json-file", str(plan))
    assert rc == 0, out
    assert f"Successfully started partition reassignment for {TOPIC}-1" in out, out
    _reassigned(tools, 1, current, target)


def test_kafka_reassign_partitions_verify_clears_every_node_s_throttles(tools: Tools) -> None:
    """A throttled ``--execute``, then ``--verify`` once it is done: Kafka's tool clears the broker throttles of
    every node the cluster lists, the controller's node (the channel, which answers for its own
    ``/config/brokers/<id>``) among them, and the topic's throttled replicas."""
    current, target = _reassign_to_the_broker_it_lacks(tools, 3)
    plan = tools.work / "reassign-throttled.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 3, "replicas": target}]}))
    rc, out = tools.run(REASSIGN_COMMAND, "--execute", "--reassignment-json-file", str(plan), "--throttle", THROTTLE)
    assert rc == 0, out
    assert f"The inter-broker throttle limit was set to {THROTTLE} B/s" in out, out
    for b in set(current) | set(target):  # Kafka's tool sends each broker involved its rates
        config = tools.znode(f"/config/brokers/{b}")
        assert config is not None and config["config"][LEADER_THROTTLED_RATE] == THROTTLE, (b, config)
    _reassigned(tools, 3, current, target)

    rc, out = tools.run(REASSIGN_COMMAND, "--verify", "--reassignment-json-file", str(plan))
    assert rc == 0, out
    assert f"Reassignment of partition {TOPIC}-3 is completed." in out, out
    controller = tools.controller_id()
    cleared = next(ln for ln in out.splitlines() if ln.startswith("Clearing broker-level throttles on brokers "))
    assert {int(b) for b in cleared.rsplit(" ", 1)[1].split(",")} == {*BROKERS, controller}, out
    for b in (*BROKERS, controller):
        config = tools.znode(f"/config/brokers/{b}")
        assert config is not None and not set(config["config"]) & set(BROKER_THROTTLES), (b, config)
    topic_config = tools.znode(f"/config/topics/{TOPIC}")
    assert topic_config is not None and not set(topic_config["config"]) & set(TOPIC_THROTTLES), topic_config
    assert f"the controller's node {controller} configs now" in tools.channel_log()


def test_kafka_configs_describes_every_broker_and_the_controller_s_node(tools: Tools) -> None:
    """``kafka-configs --describe --entity-type brokers`` asks every node the cluster lists for its configs, the
    controller's node too (answered by the channel from ``/config/brokers/<id>``); ``--alter`` of the
    controller's node writes there."""
    controller = tools.controller_id()
    entity = ("--entity-type", "brokers", "--entity-name", str(controller))
    rc, out = tools.run(CONFIG_COMMAND, "--alter", *entity, "--add-config", f"{LEADER_THROTTLED_RATE}=1000")
    assert (rc, out.strip()) == (0, f"Completed updating config for broker {controller}."), out
    assert tools.znode(f"/config/brokers/{controller}") == {"version": 1, "config": {LEADER_THROTTLED_RATE: "1000"}}
    rc, out = tools.run(CONFIG_COMMAND, "--describe", "--entity-type", "brokers")
    assert rc == 0, out
    lines = out.splitlines()
    for b in BROKERS:
        assert f"Dynamic configs for broker {b} are:" in lines, out
    at = lines.index(f"Dynamic configs for broker {controller} are:")
    assert lines[at + 1] == (
        f"  {LEADER_THROTTLED_RATE}=1000 sensitive=false "
        f"synonyms={{DYNAMIC_BROKER_CONFIG:{LEADER_THROTTLED_RATE}=1000}}"
    ), out
    assert "Default configs for brokers in the cluster are:" in lines, out
    rc, out = tools.run(CONFIG_COMMAND, "--alter", *entity, "--delete-config", LEADER_THROTTLED_RATE)
    assert rc == 0, out
    assert tools.znode(f"/config/brokers/{controller}") == {"version": 1, "config": {}}


def test_kafka_leader_election(tools: Tools) -> None:
    topic = tools.znode(f"/brokers/topics/{TOPIC}")
    assert topic is not None
    preferred = topic["partitions"]["0"][0]
    argv = ("--election-type", "preferred", "--topic", TOPIC, "--partition", "0")
    rc, out = tools.run(LEADER_ELECTION_COMMAND, *argv, config_option="--admin.config")
    assert rc == 0, out
    assert f"Successfully completed leader election (PREFERRED) for partitions {TOPIC}-0" in out, out
    assert "ElectLeaders v2 from" in tools.channel_log()
    states = tools.served_as_in_zookeeper(5)
    assert states[0]["leader"] == preferred, states[0]
    rc, out = tools.run(LEADER_ELECTION_COMMAND, *argv, config_option="--admin.config")
    assert rc == 0 and f"Valid replica already elected for partitions {TOPIC}-0" in out, out


def test_validate_only_and_the_defaults_from_kafka_pythons_admin_client(tools: Tools) -> None:
    """kafka-python's Admin client (another real client of the same API): ``validate_only`` is livectl's dry
    run, and -1 partitions and replication factor are the channel's ``--num-partitions`` and
    ``--default-replication-factor`` (Kafka's defaults, 1 and 1)."""
    admin = KafkaAdminClient(bootstrap_servers=tools.bootstrap, request_timeout_ms=30_000)
    try:
        answer = admin.create_topics({"k-dry": {"num_partitions": 2, "replication_factor": 2}}, validate_only=True)
        assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [("k-dry", 0)], answer
        assert "validate only" in tools.channel_log()
        assert tools.znode("/brokers/topics/k-dry") is None
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics({TOPIC: {"num_partitions": 1, "replication_factor": 1}}, validate_only=True)
        answer = admin.create_topics({"k-default": {}})
        assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [("k-default", 0)], answer
    finally:
        admin.close()
    topic = tools.znode("/brokers/topics/k-default")
    assert topic is not None and list(topic["partitions"]) == ["0"] and len(topic["partitions"]["0"]) == 1, topic


def test_kafka_topics_delete(tools: Tools) -> None:
    rc, out = tools.run(TOPIC_COMMAND, "--delete", "--topic", TOPIC)
    assert (rc, out) == (0, ""), out
    assert "DeleteTopics v6 from" in tools.channel_log()
    cm.wait_until(
        f"{TOPIC} gone from ZooKeeper",
        lambda: (
            tools.znode(f"/brokers/topics/{TOPIC}") is None
            and tools.znode(f"/admin/delete_topics/{TOPIC}") is None
            and tools.znode(f"/config/topics/{TOPIC}") is None
        ),
        90,
    )

    def dropped() -> bool:
        return not any(kafka_view(tools.cluster.brokers[b].address, TOPIC) for b in BROKERS)

    cm.wait_until(f"every broker's metadata without {TOPIC}", dropped, 60)
    rc, out = tools.run(TOPIC_COMMAND, "--list")
    assert rc == 0 and TOPIC not in out.split(), out
