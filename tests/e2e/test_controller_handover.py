"""One election with Kafka's controllers (issue 42 item 2): ``/controller`` handed over between livectl and the
controllers of real Apache Kafka 3.9.2 brokers in ZooKeeper mode, both ways, on one cluster.

Real processes only: the session's ZooKeeper (a chroot is the cluster) and Kafka bus, ``livectl run`` (three
controllers in turn: A, then B as A's standby, then C), ``livectl channel`` and three Kafka brokers. In order:

1. A holds ``/controller`` before the brokers start; a topic (3 partitions, RF 3) created through livectl;
   records written with ``acks=all`` and read back;
2. (item 2c) A crashes (SIGKILL) with B waiting as its standby (``take_over_from_kafka``): when A's session
   expires the three brokers' controllers race B for ``/controller``. Whoever wins the race, B ends as the
   controller (it takes ``/controller`` from a broker elected while it waits), with a newer epoch; the test
   logs who won the race; the brokers obey B;
3. (item 2a) B stopped, no livectl controller left: a Kafka broker wins ``/controller`` with a newer epoch and
   runs the cluster from the ZooKeeper state livectl wrote: leaders, ISRs and leader epochs unchanged, every
   broker names it as the controller, records written with ``acks=all`` and read back; a broker bounced (its
   controlled shutdown and its return) is handled by Kafka's controller, which writes the partition states
   under its own epoch;
4. (item 2b) C started while that broker holds ``/controller``: it waits as a standby and does not depose
   it; the operator deletes ``/controller`` (Kafka's re-election): C ends as the controller with a newer epoch,
   takes the state Kafka's controller wrote (leaders, ISRs and leader epochs unchanged), every broker answers
   its LeaderAndIsr through the channel and names it as the controller, a leader's controlled shutdown is
   answered by C (its leaderships moved under C's epoch), and every acknowledged record is read back.

Kafka's and livectl's automatic leader rebalance are off: a bounce leaves a leader off its preferred replica,
and a rebalance after a hand-over would move it, where the test checks that a hand-over moves nothing.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

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
from livectl.kafka_zk_brokers import ZkBrokerSettings, stop_zk_broker

pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)

BROKERS = (1, 2, 3)
BROKER_SETTINGS = ZkBrokerSettings(properties={"auto.leader.rebalance.enable": "false"})
#: every livectl controller of the test; ``take_over_from_kafka``: a standby wins each re-election while it waits
LIVECTL = {"auto_leader_rebalance_enable": False, "take_over_from_kafka": True}


@pytest.fixture
def cluster(zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(zookeeper.connect, kafka_broker.bootstrap, tmp_path, BROKER_SETTINGS) as c:
        yield c


def _holder(cluster: Cluster) -> tuple[int, int] | None:
    """(``brokerid`` of ``/controller``, ``/controller_epoch``), or None while no controller is elected."""
    controller, _ = cluster.m.znode("/controller")
    if controller is None:
        return None
    assert cluster.m.zk is not None
    return int(controller["brokerid"]), int(cluster.m.zk.get("/controller_epoch")[0])


def _states(cluster: Cluster, topic: str) -> dict[int, tuple[int, list[int], int]]:
    """partition -> (leader, ISR, leader epoch) in ZooKeeper."""
    out = {}
    for p in range(PARTITIONS):
        st = cluster.state(topic, p)
        out[p] = (st["leader"], sorted(st["isr"]), st["leader_epoch"])
    return out


def _brokers_agree(cluster: Cluster, topic: str, controller: int) -> bool:
    """Every running broker names ``controller`` as the controller and serves ZooKeeper's leaders and ISRs."""
    zk_view = {p: (leader, isr) for p, (leader, isr, _) in _states(cluster, topic).items()}
    for svc in cluster.brokers.values():
        if not svc.running():
            continue
        if int(metadata(svc.address, topic).controller_id) != controller or kafka_view(svc.address, topic) != zk_view:
            return False
    return True


