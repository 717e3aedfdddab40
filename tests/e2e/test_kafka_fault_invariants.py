"""Kafka's own fault tests on real brokers under livectl (issue 42, item 3): the invariants of Kafka's system
tests ``replication_test.py``, ``reassign_partitions_test.py`` and ``reassign_cancel_test.py`` on three
Apache Kafka 3.9.2 brokers in ZooKeeper mode that livectl's controller runs through ``livectl channel``.

Real processes only, one cluster for the module (:func:`bench.harness.real_brokers.running_cluster`): the
session's ZooKeeper (a chroot) and Kafka bus, ``livectl run`` (started first: it holds ``/controller``, with a
standby waiting for the controller's bounces, both ``take_over_from_kafka``), ``livectl channel`` and three
Kafka brokers. Each test creates a topic of its own through ``livectl topics --create`` with
``min.insync.replicas=2`` and runs a producer with ``acks=all`` and a consumer reading every partition from
the beginning (:class:`livectl.demo.traffic.Traffic`) through its faults; at its end every acknowledged
record was consumed, and Kafka's own ``kafka-topics --describe`` (its class from the resolved jars, bootstrapped
from the brokers' inter-broker listener) and ``livectl topics --describe`` agree line for line on the topic, its
partitions' leaders, replicas and ISRs. A test of its own runs Kafka's tools as a client does, on the clients'
listener, where the controller's node is the channel's endpoint: ``kafka-topics --describe`` and
``kafka-reassign-partitions --list`` before, during and after a reassignment livectl runs.

* a controlled shutdown (SIGTERM): livectl moves the broker's leaderships and takes it out of every ISR while
  it is still registered, answers its first attempt, and it exits; started again, it rejoins every ISR;
* a hard-killed broker (SIGKILL): its partitions get new leaders from their ISRs; started again, it rejoins;
* a reassignment of 20 partitions (replicas added and moved, under a throttle) with a broker bounced during it
  completes: the target replicas, whole ISRs, the throttles cleared, the old replicas deleted, nothing lost;
* a reassignment throttled so that it cannot finish, cancelled: the original assignment back, the adding
  replicas deleted, the throttles cleared, nothing lost;
* clean and hard bounces of partition leaders and of livectl's controller (SIGTERM, then SIGKILL of the
  active one with a standby waiting), records flowing after each.

With three brokers a partition of replication factor 3 already has them all: the reassignments start from
replication factor 2 (Kafka's own tests run four brokers) and the first takes half its partitions to 3.
Kafka's and livectl's automatic leader rebalance are off, so that only the faults move leaders.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench import harness as cm
from bench.harness.real_brokers import (
    Cluster,
    consume,
    describe_partitions,
    kafka_reassignments,
    kafka_topics_describe,
    kafka_view,
    metadata,
    produce,
    running_cluster,
)
from livectl import local
from livectl.demo.traffic import Traffic
from livectl.kafka_zk_brokers import CLIENT_LISTENER, INTER_BROKER_LISTENER, ZkBrokerSettings, stop_zk_broker

pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)

BROKERS = (1, 2, 3)
BROKER_SETTINGS = ZkBrokerSettings(properties={"auto.leader.rebalance.enable": "false"})
#: every livectl controller of the module; ``take_over_from_kafka``: a standby wins the re-election a broker races
LIVECTL = {"auto_leader_rebalance_enable": False, "take_over_from_kafka": True}
MIN_ISR = 2
#: records a second the producer writes, round robin over the topic's partitions
RATE = 40.0
READY = "ready to take /controller from a Kafka broker elected from now on"
SHUTDOWN_OK = "Controlled shutdown request returned successfully"
SHUTDOWN_RETRY = ("Retrying controlled shutdown", "unclean shutdown")
THROTTLE_KEYS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
)


@dataclass
class Faults:
    """The module's cluster, the livectl controller that holds ``/controller`` and its waiting standby."""

    cluster: Cluster
    controller: cm.ControllerProcess
    standby: cm.ControllerProcess | None

    def admin(self, *argv: str) -> tuple[int, str]:
        """``livectl ARGV`` (the admin commands) on this cluster: its exit code and what it printed."""
        return self.cluster.admin(*argv)


