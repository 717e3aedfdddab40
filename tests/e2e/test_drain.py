"""Draining a broker that leads partitions, under producer load, in the simulated cluster (issue 44, item 1).

Real processes: ZooKeeper and Kafka of the session, five simulated brokers each appending 50 records/s to
every partition it leads (acks=all: refused below ``min.insync.replicas``), a ``livectl run`` controller (the
crash matrix's harness, :mod:`bench.harness`). ``livectl brokers --drain 5`` moves broker 5's leaderships
first, then its replicas two partitions at a time under a throttle, while a watcher reads every partition's
state: no partition is ever without a live leader, and at the end broker 5 holds and leads nothing, every
partition converged on its new replicas, each broker's view agreeing with ZooKeeper. Meanwhile ``reassign --list``
and the controller's status page show each moving partition's data moved, from the brokers' log-dirs reports
(issue 44, item 3); the 1 MB/s throttle makes each move last long enough to be seen."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from admin.cli import main
from bench import harness as cm
from livectl import local

pytestmark = pytest.mark.e2e

DRAINED = 5
#: broker 5 leads partitions 0 and 1, follows in 2, 3 and 5; 4 does not have it
ASSIGNMENT = {0: (5, 1, 2), 1: (5, 2, 3), 2: (1, 5, 3), 3: (2, 3, 5), 4: (3, 4, 1), 5: (4, 5, 1)}


class Watch(threading.Thread):
    """Reads every partition's state znode until stopped; records any moment one had no live leader."""

    def __init__(self, m: cm.Matrix, topic: str) -> None:
        super().__init__(daemon=True)
        self.m, self.topic = m, topic
        self.stop = threading.Event()
        self.offline: list[str] = []
        self.leaders_seen: set[tuple[int, int]] = set()
        #: set once it has read every partition's state: the leaders before the drain are in leaders_seen
        self.looked = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            live = set(self.m.registered_brokers())
            for p in ASSIGNMENT:
                state, _ = self.m.znode(f"/brokers/topics/{self.topic}/partitions/{p}/state")
                leader = int(state["leader"]) if state else -1
                self.leaders_seen.add((p, leader))
                if leader not in live:
                    self.offline.append(f"{self.topic}-{p}: leader {leader} at {time.monotonic():.1f}")
            self.looked.set()
            self.stop.wait(0.2)


class Progress(threading.Thread):
    """Runs ``livectl reassign --list --output json`` (a process of its own) until stopped: the data moved of
    every partition being reassigned, from the simulated brokers' log-dirs reports (issue 44, item 3)."""

    def __init__(self, m: cm.Matrix, log_dirs_topic: str, status_page: str) -> None:
        super().__init__(daemon=True)
        self.status_page = status_page
        #: the status page's data cells of the reassignments table, as it showed them
        self.page_data: list[str] = []
        self.argv = [
            sys.executable, "-m", "admin", "reassign", "--list", "--output", "json", "--log-dirs-topic", log_dirs_topic,
            "--zookeeper", m.zk_connect, "--bootstrap-server", m.bootstrap,
        ]  # fmt: skip
        self.stop = threading.Event()
        self.samples: list[dict[str, Any]] = []
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            out = subprocess.run(self.argv, check=False, capture_output=True, text=True, timeout=60)
            if out.returncode != 0:
                self.errors.append(out.stderr[-500:])
            else:
                self.samples += [
                    {"tp": f"{r['topic']}-{r['partition']}", **r["progress"]}
                    for r in json.loads(out.stdout)["reassignments"]
                ]
            try:
                with urllib.request.urlopen(self.status_page, timeout=10) as page:
                    self.page_data += re.findall(r"<td>(moved [^<]*)</td>", page.read().decode())
            except OSError as e:
                self.errors.append(f"status page: {e}")
            self.stop.wait(0.5)


def test_drain_a_leading_broker_under_producer_load(
    zookeeper: local.Service, kafka_broker: local.Service, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_dirs = f"{tmp_path.name[:40]}-{time.monotonic_ns()}.log-dirs"
    m = cm.Matrix(
        zookeeper.connect,
        kafka_broker.bootstrap,
        tmp_path / "cluster",
        broker_args=("--produce-rate", "50", "--log-dirs-topic", log_dirs, "--log-dirs-interval-ms", "500"),
    )
    try:
        m.open()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        c = m.start_controller({"metrics_port": port, "log_dirs_topic": log_dirs})
        m.wait_loaded(c)
        topic = f"{m.name}-orders"
        cm.create_topic(m, "c1", topic, ASSIGNMENT)
        cm.wait_online(m, topic, dict(ASSIGNMENT))
        watch = Watch(m, topic)
        watch.start()
        assert watch.looked.wait(60), "the watcher never read the partition states"
        progress = Progress(m, log_dirs, f"http://127.0.0.1:{port}/")
        progress.start()
        argv = [
            "brokers", "--drain", str(DRAINED), "--batch-size", "2", "--throttle", "1000000", "--timeout", "600",
            "--zookeeper", m.zk_connect, "--bootstrap-server", m.bootstrap,
            "--admin-topic", m.topics["admin"], "--admin-results-topic", m.topics["results"],
        ]  # fmt: skip
        assert main(argv) == 0, c.text()[-3000:]
        watch.stop.set()
        watch.join(10)
        progress.stop.set()
        progress.join(60)
        # the data moved, from the brokers' own log sizes: sane whenever the leader had reported, and seen
        assert not progress.errors, progress.errors[:3]
        known = [s for s in progress.samples if s["bytes_to_move"] is not None]
        assert known, progress.samples[:20]
        for s in known:
            assert s["bytes_to_move"] > 0 and 0 <= s["bytes_moved"] <= s["bytes_to_move"], s
            assert s["seconds_left"] is None or s["seconds_left"] >= 0, s
            assert s["bytes_per_second"] is None or s["bytes_per_second"] >= 0, s
        # the status page computed the same figures from the reports its controller read
        assert any(re.fullmatch(r"moved \S+ \S+ of \S+ \S+ \(\d+%\), .*", d) for d in progress.page_data), (
            progress.page_data[:20]
        )
        out = capsys.readouterr().out
        assert "Moved the leadership of 2 partition(s) off broker 5." in out
        assert f"Broker {DRAINED} is drained" in out
        znode, _ = m.znode(f"/brokers/topics/{topic}")
        assert znode is not None
        final = {int(p): tuple(r) for p, r in znode["partitions"].items()}
        assert all(DRAINED not in r and len(set(r)) == 3 for r in final.values()), final
        assert {p: set(r) - {DRAINED} <= set(final[p]) for p, r in ASSIGNMENT.items()} == dict.fromkeys(
            ASSIGNMENT, True
        )
        # every partition converged on its new replicas: leaders, ISRs and each broker's view as ZooKeeper says
        cm.wait_converged(m, "the drained cluster", cm.Expect({topic: final}), 180)
        assert not watch.offline, watch.offline[:5]
        assert (0, DRAINED) in watch.leaders_seen, "broker 5 led partition 0 when the drain began"
        hosted = [k for k in m.views().get(DRAINED, {}).get("partitions", {}) if k.startswith(topic)]
        assert hosted == [], "broker 5 deleted its replicas"
        c.stop()
    finally:
        m.close()
