"""Real Apache Kafka 3.9.2 brokers in ZooKeeper mode obey livectl's controller, through ``livectl channel``.

Real processes only: the session's ZooKeeper (a chroot is the controlled cluster) and Kafka bus, ``livectl
run`` (the controller; started first, so it holds ``/controller`` before any Kafka broker races for it),
``livectl channel`` and three Kafka brokers (:mod:`livectl.kafka_zk_brokers`). In order:

1. a topic of 3 partitions, replication factor 3, created through livectl's admin topic: each broker is
   told its role by LeaderAndIsr through the channel; a kafka-python producer with ``acks=all`` writes to
   the real brokers and a consumer reads every record back; Kafka's own view (the brokers' metadata) has
   the leaders and ISRs livectl wrote in ZooKeeper, and the LeaderAndIsr answers are on broker-events;
2. the leader of partition 0 hard-killed (SIGKILL): livectl moves its partitions' leaders to the two
   others (the channel delivers the LeaderAndIsr), records written after that are acknowledged by the
   new leaders, and every acknowledged record is read back;
   Before that, a follower paused (SIGSTOP): its leaders shrink their ISRs with AlterPartition, which
   reaches livectl through the channel's endpoint, is written to ZooKeeper and answered; resumed, it
   catches up and they expand the ISRs again the same way;
3. the auto leader rebalance while a reassignment runs (:func:`_rebalance_while_a_reassignment_runs`):
   livectl elects the preferred leaders although a reassignment to the dead broker cannot finish, as
   Kafka 3.9's own controller does in the same scenario (the second test: three Kafka brokers and no
   livectl, one of them the controller);
4. a leader stopped with SIGTERM: its ControlledShutdown reaches livectl, which moves its leadership first
   and answers; the broker's first attempt succeeds and it exits cleanly; records written to the last
   broker are all read back.

The producers are kafka-python's default, idempotent: each InitProducerId needs a block of producer ids
that the brokers get from their controller (AllocateProducerIds, answered by the channel). The brokers'
metadata seen by clients lists livectl's controller at the channel's endpoint on the clients' listener.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import re
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kazoo.client import KazooClient

from bench import harness as cm
from bench.harness.real_brokers import (
    PARTITIONS,
    Cluster,
    consume,
    kafka_view,
    metadata,
    produce,
    running_cluster,
)
from livectl import local
from livectl.kafka_zk_brokers import ZkBrokerSettings, start_zk_broker, stop_zk_broker

pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)

BROKERS = (1, 2, 3)
#: a follower that stops fetching leaves the ISR after 2 s (Kafka's default: 30 s); a broker paused a few
#: seconds longer keeps its ZooKeeper session (15 s)
BROKER_SETTINGS = ZkBrokerSettings(
    properties={"replica.lag.time.max.ms": "2000", "zookeeper.session.timeout.ms": "15000"}
)
#: leader.imbalance.check.interval.seconds of both controllers (Kafka's default is 300)
REBALANCE_INTERVAL_S = 2


@pytest.fixture
def cluster(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(zookeeper.connect, kafka_broker.bootstrap, tmp_path, BROKER_SETTINGS) as c:
        yield c


def _leaders_are(bootstrap: str, topic: str, leaders: list[int]) -> dict[int, tuple[int, list[int]]] | None:
    view = kafka_view(bootstrap, topic)
    return view if all(view.get(p, (None,))[0] == leaders[p] for p in range(PARTITIONS)) else None


def _moved_from(bootstrap: str, topic: str, victim: int) -> dict[int, tuple[int, list[int]]] | None:
    view = kafka_view(bootstrap, topic)
    return view if all(view.get(p, (victim,))[0] not in (victim, -1) for p in range(PARTITIONS)) else None


def _kafka_uuid() -> str:
    """A random topic id as Kafka's ``Uuid.randomUuid().toString`` writes it (URL-safe base64 of 16 bytes, no
    padding, never starting with ``-``)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _write_topic(zk: KazooClient, topic: str, assignment: dict[int, tuple[int, ...]]) -> None:
    """Create ``topic`` in ZooKeeper as Kafka 3.9's ``AdminZkClient`` does (its config, then its assignment with
    a new topic id): the same request whichever controller watches."""
    zk.create(f"/config/topics/{topic}", json.dumps({"version": 1, "config": {}}).encode(), makepath=True)
    partitions = {str(p): list(r) for p, r in sorted(assignment.items())}
    znode = {
        "version": 3,
        "topic_id": _kafka_uuid(),
        "partitions": partitions,
        "adding_replicas": {},
        "removing_replicas": {},
    }
    zk.create(f"/brokers/topics/{topic}", json.dumps(znode).encode(), makepath=True)


