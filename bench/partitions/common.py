"""The partition benchmark's test hosts, its row of results and the checks every fault shares."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import harness as cm
from bench.harness import fencing, netns
from livectl import local

FAULTS = (
    "zk-cut:idle",
    "zk-cut:before-zk-writes",
    "zk-cut:after-zk-writes",
    "broker-zk-cut",
    "kafka-cut",
    "kafka-cut:in-batch",
    "zk-leader-kill:reassign",
    "zk-leader-kill:broker-failure",
    "zk-minority-cut:reassign",
    "zk-minority-cut:broker-failure",
    "zk-quorum-cut:reassign",
    "zk-degraded",
    "kafka-degraded",
    "worker-cut",
)
#: the faults CI runs (tests/e2e/test_partitions.py); of the ensemble's, the leader killed mid-reassignment:
#: every session (the controller's, wherever it was) loses its server in the middle of the most ZooKeeper writes
CI_FAULTS = (
    "zk-cut:idle",
    "zk-cut:before-zk-writes",
    "zk-cut:after-zk-writes",
    "broker-zk-cut",
    "kafka-cut",
    "zk-leader-kill:reassign",
)
SESSION_TIMEOUT_MS = 6000
ZOOKEEPER_SERVERS = 3


@dataclass
class Row:
    fault: str
    outcome: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def cells(self) -> list[Any]:
        return [self.fault, self.outcome, self.seconds, "yes" if not self.problems else "NO"]


@dataclass
class Hosts:
    """The test hosts of one run: the ZooKeeper ensemble's (``zookeeper-1`` … ``zookeeper-3``), Kafka's, and one
    per process started (by its name)."""

    net: netns.Network
    ensemble: netns.Ensemble
    kafka: local.Service

    def host(self, name: str) -> netns.Host:
        return self.net.hosts.get(name) or self.net.add_host(name)

    def matrix(self, work: Path) -> cm.Matrix:
        """A crash-matrix cluster whose every controller and broker runs on a host of its own."""
        m = cm.Matrix(self.ensemble.connect, self.kafka.bootstrap, work, session_timeout_ms=SESSION_TIMEOUT_MS)
        m.prefix = lambda name: self.host(name).prefix
        m.address = lambda name: self.host(name).address
        return m

    def cut_from_zookeeper(self, host: netns.Host) -> None:
        """``host`` cut off from every server of the ensemble."""
        for z in self.ensemble.hosts:
            self.net.cut(host, z)

    def heal_from_zookeeper(self, host: netns.Host) -> None:
        for z in self.ensemble.hosts:
            self.net.heal(host, z)


@contextlib.contextmanager
def hosts(run_dir: Path) -> Iterator[Hosts]:
    """The network, a ZooKeeper ensemble of three and Kafka on hosts of their own; everything stopped and
    deleted after."""
    with netns.network() as net:
        zk_hosts = [net.add_host(f"zookeeper-{n}") for n in range(1, ZOOKEEPER_SERVERS + 1)]
        kafka_host = net.add_host("kafka")
        ensemble = netns.start_zookeeper_ensemble(zk_hosts, run_dir / "zookeeper")
        try:
            kafka = netns.start_kafka(kafka_host, run_dir / "kafka")
            try:
                yield Hosts(net, ensemble, kafka)
            finally:
                local.stop_kafka(kafka)
        finally:
            ensemble.stop()


def controller_host(h: Hosts, c: cm.ControllerProcess) -> netns.Host:
    return h.host(f"controller-{c.controller_id}")


def send_raw(m: cm.Matrix, value: str) -> None:
    assert m.producer is not None
    m.producer.send(m.topics["admin"], key=b"partition", value=value.encode()).get(10)


def no_writes_of(m: cm.Matrix, epoch: int, before: dict[str, int], what: str) -> list[str]:
    now = fencing.epoch_counts(m.bootstrap, m.topics, epoch)
    return [f"{what}: {t} got {now[t] - before[t]} message(s) of epoch {epoch}" for t in now if now[t] != before[t]]


def in_order(m: cm.Matrix, old: int, new: int) -> list[str]:
    out = []
    for name in ("requests", "results", "rejected"):
        late = fencing.old_epoch_after_new(fencing.messages(m.bootstrap, m.topics[name]), old, new)
        out += [f"{name}: epoch {old} after epoch {new}: {x}" for x in late[:3]]
    return out


def answered_once(m: cm.Matrix, request_id: str, epoch: int | None = None) -> list[str]:
    final = [r for r in m.results(request_id) if r["status"] != "in_progress"]
    if len(final) != 1:
        return [f"{request_id} answered {len(final)} times: {[(r['status'], r['controller_epoch']) for r in final]}"]
    if epoch is not None and final[0]["controller_epoch"] != epoch:
        return [f"{request_id} answered by epoch {final[0]['controller_epoch']}, want {epoch}"]
    return []


def exit_problems(c: cm.ControllerProcess, mark: int, timeout: float = 90) -> tuple[str, list[str]]:
    """How ``c`` ended after log offset ``mark``: exit 3 with one line saying it was fenced is right."""
    try:
        rc = c.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return "still running", [f"controller {c.controller_id} still runs {timeout:.0f} s after the link returned"]
    said = [line for line in c.text()[mark:].splitlines() if line.strip()]
    if rc == 3 and len(said) == 1 and "was fenced" in said[0]:
        return f"exit 3: {said[0][:90]}", []
    return f"exit {rc}", [f"controller {c.controller_id} exited {rc} saying {said[-5:]}"]


def cut_when_planned(m: cm.Matrix, cut: Callable[[], None], timeout: float = 90) -> threading.Thread:
    """A thread that calls ``cut`` as soon as a new micro-batch is planned in the checkpoint (``offsets/N``)."""
    planned = fencing.batch_ids(m.checkpoint / "offsets")

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if fencing.batch_ids(m.checkpoint / "offsets") - planned:
                cut()
                return
            time.sleep(0.005)

    t = threading.Thread(target=watch, name="partitions-cut-when-planned", daemon=True)
    t.start()
    return t


class Views:
    """The brokers' own views of ``topic``, sampled from their status files on a thread: who claimed to
    lead each partition at each leader epoch, each replica's leader epochs in order, and the highest high
    watermark each leader epoch's leader reported."""

    def __init__(self, m: cm.Matrix, topic: str, interval: float = 0.25) -> None:
        self.m, self.topic, self.interval = m, topic, interval
        self.leaders: dict[tuple[str, int], set[int]] = {}
        self.epochs: dict[tuple[int, str], list[int]] = {}
        self.hw: dict[tuple[str, int], int] = {}
        #: the log end offset of each leader epoch's leader the first time it was seen leading
        self.first_leo: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="partitions-views", daemon=True)

    def __enter__(self) -> Views:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            for b, st in self.m.views().items():
                for tp, v in st.get("partitions", {}).items():
                    if tp.rsplit("-", 1)[0] != self.topic:
                        continue
                    seen = self.epochs.setdefault((b, tp), [])
                    if not seen or seen[-1] != v["leader_epoch"]:
                        seen.append(v["leader_epoch"])
                    if v["role"] == "leader":
                        key = (tp, v["leader_epoch"])
                        self.leaders.setdefault(key, set()).add(b)
                        self.hw[key] = max(self.hw.get(key, -1), v["hw"])
                        self.first_leo.setdefault(key, v["leo"])
            self._stop.wait(self.interval)

    def problems(self) -> list[str]:
        out = [f"{tp} led by {sorted(bs)} at leader epoch {e}" for (tp, e), bs in self.leaders.items() if len(bs) > 1]
        out += [
            f"broker {b} saw {tp}'s leader epoch go {es}" for (b, tp), es in self.epochs.items() if es != sorted(es)
        ]
        # acknowledged (acks=all) records are below the leader's high watermark: each later leader's log held
        # at least that many when it was first seen leading
        for (tp, e), hw in self.hw.items():
            later = sorted((e2, leo) for (tp2, e2), leo in self.first_leo.items() if tp2 == tp and e2 > e)
            if later and later[0][1] < hw:
                out.append(
                    f"{tp}: leader epoch {e} acknowledged up to {hw}, epoch {later[0][0]}'s log ended at {later[0][1]}"
                )
        return out


def repeated_requests(m: cm.Matrix) -> list[str]:
    """Requests written twice: one (controller epoch, batch, broker, api, part) pair more than once."""
    seen: dict[tuple[Any, ...], int] = {}
    for msgs in fencing.messages(m.bootstrap, m.topics["requests"]).values():
        for x in msgs:
            key = (
                x.get("controllerEpoch"),
                x.get("batchId"),
                x.get("brokerId"),
                x.get("api"),
                x.get("part"),
                json.dumps(x, sort_keys=True),
            )
            seen[key] = seen.get(key, 0) + 1
    return [f"request written {n} times: {k[:5]}" for k, n in seen.items() if n > 1][:5]