@pytest.fixture(scope="module")
def faults(
    zookeeper: local.Service, kafka_broker: local.Service, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Faults]:
    work = tmp_path_factory.mktemp("kafka-faults")
    with running_cluster(zookeeper.connect, kafka_broker.bootstrap, work, BROKER_SETTINGS) as c:
        m = c.m
        started = time.monotonic()
        active = m.start_controller(LIVECTL)
        c.start_channel()
        m.wait_loaded(active, timeout=240)
        held, _ = m.znode("/controller")
        assert held is not None and held["brokerid"] == active.controller_id
        standby = m.start_controller(LIVECTL)  # for the controller's bounces: its Spark starts beside the brokers
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
        yield Faults(c, active, standby)


# ---------------------------------------------------------------------- helpers


def _ints(xs: Any) -> str:
    return ",".join(str(x) for x in xs)


def _rotated(partitions: int, rf: int) -> dict[int, tuple[int, ...]]:
    """partition -> ``rf`` replicas, the preferred leaders rotating over the brokers."""
    return {p: tuple(BROKERS[(p + i) % len(BROKERS)] for i in range(rf)) for p in range(partitions)}


def _whole(c: Cluster) -> None:
    """Every broker running and registered (a test that failed half-way may have left one down)."""
    for b in BROKERS:
        if b not in c.brokers or not c.brokers[b].running():
            log.info("broker %s was down at the start of the test: started again", b)
            c.start_broker(b)
    cm.wait_until("the three brokers registered", lambda: set(c.m.registered_brokers()) == set(BROKERS), 60)


def _states(c: Cluster, topic: str, count: int) -> dict[int, dict[str, Any]]:
    return {p: c.state(topic, p) for p in range(count)}


def _create(f: Faults, topic: str, assignment: Mapping[int, tuple[int, ...]]) -> None:
    """``livectl topics --create`` with ``assignment`` and ``min.insync.replicas``; until every partition is led
    by its preferred replica with a whole ISR, and the brokers agree (:func:`_agree`)."""
    spec = ",".join(":".join(str(b) for b in assignment[p]) for p in sorted(assignment))
    rc, out = f.admin(
        "topics",
        "--create",
        "--topic",
        topic,
        "--replica-assignment",
        spec,
        "--config",
        f"min.insync.replicas={MIN_ISR}",
    )
    assert rc == 0, out
    c = f.cluster
    cm.wait_until(
        f"{topic} online, each partition led by its preferred replica with a whole ISR",
        lambda: all(
            c.state(topic, p).get("leader") == r[0] and sorted(c.state(topic, p)["isr"]) == sorted(r)
            for p, r in assignment.items()
        ),
        120,
    )
    _agree(f, topic, assignment)