def _json_znode(zk: KazooClient, path: str) -> dict[str, Any]:
    data, _ = zk.get(path)
    value: dict[str, Any] = json.loads(data)
    return value


def _all_led_by(bootstrap: str, topic: str, count: int, leader: int) -> dict[int, tuple[int, list[int]]] | None:
    view = kafka_view(bootstrap, topic)
    return view if sorted(view) == list(range(count)) and all(v[0] == leader for v in view.values()) else None


def _rebalance_while_a_reassignment_runs(
    zk: KazooClient, bootstrap: str, *, preferred: int, leader: int, dead: int, prefix: str
) -> float:
    """Issue 42 item 5: does the auto leader rebalance elect while a partition is being reassigned? Topics
    ``<prefix>-t`` (2 partitions) and ``<prefix>-m`` (1) on ``[leader, preferred]``, then one
    ``/admin/reassign_partitions`` (the ZooKeeper path both controllers watch): t's partitions reordered to
    ``[preferred, leader]`` (done at once: both in sync; the leader stays), m-0 moved to ``[preferred, leader,
    dead]``, which cannot finish (``dead`` is down: its replica never catches up). ``preferred`` is then the
    preferred replica of all three partitions and leads none: 100 % above the 10 % threshold. Kafka 3.9's
    controller elects it (3.4's KAFKA-10149 removed the ``partitionsBeingReassigned.isEmpty`` guard);
    the controller under test must too, m-0 included, while m-0 stays reassigning. Returns the seconds from
    the reassignment's creation to the last election."""
    t, moved = f"{prefix}-t", f"{prefix}-m"
    _write_topic(zk, t, {0: (leader, preferred), 1: (leader, preferred)})
    _write_topic(zk, moved, {0: (leader, preferred)})
    tps = [(t, 0), (t, 1), (moved, 0)]

    def states() -> list[dict[str, Any]]:
        out = []
        for topic, p in tps:
            path = f"/brokers/topics/{topic}/partitions/{p}/state"
            out.append(_json_znode(zk, path) if zk.exists(path) else {})
        return out

    cm.wait_until(
        f"the new partitions led by {leader} with both replicas in sync",
        lambda: all(st.get("leader") == leader and sorted(st["isr"]) == sorted((leader, preferred)) for st in states()),
        60,
    )
    entries = [{"topic": t, "partition": p, "replicas": [preferred, leader]} for p in (0, 1)]
    entries.append({"topic": moved, "partition": 0, "replicas": [preferred, leader, dead]})
    zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": entries}).encode())
    started = time.monotonic()
    cm.wait_until(
        f"{moved}-0 being reassigned to [{preferred}, {leader}, {dead}]",
        lambda: _json_znode(zk, f"/brokers/topics/{moved}").get("adding_replicas") == {"0": [dead]},
        30,
    )
    cm.wait_until(
        f"the auto leader rebalance electing {preferred} (every {REBALANCE_INTERVAL_S} s)",
        lambda: all(st.get("leader") == preferred for st in states()),
        10 * REBALANCE_INTERVAL_S + 20,
    )
    elected_after = time.monotonic() - started
    log.info("%s: elected %.1f s after the reassignment was written", prefix, elected_after)
    # the reassignment of m-0 goes on, and t's reorder is done
    znode = _json_znode(zk, f"/brokers/topics/{moved}")
    assert (znode["partitions"], znode["adding_replicas"]) == ({"0": [preferred, leader, dead]}, {"0": [dead]})
    znode = _json_znode(zk, f"/brokers/topics/{t}")
    assert znode["partitions"] == {"0": [preferred, leader], "1": [preferred, leader]}, znode
    assert not znode.get("adding_replicas") and not znode.get("removing_replicas"), znode
    # Kafka's own view: the brokers serve the new leaders
    for topic, count in ((t, 2), (moved, 1)):
        view = cm.wait_until(
            f"the brokers' metadata showing {preferred} as the leader of {topic}",
            functools.partial(_all_led_by, bootstrap, topic, count, preferred),
            30,
        )
        for p in range(count):
            st = _json_znode(zk, f"/brokers/topics/{topic}/partitions/{p}/state")
            assert view[p] == (st["leader"], sorted(st["isr"])), (topic, p, view[p], st)
    return elected_after