def _elected_lines(cluster: Cluster, since: dict[int, int]) -> dict[int, list[str]]:
    """Each broker's "successfully elected as the controller" lines (Kafka's ``elect``) after ``since``."""
    out = {}
    for b, svc in cluster.brokers.items():
        with open(svc.log, "rb") as f:
            f.seek(since.get(b, 0))
            text = f.read().decode(errors="replace")
        out[b] = [line for line in text.splitlines() if "successfully elected as the controller" in line]
    return out


def _log_term(cluster: Cluster, kafka_won: dict[int, list[str]], livectl_log: str) -> None:
    """Log how long the Kafka broker that won the race held ``/controller`` before livectl took it (both logs'
    timestamps, one clock)."""
    (elected,) = [line for lines in kafka_won.values() for line in lines]
    took = next(line for line in livectl_log.splitlines() if "took /controller from Kafka broker" in line)
    stamp = re.search(r"\[([0-9-]+ [0-9:,]+)\]", elected)
    assert stamp is not None, elected
    kafka_at = datetime.strptime(stamp[1], "%Y-%m-%d %H:%M:%S,%f")
    livectl_at = datetime.strptime(took[:23], "%Y-%m-%d %H:%M:%S,%f")
    log.info(
        "Kafka's controller held /controller for %.3f s: %s / %s",
        (livectl_at - kafka_at).total_seconds(),
        elected,
        took,
    )


def _took_from_kafka(c: cm.ControllerProcess) -> bool:
    """Once ``c`` logged how it won the lease (its line follows the multi-op): True when it took ``/controller``
    from a Kafka broker, False when it won the election."""
    took, elected = "took /controller from Kafka broker", f"controller {c.controller_id} elected with epoch"
    line = cm.wait_until(
        f"controller {c.controller_id} saying how it won",
        lambda: next((x for x in c.text().splitlines() if took in x or elected in x), None),
        30,
    )
    return took in line


def _kafka_won(cluster: Cluster, since: dict[int, int], took: bool) -> dict[int, list[str]]:
    """The brokers elected since ``since`` (their "successfully elected" lines): after livectl took
    ``/controller`` from one, once its line is written (it follows the broker's multi-op, as livectl's take-over
    may); else none."""

    def won() -> dict[int, list[str]]:
        return {broker: lines for broker, lines in _elected_lines(cluster, since).items() if lines}

    return cm.wait_until("the elected broker's log line", won, 30) if took else won()


def _running(c: cm.ControllerProcess) -> bool:
    """True while ``c`` runs; a failed controller fails the wait at once, with its last error line."""
    if not c.alive():
        errors = [line for line in c.text().splitlines() if " ERROR " in line]
        raise cm.MatrixError(f"controller {c.controller_id} exited ({c.proc.returncode}): {errors[-1:]}")
    return True


def _log_sizes(cluster: Cluster) -> dict[int, int]:
    return {b: Path(svc.log).stat().st_size for b, svc in cluster.brokers.items()}


def _bounce(cluster: Cluster, topic: str, broker: int, controller_epoch: int, *, start_again: bool = True) -> None:
    """SIGTERM ``broker`` (its controlled shutdown goes to the controller of ``controller_epoch``, which moves
    its leaderships first), then (``start_again``) start it again and wait until it is back in every ISR; both
    written to ZooKeeper under ``controller_epoch``."""
    before = _states(cluster, topic)
    svc = cluster.brokers[broker]
    started = time.monotonic()
    assert stop_zk_broker(svc, timeout=60), f"broker {broker} did not exit after SIGTERM"
    text = Path(svc.log).read_text(errors="replace")
    assert "Controlled shutdown request returned successfully" in text, f"broker {broker}: no controlled shutdown"
    assert "Retrying controlled shutdown" not in text, f"broker {broker}: its controller did not answer at once"
    log.info("broker %s stopped in %.1f s by its controlled shutdown", broker, time.monotonic() - started)
    for p, (leader, _, epoch) in before.items():
        st = cluster.state(topic, p)
        assert st["leader"] != broker and broker not in st["isr"], (p, st)
        if leader == broker:
            assert st["leader_epoch"] > epoch and st["controller_epoch"] == controller_epoch, (p, st)
    if not start_again:
        return
    cluster.start_broker(broker)
    cm.wait_until(
        f"broker {broker} back in every ISR",
        lambda: all(broker in cluster.state(topic, p)["isr"] for p in range(PARTITIONS)),
        90,
    )
    for p in range(PARTITIONS):
        assert cluster.state(topic, p)["controller_epoch"] == controller_epoch, (p, cluster.state(topic, p))