def _agree(
    f: Faults,
    topic: str,
    assignment: Mapping[int, tuple[int, ...]],
    *,
    listener: str = INTER_BROKER_LISTENER,
    timeout: float = 120,
) -> dict[str, Any]:
    """Until Kafka's ``kafka-topics --describe`` (bootstrapped from the running brokers' ``listener``) and
    ``livectl topics --describe`` (ZooKeeper) print the same facts of ``topic``; those facts are then the whole
    ``assignment``: its replicas, every replica in the ISR, the leader one of them, ``min.insync.replicas`` the
    only config, nothing being reassigned. Kafka's tool asks the controller's node, the channel's endpoint, for
    the reassignments (ListPartitionReassignments) on either listener."""
    last: dict[str, Any] = {}

    def same() -> dict[str, Any] | None:
        try:
            text = kafka_topics_describe(f.cluster.bootstrap(listener), topic, api_timeout_ms=20_000)
        except RuntimeError as e:
            log.info("%s: Kafka's tool failed on the %s listener: %s", topic, listener, e)
            last["kafka"] = str(e)
            return None
        kafka = describe_partitions(text)
        rc, out = f.admin("topics", "--describe", "--topic", topic)
        assert rc == 0, out
        ours = describe_partitions(out)
        last.update(kafka=kafka, livectl=ours)
        return kafka if kafka == ours and len(kafka["partitions"]) == len(assignment) else None

    try:
        facts: dict[str, Any] = cm.wait_until(f"the two --describe agreeing on {topic}", same, timeout, interval=2)
    except cm.MatrixError:
        raise AssertionError(f"kafka-topics and livectl disagree on {topic}: {last}") from None
    assert facts["topic"]["PartitionCount"] == str(len(assignment)), facts
    assert facts["topic"]["Configs"] == f"min.insync.replicas={MIN_ISR}", facts
    for p, replicas in assignment.items():
        line = facts["partitions"][p]
        assert line["Replicas"] == _ints(replicas), (p, line)
        assert sorted(line["Isr"].split(",")) == sorted(str(r) for r in replicas), (p, line)
        assert int(line["Leader"]) in replicas, (p, line)
        assert not ({"Adding Replicas", "Removing Replicas", "Offline"} & set(line)), (p, line)
    log.info("%s: kafka-topics --describe and livectl topics --describe agree: %s", topic, facts)
    return facts


@contextlib.contextmanager
def _traffic(f: Faults, topic: str, partitions: int) -> Iterator[Traffic]:
    t = Traffic(",".join(f.cluster.brokers[b].address for b in BROKERS), {topic: partitions}, RATE)
    t.start()
    try:
        yield t
    finally:
        t.close()


def _flowing(t: Traffic, what: str, records: int = 20) -> None:
    """Until ``records`` more records are acknowledged (``acks=all``) after ``what``."""
    since = t.counts()
    cm.wait_until(f"{records} records acknowledged after {what}", lambda: t.acknowledged_since(since) >= records, 90)


def _all_consumed(t: Traffic) -> None:
    """The producer stops; every record it had acknowledged is consumed (Kafka's tests' ``validate``)."""
    t.stop_producing()
    cm.wait_until("every acknowledged record consumed", lambda: not t.not_consumed(), 120, interval=1)
    counts = t.counts()
    lost = t.not_consumed()
    assert not lost, f"{len(lost)} acknowledged records never consumed, e.g. {lost[:5]}"
    assert counts.acknowledged > 0, counts
    failed = t.failures()
    log.info("records: %s; not acknowledged (the producer gave up): %s", counts.text(), sorted(failed.items())[:3])


def _stop_cleanly(c: Cluster, broker: int) -> float:
    """SIGTERM ``broker``: Kafka's controlled shutdown, answered by livectl at the first attempt; the seconds it
    took to exit."""
    svc = c.brokers[broker]
    start_at = Path(svc.log).stat().st_size
    started = time.monotonic()
    assert stop_zk_broker(svc, timeout=60), f"broker {broker} was not running"
    took = time.monotonic() - started
    with open(svc.log, "rb") as fh:
        fh.seek(start_at)
        text = fh.read().decode(errors="replace")
    assert SHUTDOWN_OK in text, f"broker {broker}: no controlled shutdown in {svc.log}"
    assert not [x for x in SHUTDOWN_RETRY if x in text], f"broker {broker}: its first attempt was not answered"
    log.info("broker %s stopped by its controlled shutdown in %.1f s", broker, took)
    return took


def _gone(c: Cluster, broker: int) -> None:
    cm.wait_until(f"broker {broker} gone from ZooKeeper", lambda: broker not in c.m.registered_brokers(), 30)