def test_real_brokers_obey_livectl(cluster: Cluster) -> None:
    m = cluster.m
    zk_client = m.zk  # the harness's ZooKeeper session, open once the cluster runs
    assert zk_client is not None
    controller = m.start_controller({"leader_imbalance_check_interval_seconds": REBALANCE_INTERVAL_S})
    cluster.start_channel()
    m.wait_loaded(controller, timeout=180)
    # livectl holds /controller (Kafka's format) before any Kafka broker starts: none of them races for it
    held, _ = m.znode("/controller")
    assert held is not None and held["brokerid"] == controller.controller_id
    # the three JVMs start side by side; none of them takes /controller from livectl's controller, which sends
    # each its UpdateMetadata (onBrokerStartup) through the channel
    cluster.start_brokers(BROKERS)
    assert m.znode("/controller")[0] == held, "a Kafka broker took /controller"

    topic = f"{m.name}-orders"
    assignment = {p: tuple(BROKERS[p:] + BROKERS[:p]) for p in range(PARTITIONS)}
    leaders = cluster.create_topic("create-orders", topic, assignment)

    # Kafka's own view: the brokers serve the leaders and ISRs livectl decided and wrote in ZooKeeper
    bootstrap = cluster.bootstrap()
    view = cm.wait_until(
        "the brokers' metadata showing livectl's leaders",
        lambda: _leaders_are(bootstrap, topic, leaders),
        60,
    )
    for p in range(PARTITIONS):
        st = cluster.state(topic, p)
        assert view[p] == (st["leader"], sorted(st["isr"])), (p, view[p], st)

    first = [f"a-{i}".encode() for i in range(300)]
    produce(bootstrap, topic, first)
    assert sorted(consume(bootstrap, topic)) == sorted(first)

    # a follower paused (SIGSTOP) stops fetching: the other leaders shrink their ISRs with AlterPartition;
    # resumed, it catches up and they expand them again; both reach ZooKeeper through livectl
    paused = leaders[2]
    shrinking = [p for p in range(PARTITIONS) if leaders[p] != paused]

    def settled() -> bool:
        # every ISR whole in ZooKeeper and no AlterPartition waiting (a leader sends one per partition at a time)
        log = cluster.channel_log.read_text()
        whole = all(sorted(cluster.state(topic, p)["isr"]) == list(BROKERS) for p in range(PARTITIONS))
        return whole and log.count("AlterPartition v") == log.count("AlterPartition answered")

    cm.wait_until("every ISR whole and no ISR change pending", settled, 90)
    versions = {p: zk_client.get(f"/brokers/topics/{topic}/partitions/{p}/state")[1].version for p in shrinking}
    seen = len(cluster.channel_log.read_text())

    def shrinks_asked() -> bool:
        lines = cluster.channel_log.read_text()[seen:]
        return all(
            any(
                str(paused) not in isr.split(",") for isr in re.findall(rf"{re.escape(topic)}-{p} isr=([0-9,]*)", lines)
            )
            for p in shrinking
        )

    # a follower is out of sync only when it lags the leader's log end: records keep coming while it sleeps
    others = ",".join(svc.address for bid, svc in sorted(cluster.brokers.items()) if bid != paused)
    side = KafkaProducer(bootstrap_servers=others, acks="all", request_timeout_ms=30_000, max_block_ms=30_000)
    during = [f"p-{i}".encode() for i in range(30)]
    for p in shrinking:  # the producer id and the connections to the leaders, before the pause
        side.send(topic, value=b"p-%d" % (100 + p), partition=p).get(timeout=30)
    during += [b"p-%d" % (100 + p) for p in shrinking]
    os.kill(cluster.brokers[paused].pid, signal.SIGSTOP)
    try:
        futures = [
            side.send(topic, value=v, partition=shrinking[i % len(shrinking)]) for i, v in enumerate(during[:30])
        ]
        cm.wait_until("the leaders' AlterPartition dropping the paused follower", shrinks_asked, 9)
    finally:
        os.kill(cluster.brokers[paused].pid, signal.SIGCONT)
    for f in futures:
        f.get(timeout=30)
    side.close()
    first = first + during
    cm.wait_until(
        f"broker {paused} back in every ISR in ZooKeeper after its leaders shrank them",
        lambda: all(
            sorted(cluster.state(topic, p)["isr"]) == list(BROKERS)
            and zk_client.get(f"/brokers/topics/{topic}/partitions/{p}/state")[1].version >= versions[p] + 2
            for p in shrinking
        ),
        120,
    )
    proposals = [(e.partition, paused in e.new_isr) for e in cluster.isr_proposals(topic) if e.partition in shrinking]
    for p in shrinking:
        # out of the ISR, then back in it, each proposal from the leader and written by livectl
        assert (p, False) in proposals and (p, True) in proposals[proposals.index((p, False)) :], proposals
    assert "AlterPartition answered (top-level error 0)" in cluster.channel_log.read_text()

    # the channel turned each broker's LeaderAndIsr answer into livectl's event, with no error
    answers = [(key, e) for key, e in cluster.events() if e.get("type") == "leader_and_isr_response"]
    assert all(key == str(e["broker_id"]).encode() for key, e in answers), answers
    answered = {
        (e["broker_id"], p["topic"], p["partition"])
        for _, e in answers
        for p in e["partitions"]
        if p["error_code"] == 0
    }
    assert {(b, topic, p) for p in range(PARTITIONS) for b in assignment[p]} <= answered, answers

    # a hard-killed leader: livectl moves its partitions to the others, through the channel
    victim = leaders[0]
    stop_zk_broker(cluster.brokers[victim], timeout=0)
    cm.wait_until(
        f"broker {victim} gone from ZooKeeper",
        lambda: victim not in m.registered_brokers(),
        30,
    )
    survivors = ",".join(svc.address for bid, svc in sorted(cluster.brokers.items()) if bid != victim)
    moved = cm.wait_until(
        "new leaders on the surviving brokers (Kafka's view)",
        lambda: _moved_from(survivors, topic, victim),
        60,
    )
    for p in range(PARTITIONS):
        st = cluster.state(topic, p)
        assert moved[p][0] == st["leader"] != victim, (p, moved[p], st)
    second = [f"b-{i}".encode() for i in range(300)]
    produce(survivors, topic, second)
    assert sorted(consume(survivors, topic)) == sorted(first + second)
    # at the end each surviving broker's metadata agrees with livectl's ZooKeeper state
    for address in survivors.split(","):
        view = kafka_view(address, topic)
        for p in range(PARTITIONS):
            st = cluster.state(topic, p)
            assert view[p] == (st["leader"], sorted(st["isr"])), (address, p, view[p], st)

    # the auto leader rebalance while a reassignment to the dead broker cannot finish: as Kafka 3.9's own
    # controller (test_kafka_controller_rebalances_while_a_reassignment_runs)
    preferred, leader = sorted(b for b in BROKERS if b != victim)
    assert m.zk is not None
    _rebalance_while_a_reassignment_runs(
        m.zk, survivors, preferred=preferred, leader=leader, dead=victim, prefix=m.name
    )

    # SIGTERM to a leader: Kafka's controlled shutdown, through livectl; leadership moves before it exits
    stopping = cluster.state(topic, 0)["leader"]
    before = {p: cluster.state(topic, p) for p in range(PARTITIONS)}
    svc = cluster.brokers[stopping]
    started = time.monotonic()
    assert stop_zk_broker(svc, timeout=60), f"broker {stopping} did not exit after SIGTERM"
    took = time.monotonic() - started
    text = Path(svc.log).read_text()
    # the first attempt succeeded: livectl answered with no partition left to move
    assert "Controlled shutdown request returned successfully" in text
    assert "Retrying controlled shutdown" not in text and "unclean shutdown" not in text
    # Kafka's retry path alone (controlled.shutdown.max.retries 3, back-off 5 s) takes longer than this
    assert took < 20, took
    asked = [e for _, e in cluster.events() if e.get("type") == "controlled_shutdown"]
    assert asked and {e["broker_id"] for e in asked} == {stopping}, asked
    for p in range(PARTITIONS):
        st = cluster.state(topic, p)
        assert st["leader"] != stopping and stopping not in st["isr"], (p, st)
        if before[p]["leader"] == stopping:
            assert st["leader_epoch"] > before[p]["leader_epoch"], (p, before[p], st)
    remaining = ",".join(a.address for bid, a in sorted(cluster.brokers.items()) if bid != stopping and a.running())
    third = [f"c-{i}".encode() for i in range(300)]
    produce(remaining, topic, third)
    assert sorted(consume(remaining, topic)) == sorted(first + second + third)
    for address in remaining.split(","):
        # clients see the live brokers and livectl's controller, the channel's endpoint on their listener; the
        # stopped broker goes from the list with livectl's UpdateMetadata after its registration is gone
        live = sorted({*BROKERS, controller.controller_id} - {stopping, victim})
        cm.wait_until(
            f"{address} listing the live brokers and the controller {live} only",
            lambda: sorted(int(b.node_id) for b in metadata(address, topic).brokers) == live,  # noqa: B023
            60,
        )
        view = kafka_view(address, topic)
        for p in range(PARTITIONS):
            st = cluster.state(topic, p)
            assert view[p] == (st["leader"], sorted(st["isr"])), (address, p, view[p], st)

    # the hard-killed broker started again: Kafka's onBrokerStartup — it hears of the live brokers before its
    # LeaderAndIsr, becomes a follower of the remaining leader, catches up and rejoins every ISR
    first_life = Path(cluster.brokers[victim].log).stat().st_size
    cluster.start_broker(victim)
    cm.wait_until(
        f"broker {victim} back in every ISR (ZooKeeper, by AlterPartition through the channel)",
        lambda: all(victim in cluster.state(topic, p)["isr"] for p in range(PARTITIONS)),
        90,
    )
    back = cluster.brokers[victim].address
    with open(cluster.brokers[victim].log, "rb") as f:
        f.seek(first_life)
        assert b"cannot become follower" not in f.read()
    assert sorted(consume(back, topic)) == sorted(first + second + third)
    view = kafka_view(back, topic)
    for p in range(PARTITIONS):
        st = cluster.state(topic, p)
        assert view[p] == (st["leader"], sorted(st["isr"])), (back, p, view[p], st)