def test_controller_hand_over_between_livectl_and_kafka(cluster: Cluster) -> None:
    m = cluster.m
    started = time.monotonic()

    def lap(what: str) -> None:
        log.info("%s at %.0f s", what, time.monotonic() - started)

    a = m.start_controller(LIVECTL)
    cluster.start_channel()
    a_holds = cm.wait_until(
        "A holding /controller", lambda: (h := _holder(cluster)) is not None and h[0] == a.controller_id and h, 180
    )
    lap("A elected")
    b = m.start_controller(LIVECTL)  # A's standby: its Spark starts beside A's failover and the brokers
    m.wait_loaded(a, timeout=120)
    with ThreadPoolExecutor(len(BROKERS)) as pool:
        list(pool.map(cluster.start_broker, BROKERS))
    cm.wait_until("the Kafka brokers registered", lambda: set(m.registered_brokers()) == set(BROKERS), 60)
    assert _holder(cluster) == a_holds, "a Kafka broker took /controller"
    cm.wait_until(
        "livectl's UpdateMetadata delivered to each broker",
        lambda: _running(a) and all(f"broker {x}: UpdateMetadata" in cluster.channel_log.read_text() for x in BROKERS),
        120,
    )

    topic = f"{m.name}-orders"
    assignment = {p: tuple(BROKERS[p:] + BROKERS[:p]) for p in range(PARTITIONS)}
    cm.create_topic(m, "create-orders", topic, assignment)
    cm.wait_until(
        "every partition led by its preferred replica with a whole ISR",
        lambda: (
            _running(a)
            and all(
                cluster.state(topic, p).get("leader") == assignment[p][0]
                and sorted(cluster.state(topic, p)["isr"]) == list(BROKERS)
                for p in range(PARTITIONS)
            )
        ),
        120,
    )
    cm.wait_until(
        "the brokers serving livectl's leaders",
        lambda: _running(a) and _brokers_agree(cluster, topic, a.controller_id),
        120,
    )
    written = [f"a-{i}".encode() for i in range(100)]
    produce(cluster.bootstrap(), topic, written)
    assert sorted(consume(cluster.bootstrap(), topic)) == sorted(written)

    lap("the topic written")
    # (c) the active livectl controller crashes with its standby waiting: the brokers race the standby when
    # A's session expires; B ends as the controller either way
    cm.wait_until(
        "B ready to win the next re-election",
        lambda: "ready to take /controller from a Kafka broker elected from now on" in b.text(),
        180,
    )
    since = _log_sizes(cluster)
    a.kill()
    b_holds = cm.wait_until(
        "B holding /controller",
        lambda: (h := _holder(cluster)) is not None and h[0] == b.controller_id and h,
        60,
    )
    assert b_holds[1] > a_holds[1]
    took = _took_from_kafka(b)
    kafka_won = _kafka_won(cluster, since, took)
    if took:
        _log_term(cluster, kafka_won, b.text())
    log.info(
        "A (epoch %s) crashed: %s; B holds epoch %s",
        a_holds[1],
        f"Kafka broker(s) {sorted(kafka_won)} won the race, B took /controller" if took else "B won the race",
        b_holds[1],
    )
    # whichever won the race: one epoch per election
    assert (b_holds[1] - a_holds[1] == 2 and len(kafka_won) == 1 and took) or (
        b_holds[1] - a_holds[1] == 1 and not kafka_won and not took
    ), (a_holds, b_holds, kafka_won, took)
    m.wait_loaded(b, timeout=120)
    cm.wait_until("the brokers obeying B", lambda: _running(b) and _brokers_agree(cluster, topic, b.controller_id), 120)
    more = [f"b-{i}".encode() for i in range(100)]
    produce(cluster.bootstrap(), topic, more)
    written += more

    lap("B running the cluster")
    # (a) no livectl controller left: Kafka's controller takes over from the state livectl wrote
    kept = _states(cluster, topic)
    since = _log_sizes(cluster)
    b.stop()
    k, k_epoch = cm.wait_until(
        "a Kafka broker holding /controller",
        lambda: (h := _holder(cluster)) is not None and h[0] in BROKERS and h,
        60,
    )
    assert k_epoch > b_holds[1]
    assert any(f"Epoch incremented to {k_epoch}" in line for line in _elected_lines(cluster, since)[k])
    c = m.start_controller(LIVECTL)  # started now: its Spark starts while Kafka's controller runs the cluster
    cm.wait_until(f"every broker naming broker {k} as the controller", lambda: _brokers_agree(cluster, topic, k), 60)
    assert _states(cluster, topic) == kept, "Kafka's controller moved something at its failover"
    more = [f"k-{i}".encode() for i in range(100)]
    produce(cluster.bootstrap(), topic, more)
    written += more
    assert sorted(consume(cluster.bootstrap(), topic)) == sorted(written)
    bounced = next(x for x in BROKERS if x != k)
    _bounce(cluster, topic, bounced, k_epoch)
    assert _holder(cluster) == (k, k_epoch)

    lap("Kafka's controller done")
    # (b) livectl takes over from Kafka's controller: C waits without deposing it, then the operator deletes
    # /controller (Kafka's re-election) and C ends as the controller
    cm.wait_until(
        "C ready to win the next re-election",
        lambda: "ready to take /controller from a Kafka broker elected from now on" in c.text(),
        180,
    )
    assert _holder(cluster) == (k, k_epoch), "C deposed the Kafka controller it found"
    kept = _states(cluster, topic)
    since = _log_sizes(cluster)
    assert m.zk is not None
    m.zk.delete("/controller")
    c_holds = cm.wait_until(
        "C holding /controller",
        lambda: (h := _holder(cluster)) is not None and h[0] == c.controller_id and h,
        60,
    )
    assert c_holds[1] > k_epoch
    kafka_won = _kafka_won(cluster, since, _took_from_kafka(c))
    if kafka_won:
        _log_term(cluster, kafka_won, c.text())
    log.info(
        "/controller deleted: %s; C holds epoch %s",
        f"Kafka broker(s) {sorted(kafka_won)} won the race, C took /controller" if kafka_won else "C won the race",
        c_holds[1],
    )
    m.wait_loaded(c, timeout=120)
    assert _states(cluster, topic) == kept, "livectl moved something at its failover"
    # each broker obeys C through the channel: it answers C's LeaderAndIsr and names C as the controller
    cm.wait_until(
        "every broker answering C's LeaderAndIsr through the channel",
        lambda: (
            _running(c)
            and all(
                re.search(
                    rf"broker {x}: LeaderAndIsr v\d+ of batch \d+ \(epoch {c_holds[1]}\) answered error 0",
                    cluster.channel_log.read_text(),
                )
                for x in BROKERS
            )
        ),
        120,
    )
    cm.wait_until("the brokers obeying C", lambda: _running(c) and _brokers_agree(cluster, topic, c.controller_id), 120)
    lap("C elected and obeyed")
    stopping = cluster.state(topic, 0)["leader"]
    _bounce(cluster, topic, stopping, c_holds[1], start_again=False)
    asked = [e for _, e in cluster.events() if e.get("type") == "controlled_shutdown"]
    assert {e["broker_id"] for e in asked} == {stopping}, asked  # the one under C (A saw none)
    more = [f"c-{i}".encode() for i in range(100)]
    produce(cluster.bootstrap(), topic, more)
    written += more
    assert sorted(consume(cluster.bootstrap(), topic)) == sorted(written)
    assert _holder(cluster) == c_holds
    log.info("hand-overs done in %.0f s", time.monotonic() - started)