def _rejoined(c: Cluster, topic: str, broker: int, assignment: Mapping[int, tuple[int, ...]]) -> None:
    """Until ``broker`` is back in the ISR of every partition it has a replica of."""
    cm.wait_until(
        f"broker {broker} back in every ISR of {topic}",
        lambda: all(broker in c.state(topic, p)["isr"] for p, r in assignment.items() if broker in r),
        120,
    )


def _kafka_serves_zookeeper(c: Cluster, topic: str, count: int) -> None:
    """Until each running broker's metadata has the leaders and ISRs livectl wrote in ZooKeeper."""

    def served() -> bool:
        zk = {p: (st["leader"], sorted(st["isr"])) for p, st in _states(c, topic, count).items()}
        return all(kafka_view(svc.address, topic) == zk for svc in c.brokers.values() if svc.running())

    cm.wait_until(f"every running broker serving ZooKeeper's leaders and ISRs of {topic}", served, 60)


def _config(c: Cluster, path: str) -> dict[str, str]:
    znode, _ = c.m.znode(path)
    return dict((znode or {}).get("config", {}))


def _no_throttles(c: Cluster, topic: str) -> bool:
    left = {k for k in THROTTLE_KEYS if k in _config(c, f"/config/topics/{topic}")}
    for b in BROKERS:
        left |= {f"{b}:{k}" for k in THROTTLE_KEYS if k in _config(c, f"/config/brokers/{b}")}
    return not left


def _hosts(c: Cluster, broker: int, topic: str, partition: int) -> bool:
    """Whether ``broker``'s log directory has the partition's replica (a deleted one is renamed ``*-delete``)."""
    return (Path(c.brokers[broker].data_dir) / f"{topic}-{partition}").is_dir()


def _reassignment_file(path: Path, topic: str, target: Mapping[int, tuple[int, ...]]) -> Path:
    doc = {
        "version": 1,
        "partitions": [{"topic": topic, "partition": p, "replicas": list(r)} for p, r in target.items()],
    }
    path.write_text(json.dumps(doc))
    return path


def _preload(c: Cluster, topic: str, partitions: int, per_partition: int, size: int) -> list[bytes]:
    """``per_partition`` records of ``size`` bytes in each partition, acknowledged with ``acks=all``: data for a
    reassignment to move."""
    values = [f"{topic}:preload:{i}:".encode().ljust(size, b"x") for i in range(partitions * per_partition)]
    produce(c.bootstrap(), topic, values, partitions)
    return values


def _controller_obeyed(f: Faults, topic: str, cid: int) -> None:
    """Until ``cid`` holds ``/controller`` and every running broker names it as its controller."""
    c = f.cluster

    def obeyed() -> bool:
        held, _ = c.m.znode("/controller")
        if held is None or held["brokerid"] != cid:
            return False
        return all(
            int(metadata(svc.address, topic).controller_id) == cid for svc in c.brokers.values() if svc.running()
        )

    cm.wait_until(f"controller {cid} holding /controller and named by every broker", obeyed, 120)


# ---------------------------------------------------------------------- the cases