def test_kafka_controller_rebalances_while_a_reassignment_runs(zookeeper: local.Service, tmp_path: Path) -> None:
    """What Kafka 3.9.2's own ZooKeeper-mode controller does (no livectl: three brokers, one of them elected
    controller) in the scenario of :func:`_rebalance_while_a_reassignment_runs`; the broker that goes down is
    not the controller."""
    chroot = f"/k39-{uuid.uuid4().hex[:6]}"
    root = KazooClient(hosts=zookeeper.connect, timeout=10)
    root.start(timeout=15)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    connect = zookeeper.connect + chroot
    settings = ZkBrokerSettings(properties={"leader.imbalance.check.interval.seconds": str(REBALANCE_INTERVAL_S)})
    zk = KazooClient(hosts=connect, timeout=10)
    with ThreadPoolExecutor(len(BROKERS)) as pool:
        starting = {
            b: pool.submit(start_zk_broker, tmp_path / f"kafka-{b}", b, connect, settings=settings) for b in BROKERS
        }
    try:
        brokers = {b: f.result() for b, f in starting.items()}
        zk.start(timeout=15)
        kafka_controller: int = cm.wait_until(
            "a Kafka broker elected controller",
            lambda: _json_znode(zk, "/controller")["brokerid"] if zk.exists("/controller") else None,
            60,
        )
        dead = max(b for b in BROKERS if b != kafka_controller)
        preferred, leader = sorted(b for b in BROKERS if b != dead)
        stop_zk_broker(brokers[dead])  # SIGTERM: its controlled shutdown, then it deregisters
        cm.wait_until(
            f"broker {dead} gone from ZooKeeper",
            lambda: not zk.exists(f"/brokers/ids/{dead}"),
            30,
        )
        live = ",".join(brokers[b].address for b in (preferred, leader))
        _rebalance_while_a_reassignment_runs(zk, live, preferred=preferred, leader=leader, dead=dead, prefix="k39")
        assert _json_znode(zk, "/controller")["brokerid"] == kafka_controller, "Kafka's controller did it all"
        # and by its auto leader rebalance (onReplicaElection's log line, AutoTriggered)
        elections = [
            line
            for line in Path(brokers[kafka_controller].log).read_text(errors="replace").splitlines()
            if "Starting replica leader election (PREFERRED)" in line and "triggered by AutoTriggered" in line
        ]
        assert any("k39-m-0" in line for line in elections), elections
        assert all(any(f"k39-t-{p}" in line for line in elections) for p in (0, 1)), elections
    finally:
        for f in starting.values():
            if f.exception() is None:
                stop_zk_broker(f.result(), timeout=0)
        zk.stop()
        zk.close()
