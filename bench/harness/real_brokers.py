"""A cluster of real Apache Kafka 3.9.2 brokers in ZooKeeper mode under livectl, for the e2e tests.

:class:`Cluster` is the controlled cluster: a ZooKeeper chroot and livectl's topics on the bus (a
:class:`bench.harness.matrix.Matrix`, whose ``start_controller`` starts ``livectl run``), ``livectl channel``
and the Kafka brokers (:mod:`livectl.kafka_zk_brokers`). The clients below talk to the real brokers:
:func:`produce` (kafka-python's default idempotent producer, ``acks=all``), :func:`consume` (every record from
the beginning) and :func:`kafka_view` (a broker's own metadata: Kafka's view, not livectl's).
:func:`running_cluster` opens one and closes it whatever happens (the e2e files' fixtures);
:func:`kafka_topics_describe` runs Kafka's own ``kafka-topics --describe`` from the resolved jars and
:func:`describe_partitions` reads its output, or ``livectl topics --describe``'s, into comparable facts;
:func:`kafka_reassignments` runs ``kafka-reassign-partitions --list`` and reads what it lists; :func:`kafka_tool`
runs any of Kafka's tools by its class (each with the client properties given: SASL, SSL);
:meth:`Cluster.admin` runs ``livectl``'s admin commands on the cluster.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName

from admin.cli import main as admin_main
from bench.harness.matrix import Matrix, create_topic, wait_until
from bench.harness.results import ROOT
from channel.wire import BrokerConnection
from core.codec.events import event_from_json
from core.events import AlterPartition, AlterPartitionRequest
from livectl import local
from livectl.kafka_server import kafka_classpath
from livectl.kafka_zk_brokers import ZkBrokerSettings, start_zk_broker, stop_zk_broker
from livectl.spawn import find_java, pid_matches

#: the partitions of the tests' topics
PARTITIONS = 3
#: kafka-topics.sh's class in Kafka 3.9 (formerly kafka.admin.TopicCommand), in the kafka-tools jar
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
#: kafka-reassign-partitions.sh's class in Kafka 3.9, in the kafka-tools jar
REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
#: the fields of a partition's line both tools print (Kafka's also prints ``Elr`` and ``LastKnownElr``, KRaft's)
PARTITION_FIELDS = ("Leader", "Replicas", "Isr", "Adding Replicas", "Removing Replicas", "Offline")
#: the fields of a topic's line both tools print
TOPIC_FIELDS = ("TopicId", "PartitionCount", "ReplicationFactor", "Configs")


class Cluster:
    """The controlled cluster: a ZooKeeper chroot, livectl's topics on the bus, the controller, the channel
    and the Kafka brokers (each started with ``settings``); ``channel_args``: more options of ``livectl channel``
    (its SSL, say)."""

    def __init__(
        self,
        zookeeper: str,
        bootstrap: str,
        work: Path,
        settings: ZkBrokerSettings,
        channel_args: Sequence[str] = (),
    ) -> None:
        self.m = Matrix(zookeeper, bootstrap, work)
        self.work = work
        self.settings = settings
        self.channel_args = tuple(channel_args)
        self.brokers: dict[int, local.Service] = {}
        self.channel: subprocess.Popen[bytes] | None = None
        self.channel_log = work / "channel.log"

    def open(self) -> None:
        self.m.open_services()

    def start_channel(self) -> None:
        m = self.m
        cmd = [sys.executable, "-m", "livectl", "channel", "--zookeeper", m.zk_connect]
        cmd += ["--bootstrap-server", m.bootstrap, "--group", f"{m.name}.channel"]
        cmd += ["--requests-topic", m.topics["requests"], "--events-topic", m.topics["events"], "--retry-s", "0.5"]
        cmd += ["--admin-topic", m.topics["admin"], "--admin-results-topic", m.topics["results"]]
        if self.settings.inter_broker_protocol:
            # the versions Kafka 3.9's controller sends brokers of that protocol
            cmd += ["--inter-broker-protocol", self.settings.inter_broker_protocol]
        cmd += self.channel_args
        with self.channel_log.open("ab") as out:
            self.channel = subprocess.Popen(
                cmd, cwd=str(ROOT), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def start_broker(self, broker_id: int) -> None:
        self.brokers[broker_id] = start_zk_broker(
            self.work / f"kafka-{broker_id}", broker_id, self.m.zk_connect, settings=self.settings
        )

    def start_brokers(self, broker_ids: Sequence[int]) -> None:
        """Start brokers ``broker_ids`` side by side (each waits for its own "started" line), then wait until
        ZooKeeper lists them — none of them having taken ``/controller`` from whoever held it before (livectl's
        controller) — and until livectl's controller sent each its UpdateMetadata through the channel
        (onBrokerStartup; it comes with the controller's first micro-batch, which starts Spark's Python
        workers: 27 s at load 16)."""
        held, _ = self.m.znode("/controller")
        with ThreadPoolExecutor(len(broker_ids)) as pool:
            list(pool.map(self.start_broker, broker_ids))
        wait_until("the Kafka brokers registered", lambda: set(self.m.registered_brokers()) == set(broker_ids), 60)
        assert self.m.znode("/controller")[0] == held, "a Kafka broker took /controller"
        wait_until(
            "an UpdateMetadata delivered to each broker",
            lambda: all(f"broker {b}: UpdateMetadata" in self.channel_log.read_text() for b in broker_ids),
            180,
        )

    def create_topic(self, request_id: str, topic: str, assignment: Mapping[int, tuple[int, ...]]) -> list[int]:
        """Create ``topic`` with ``assignment`` (partition -> replicas) through livectl's admin topic (admin
        command ``request_id``), check that livectl answered ``ok``, and wait until every partition has a
        leader among its replicas in ZooKeeper: the leaders, by partition."""
        create_topic(self.m, request_id, topic, assignment)
        final = wait_until(
            "the topic created",
            lambda: [r for r in self.m.results(request_id) if r["status"] != "in_progress"],
            60,
        )
        assert [r["status"] for r in final] == ["ok"], final

        def online() -> list[int] | None:
            leaders = [self.state(topic, p).get("leader", -1) for p in range(len(assignment))]
            return leaders if all(leaders[p] in assignment[p] for p in range(len(assignment))) else None

        leaders: list[int] = wait_until("every partition online", online, 60)
        return leaders

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL broker ``broker_id`` (a hard kill: no controlled shutdown) and wait until it is gone."""
        svc = self.brokers[broker_id]
        assert pid_matches(svc.pid, svc.marker), f"broker {broker_id} (pid {svc.pid}) is not running"
        os.kill(svc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while pid_matches(svc.pid, svc.marker):
            assert time.monotonic() < deadline, f"broker {broker_id} (pid {svc.pid}) still runs 30 s after SIGKILL"
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(svc.pid, os.WNOHANG)
            time.sleep(0.05)

    def close(self) -> None:
        if self.channel is not None:
            self.channel.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.channel.wait(15)
            if self.channel.poll() is None:
                self.channel.kill()
                self.channel.wait(5)
        for svc in self.brokers.values():
            stop_zk_broker(svc, timeout=0)
        self.m.close(at_once=True)

    def admin(self, *argv: str) -> tuple[int, str]:
        """``livectl ARGV`` (an admin command, ``topics --describe --topic T`` say) on this cluster, run in this
        process: its exit code and what it printed."""
        m = self.m
        full = [*argv, "--zookeeper", m.zk_connect, "--bootstrap-server", m.bootstrap]
        full += ["--admin-topic", m.topics["admin"], "--admin-results-topic", m.topics["results"]]
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                rc = admin_main(full)
            except SystemExit as e:
                rc = int(e.code or 0)
        return rc, out.getvalue()

    def bootstrap(self, listener: str | None = None) -> str:
        """The running brokers' addresses on ``listener`` (default: the clients')."""
        return ",".join(
            svc.listeners[listener] if listener else svc.address
            for bid, svc in sorted(self.brokers.items())
            if svc.running()
        )

    def state(self, topic: str, partition: int) -> dict[str, Any]:
        znode, _ = self.m.znode(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return znode or {}

    def isr_proposals(self, topic: str) -> list[AlterPartition]:
        """The brokers' ISR proposals for ``topic`` on broker-events, in order (the channel writes each broker's
        AlterPartition request as one record: its partitions in turn)."""
        out: list[AlterPartition] = []
        for _, e in self.events():
            if e.get("type") in (AlterPartition.TYPE, AlterPartitionRequest.TYPE):
                ev = event_from_json(json.dumps(e))
                each = ev.proposals() if isinstance(ev, AlterPartitionRequest) else (ev,)
                out += [p for p in each if isinstance(p, AlterPartition) and p.topic == topic]
        return out

    def events(self) -> list[tuple[bytes, dict[str, Any]]]:
        """Every record on livectl's broker-events topic up to its end as of now: (key, JSON value)."""
        consumer = KafkaConsumer(
            bootstrap_servers=self.m.bootstrap, enable_auto_commit=False, group_id=None, consumer_timeout_ms=3000
        )
        try:
            parts = consumer.partitions_for_topic(self.m.topics["events"]) or {0}
            tps = [KafkaTopicPartition(self.m.topics["events"], p) for p in parts]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            # up to the end as of now: the controller keeps writing its own events (the auto-rebalance ticks),
            # so the topic never goes quiet for the consumer's timeout
            ends = consumer.end_offsets(tps)
            out: list[tuple[bytes, dict[str, Any]]] = []
            deadline = time.monotonic() + 60
            while any(consumer.position(tp) < ends[tp] for tp in tps):
                assert time.monotonic() < deadline, f"broker-events not read to {ends} in 60 s"
                for tp, records in consumer.poll(timeout_ms=1000).items():
                    # keyed by broker id, or by what else wrote it (the controller's own events)
                    out.extend((r.key, json.loads(r.value)) for r in records if r.offset < ends[tp])
            return out
        finally:
            consumer.close()


@contextlib.contextmanager
def running_cluster(
    zookeeper: str, bootstrap: str, work: Path, settings: ZkBrokerSettings, channel_args: Sequence[str] = ()
) -> Iterator[Cluster]:
    """A :class:`Cluster` opened in ``work`` (nothing started in it yet), closed at the end whatever happened."""
    c = Cluster(zookeeper, bootstrap, work, settings, channel_args)
    c.open()
    try:
        yield c
    finally:
        c.close()


def kafka_tool(
    tool: str,
    main_class: str,
    args: list[str],
    *,
    api_timeout_ms: int,
    timeout: float,
    work: Path | None,
    client: Mapping[str, str] | None = None,
) -> str:
    """What Kafka's tool ``main_class`` prints with ``args``, run from the jars ``scripts/setup`` resolved, each
    Admin call given up after ``api_timeout_ms`` (``default.api.timeout.ms``, in a ``--command-config`` file
    written in ``work``, with the client properties ``client`` too: its SASL or SSL, say). Raises
    :class:`RuntimeError` with what it printed when it exits non-zero."""
    with tempfile.TemporaryDirectory(dir=work) as folder:
        config = Path(folder) / "admin.properties"
        request_ms = min(api_timeout_ms, 30_000)
        props = {"default.api.timeout.ms": str(api_timeout_ms), "request.timeout.ms": str(request_ms), **(client or {})}
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        config.chmod(0o600)
        cmd = [find_java(), "-Xmx128m", "-cp", kafka_classpath(), main_class, "--command-config", str(config)]
        done = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{tool} exited {done.returncode}: {done.stdout[-2000:]}")
    return done.stdout


def kafka_topics_describe(
    bootstrap: str,
    topic: str,
    *,
    api_timeout_ms: int = 60_000,
    timeout: float = 180,
    work: Path | None = None,
    client: Mapping[str, str] | None = None,
) -> str:
    """What Kafka's own ``kafka-topics.sh --bootstrap-server BOOTSTRAP --describe --topic TOPIC`` prints (its
    Admin client asks the brokers' metadata and configs, and the controller the reassignments); see
    :func:`kafka_tool`."""
    args = ["--bootstrap-server", bootstrap, "--describe", "--topic", topic]
    return kafka_tool(
        "kafka-topics --describe",
        TOPIC_COMMAND,
        args,
        api_timeout_ms=api_timeout_ms,
        timeout=timeout,
        work=work,
        client=client,
    )


def kafka_reassignments(
    bootstrap: str,
    *,
    api_timeout_ms: int = 60_000,
    timeout: float = 180,
    work: Path | None = None,
    client: Mapping[str, str] | None = None,
) -> dict[str, dict[str, str]]:
    """The reassignments Kafka's own ``kafka-reassign-partitions.sh --bootstrap-server BOOTSTRAP --list`` lists
    (its Admin client asks the controller ListPartitionReassignments): ``{"<topic>-<partition>": {"replicas":
    "2,3,1", "adding": "3", "removing": "1"}}`` (a list it does not print is absent; ``{}`` for "No partition
    reassignments found."); see :func:`kafka_tool`."""
    text = kafka_tool(
        "kafka-reassign-partitions --list",
        REASSIGN_COMMAND,
        ["--bootstrap-server", bootstrap, "--list"],
        api_timeout_ms=api_timeout_ms,
        timeout=timeout,
        work=work,
        client=client,
    )
    if "No partition reassignments found." in text:
        return {}
    if "Current partition reassignments:" not in text:
        raise RuntimeError(f"kafka-reassign-partitions --list printed neither list nor none: {text[-2000:]}")
    out: dict[str, dict[str, str]] = {}
    for line in text.split("Current partition reassignments:", 1)[1].splitlines():
        name, sep, rest = line.strip().partition(": ")
        if sep:
            fields = (f.strip().partition(": ") for f in rest.rstrip(".").split(". "))
            out[name] = {k: v for k, _, v in fields}
    return out


def describe_partitions(text: str) -> dict[str, Any]:
    """The facts of a ``--describe`` output of one topic, as both Kafka's tool and livectl's print them:
    ``{"topic": {field: value}, "partitions": {partition: {field: value}}}`` with the fields of
    :data:`TOPIC_FIELDS` and :data:`PARTITION_FIELDS` the line has (a field a line lacks is absent)."""
    topic: dict[str, str] = {}
    partitions: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        pairs = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        if "Partition" in pairs:
            partitions[int(pairs["Partition"])] = {k: v for k, v in pairs.items() if k in PARTITION_FIELDS}
        elif "PartitionCount" in pairs:
            topic = {k: v for k, v in pairs.items() if k in TOPIC_FIELDS}
    return {"topic": topic, "partitions": partitions}


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = PARTITIONS) -> None:
    """Every value acknowledged with ``acks=all`` (round robin over the partitions), or an error."""
    # idempotent (kafka-python's default): the brokers' AllocateProducerIds must be answered; max_block_ms: a
    # hang fails the test instead
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        retries=10,
        request_timeout_ms=15_000,
        max_block_ms=30_000,
    )
    try:
        futures = [producer.send(topic, value=v, partition=i % partitions) for i, v in enumerate(values)]
        for f in futures:
            f.get(timeout=30)
    finally:
        producer.close()


def consume(bootstrap: str, topic: str, partitions: int = PARTITIONS, timeout: float = 60) -> list[bytes]:
    """Every record of ``topic`` from the beginning to the end offsets (high watermarks) as of the call: each
    record acknowledged with ``acks=all`` before it. No idle timeout: it ends when it is there."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=15_000)
    try:
        tps = [KafkaTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{topic} not read to {ends} in {timeout:.0f} s"
            for tp, records in consumer.poll(timeout_ms=1000).items():
                out.extend(r.value for r in records if r.offset < ends[tp])
        return out
    finally:
        consumer.close()


def metadata(bootstrap: str, topic: str) -> Any:
    """The first broker of ``bootstrap``'s MetadataResponse for ``topic``."""
    host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        return conn.send(
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
                include_topic_authorized_operations=False,
            ),
            MetadataResponse,
        )


def kafka_view(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, ISR) as a broker's own metadata says (Kafka's view, not livectl's), asked with a
    MetadataRequest."""
    answer = metadata(bootstrap, topic)
    (described,) = answer.topics
    return {
        int(p.partition_index): (int(p.leader_id), sorted(int(i) for i in p.isr_nodes)) for p in described.partitions
    }