def test_kafka_topics_describe_on_the_clients_listener(faults: Faults, tmp_path: Path) -> None:
    """Kafka's ``kafka-topics --describe`` and ``kafka-reassign-partitions --list`` as a client runs them, on the
    brokers' client listener, where the controller's node is the channel's endpoint: they agree with livectl
    before, during and after a reassignment livectl runs (until issue 42's fix, ``kafka-topics --describe`` timed
    out there on ListPartitionReassignments, sent to a controller clients could not reach)."""
    f, c = faults, faults.cluster
    _whole(c)
    topic, count = f"{c.m.name}-described", 3
    origin = _rotated(count, 2)
    _create(f, topic, origin)
    client = c.bootstrap()
    started = time.monotonic()
    _agree(f, topic, origin, listener=CLIENT_LISTENER, timeout=60)
    log.info("kafka-topics --describe on the clients' listener agreed in %.1f s", time.monotonic() - started)
    assert kafka_reassignments(client, api_timeout_ms=20_000) == {}

    # a replica added to each partition at 1 B/s: more than a follower's first fetch (1 MiB) preloaded, so the
    # new replicas stay behind until the throttle is lifted
    third = {p: next(b for b in BROKERS if b not in r) for p, r in origin.items()}
    target = {p: (*r, third[p]) for p, r in origin.items()}
    preloaded = _preload(c, topic, count, 300, 4096)
    plan = _reassignment_file(tmp_path / "reassign.json", topic, target)
    rc, out = f.admin("reassign", "--execute", "--reassignment-json-file", str(plan), "--throttle", "1")
    assert rc == 0, out
    expected = {f"{topic}-{p}": {"replicas": _ints(target[p]), "adding": str(third[p])} for p in range(count)}
    listed: dict[str, Any] = {}

    def listing() -> bool:
        try:
            listed["kafka"] = kafka_reassignments(client, api_timeout_ms=20_000)
        except RuntimeError as e:
            listed["kafka"] = str(e)
        return bool(listed["kafka"] == expected)

    started = time.monotonic()
    try:
        cm.wait_until("kafka-reassign-partitions --list listing livectl's reassignment", listing, 90, interval=2)
    except cm.MatrixError:
        raise AssertionError(f"kafka-reassign-partitions --list: {listed}, expected {expected}") from None
    log.info("kafka-reassign-partitions --list listed the reassignment after %.1f s", time.monotonic() - started)
    znode, _ = c.m.znode(f"/brokers/topics/{topic}")
    assert znode is not None
    assert {int(p): tuple(r) for p, r in znode["adding_replicas"].items()} == {p: (third[p],) for p in range(count)}
    # kafka-topics --describe there shows it too, as livectl's --describe does
    kafka = describe_partitions(kafka_topics_describe(client, topic, api_timeout_ms=20_000))
    rc, out = f.admin("topics", "--describe", "--topic", topic)
    assert rc == 0, out
    ours = describe_partitions(out)
    for p in range(count):
        moving = {k: kafka["partitions"][p].get(k) for k in ("Replicas", "Adding Replicas")}
        assert moving == {"Replicas": _ints(target[p]), "Adding Replicas": str(third[p])}, kafka
        assert moving == {k: ours["partitions"][p].get(k) for k in moving}, (kafka, ours)

    # the throttle lifted (--additional resubmits the same reassignment): it completes, and the list empties
    rc, out = f.admin(
        "reassign", "--execute", "--additional", "--reassignment-json-file", str(plan), "--throttle", "100000000"
    )
    assert rc == 0, out

    def verify() -> bool:
        rc, out = f.admin("reassign", "--verify", "--reassignment-json-file", str(plan))
        assert rc in (0, 3), out
        return rc == 0

    cm.wait_until("livectl reassign --verify saying the reassignment is complete", verify, 180, interval=3)
    assert kafka_reassignments(client, api_timeout_ms=20_000) == {}
    _agree(f, topic, target, listener=CLIENT_LISTENER, timeout=60)
    assert not set(preloaded) - set(consume(client, topic, count)), "preloaded records lost"


def test_controlled_shutdown_moves_leadership_first(faults: Faults) -> None:
    f, c = faults, faults.cluster
    _whole(c)
    topic, count = f"{c.m.name}-shutdown", 6
    assignment = _rotated(count, 3)
    _create(f, topic, assignment)
    with _traffic(f, topic, count) as t:
        _flowing(t, "the start")
        stopping = c.state(topic, 0)["leader"]
        led = [p for p in range(count) if c.state(topic, p)["leader"] == stopping]
        before = _states(c, topic, count)
        asked_before = sum(1 for _, e in c.events() if e.get("type") == "controlled_shutdown")
        # what ZooKeeper says while the broker stops: (registered, it leads something, it is in some ISR)
        samples: list[tuple[bool, bool, bool]] = []
        done, sampled = threading.Event(), threading.Event()

        def watch() -> None:
            while not done.is_set():
                registered = stopping in c.m.registered_brokers()
                states = list(_states(c, topic, count).values())
                leads = any(st["leader"] == stopping for st in states)
                samples.append((registered, leads, any(stopping in st["isr"] for st in states)))
                sampled.set()
                done.wait(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        assert sampled.wait(60), "the watcher never read ZooKeeper"  # its first look is from before the stop
        try:
            took = _stop_cleanly(c, stopping)
            _gone(c, stopping)
        finally:
            done.set()
            watcher.join(10)
        # leadership first: a moment when the broker was still registered, led nothing and was in no ISR
        assert (True, False, False) in samples, samples[-20:]
        # Kafka's retry path alone (3 attempts 5 s apart) takes longer
        assert took < 20, took
        asked = [e for _, e in c.events() if e.get("type") == "controlled_shutdown"]
        assert len(asked) > asked_before and asked[-1]["broker_id"] == stopping, asked
        for p in led:
            st = c.state(topic, p)
            assert st["leader"] in before[p]["isr"] and st["leader_epoch"] > before[p]["leader_epoch"], (p, st)
        _kafka_serves_zookeeper(c, topic, count)
        _flowing(t, f"broker {stopping}'s controlled shutdown")
        c.start_broker(stopping)
        _rejoined(c, topic, stopping, assignment)
        _flowing(t, f"broker {stopping}'s return")
        _all_consumed(t)
    _agree(f, topic, assignment)


def test_hard_killed_broker_gets_new_leaders_and_rejoins(faults: Faults) -> None:
    f, c = faults, faults.cluster
    _whole(c)
    topic, count = f"{c.m.name}-killed", 6
    assignment = _rotated(count, 3)
    _create(f, topic, assignment)
    with _traffic(f, topic, count) as t:
        _flowing(t, "the start")
        victim = c.state(topic, 1)["leader"]
        before = _states(c, topic, count)
        led = [p for p in range(count) if before[p]["leader"] == victim]
        killed = time.monotonic()
        c.kill_broker(victim)
        _gone(c, victim)
        cm.wait_until(
            f"new leaders for broker {victim}'s partitions, it out of every ISR",
            lambda: all(
                st["leader"] not in (victim, -1) and victim not in st["isr"] for st in _states(c, topic, count).values()
            ),
            60,
        )
        log.info("broker %s SIGKILLed: new leaders in ZooKeeper after %.1f s", victim, time.monotonic() - killed)
        for p in led:
            st = c.state(topic, p)
            assert st["leader"] in before[p]["isr"] and st["leader_epoch"] > before[p]["leader_epoch"], (p, st)
        _kafka_serves_zookeeper(c, topic, count)
        _flowing(t, f"broker {victim}'s hard kill")
        c.start_broker(victim)
        _rejoined(c, topic, victim, assignment)
        _flowing(t, f"broker {victim}'s return")
        _all_consumed(t)
    _agree(f, topic, assignment)


def test_reassignment_of_20_partitions_with_a_broker_bounced(faults: Faults, tmp_path: Path) -> None:
    f, c = faults, faults.cluster
    _whole(c)
    topic, count = f"{c.m.name}-moved", 20
    origin = _rotated(count, 2)
    _create(f, topic, origin)
    # even partitions get the broker they lack (replication factor 3), odd ones move their leader's replica to it
    third = {p: next(b for b in BROKERS if b not in r) for p, r in origin.items()}
    target = {p: (*r, third[p]) if p % 2 == 0 else (r[1], third[p]) for p, r in origin.items()}
    preloaded = _preload(c, topic, count, 100, 2048)
    plan = _reassignment_file(tmp_path / "reassign.json", topic, target)
    bounced = BROKERS[-1]
    with _traffic(f, topic, count) as t:
        _flowing(t, "the start")
        started = time.monotonic()
        rc, out = f.admin("reassign", "--execute", "--reassignment-json-file", str(plan), "--throttle", "100000")
        assert rc == 0, out
        znode = cm.wait_until(
            "the reassignment running (adding replicas in the topic's znode)",
            lambda: (z := c.m.znode(f"/brokers/topics/{topic}")[0]) is not None and z.get("adding_replicas") and z,
            30,
        )
        moving = sorted(int(p) for p in znode["adding_replicas"])
        log.info("reassignment running (%d partitions adding a replica); bouncing broker %s", len(moving), bounced)
        _stop_cleanly(c, bounced)
        c.start_broker(bounced)
        verified: list[str] = []

        def verify() -> bool:
            rc, out = f.admin("reassign", "--verify", "--reassignment-json-file", str(plan))
            assert rc in (0, 3), out
            verified[:] = [out]
            return rc == 0

        cm.wait_until("livectl reassign --verify saying the reassignment is complete", verify, 300, interval=3)
        log.info("reassignment of %d partitions complete after %.1f s", count, time.monotonic() - started)
        znode, _ = c.m.znode(f"/brokers/topics/{topic}")
        assert znode is not None
        assert {int(p): tuple(r) for p, r in znode["partitions"].items()} == target, znode
        assert not znode.get("adding_replicas") and not znode.get("removing_replicas"), znode
        assert c.m.znode("/admin/reassign_partitions")[0] is None
        cm.wait_until(
            "every ISR the whole target",
            lambda: all(sorted(c.state(topic, p)["isr"]) == sorted(r) for p, r in target.items()),
            120,
        )
        assert _no_throttles(c, topic), "the throttles stayed after --verify found the reassignment complete"
        # the replicas moved away are deleted from their brokers (StopReplica with deletion)
        cm.wait_until(
            "the old replicas deleted, the new ones hosted",
            lambda: all(
                _hosts(c, b, topic, p) == (b in target[p]) for p in range(count) for b in BROKERS if b in c.brokers
            ),
            90,
        )
        _flowing(t, "the reassignment")
        _all_consumed(t)
    assert not set(preloaded) - set(consume(c.bootstrap(), topic, count)), "preloaded records lost"
    _agree(f, topic, target)


def test_throttled_reassignment_cancelled_returns_the_original_assignment(faults: Faults, tmp_path: Path) -> None:
    f, c = faults, faults.cluster
    _whole(c)
    topic, count = f"{c.m.name}-cancelled", 6
    origin = _rotated(count, 2)
    _create(f, topic, origin)
    third = {p: next(b for b in BROKERS if b not in r) for p, r in origin.items()}
    target = {p: (*r, third[p]) for p, r in origin.items()}
    # more than a follower's first fetch (replica.fetch.max.bytes, 1 MiB) in each partition: at 1 B/s the
    # throttled new replicas never catch up
    preloaded = _preload(c, topic, count, 600, 4096)
    plan = _reassignment_file(tmp_path / "reassign.json", topic, target)
    with _traffic(f, topic, count) as t:
        _flowing(t, "the start")
        rc, out = f.admin("reassign", "--execute", "--reassignment-json-file", str(plan), "--throttle", "1")
        assert rc == 0, out
        cm.wait_until(
            "the new replicas created on their brokers",
            lambda: all(_hosts(c, third[p], topic, p) for p in range(count)),
            60,
        )
        time.sleep(5)  # the throttled followers fetch what they may
        znode, _ = c.m.znode(f"/brokers/topics/{topic}")
        assert znode is not None
        assert {int(p): tuple(r) for p, r in znode["adding_replicas"].items()} == {
            p: (third[p],) for p in range(count)
        }, znode
        assert all(third[p] not in c.state(topic, p)["isr"] for p in range(count)), _states(c, topic, count)
        rc, out = f.admin("reassign", "--cancel", "--reassignment-json-file", str(plan))
        assert rc == 0, out
        assert "Successfully cancelled partition reassignments" in out, out

        def restored() -> bool:
            znode, _ = c.m.znode(f"/brokers/topics/{topic}")
            return (
                znode is not None
                and {int(p): tuple(r) for p, r in znode["partitions"].items()} == origin
                and not znode.get("adding_replicas")
                and not znode.get("removing_replicas")
                and c.m.znode("/admin/reassign_partitions")[0] is None
            )

        cm.wait_until("the original assignment back in ZooKeeper", restored, 60)
        assert _no_throttles(c, topic), "the throttles stayed after --cancel"
        cm.wait_until(
            "the cancelled replicas deleted from their brokers",
            lambda: not any(_hosts(c, third[p], topic, p) for p in range(count)),
            90,
        )
        for p, r in origin.items():
            st = c.state(topic, p)
            assert st["leader"] in r and sorted(st["isr"]) == sorted(r), (p, st)
        _flowing(t, "the cancellation")
        _all_consumed(t)
    assert not set(preloaded) - set(consume(c.bootstrap(), topic, count)), "preloaded records lost"
    _agree(f, topic, origin)


def test_clean_and_hard_bounces_of_leaders_and_of_the_controller(faults: Faults) -> None:
    f, c = faults, faults.cluster
    m = c.m
    _whole(c)
    topic, count = f"{m.name}-bounced", 6
    assignment = _rotated(count, 3)
    _create(f, topic, assignment)
    zk = m.zk
    assert f.standby is not None and zk is not None
    with _traffic(f, topic, count) as t:
        _flowing(t, "the start")
        # livectl's controller, clean bounce: SIGTERM with its standby waiting
        old, new = f.controller, f.standby
        cm.wait_until("the standby ready", lambda: READY in new.text(), 240)
        epoch = int(zk.get("/controller_epoch")[0])
        started = time.monotonic()
        old.stop()
        _controller_obeyed(f, topic, new.controller_id)
        m.wait_loaded(new, timeout=120)
        assert int(zk.get("/controller_epoch")[0]) > epoch
        log.info("controller %s SIGTERMed: %s obeyed after %.1f s", old.controller_id, new.controller_id,
                 time.monotonic() - started)  # fmt: skip
        f.controller, f.standby = new, m.start_controller(LIVECTL)  # the next standby starts beside the bounces
        _flowing(t, "the controller's clean bounce")
        # a partition leader, clean bounce
        leader = c.state(topic, 0)["leader"]
        _stop_cleanly(c, leader)
        _gone(c, leader)
        c.start_broker(leader)
        _rejoined(c, topic, leader, assignment)
        _flowing(t, f"leader {leader}'s clean bounce")
        # a partition leader, hard bounce
        leader = c.state(topic, 1)["leader"]
        c.kill_broker(leader)
        _gone(c, leader)
        cm.wait_until(
            f"new leaders for broker {leader}'s partitions",
            lambda: all(st["leader"] not in (leader, -1) for st in _states(c, topic, count).values()),
            60,
        )
        _flowing(t, f"leader {leader}'s hard kill")
        c.start_broker(leader)
        _rejoined(c, topic, leader, assignment)
        _flowing(t, f"leader {leader}'s hard bounce")
        # livectl's controller, hard bounce: SIGKILL with its standby waiting
        old, new = f.controller, f.standby
        cm.wait_until("the next standby ready", lambda: READY in new.text(), 240)
        epoch = int(zk.get("/controller_epoch")[0])
        started = time.monotonic()
        old.kill()
        _controller_obeyed(f, topic, new.controller_id)
        m.wait_loaded(new, timeout=120)
        assert int(zk.get("/controller_epoch")[0]) > epoch
        log.info("controller %s SIGKILLed: %s obeyed after %.1f s", old.controller_id, new.controller_id,
                 time.monotonic() - started)  # fmt: skip
        f.controller, f.standby = new, None
        _flowing(t, "the controller's hard bounce")
        _kafka_serves_zookeeper(c, topic, count)
        _all_consumed(t)
    _agree(f, topic, assignment)
