"""Benchmark: the admin-path watcher's first round after a failover — it reads every topic znode (setting
the data watch Kafka's ``PartitionModificationsHandler`` sets) and, before, decoded each one too.

ZooKeeper and an Apache Kafka broker started here (stopped by PID), a tree of ``--partitions`` partitions (100 per
topic: 1,000 topic znodes at 100k) read once by a :class:`streaming.zk.snapshot_reader.SnapshotReader`; then, per
round and alternating, a new watcher primed with that snapshot does its first round (``sync``, what
``start`` runs first):

* ``decoded`` — primed without the topic znodes' data, as before: every topic znode decoded;
* ``compared`` — primed with the data as the snapshot's read got it (``SnapshotReader.topic_data``, as the
  hand-off now does): only the topic znodes whose data differ are decoded (here ``--changed`` of them,
  rewritten with one partition more after the read, so each round publishes the same events both ways).

Each round's events are checked equal between the two. Prints each round, the medians and the ratio.

Run: ``.venv/bin/python bench/watcher_first_round.py [--partitions 100000] [--rounds 5] [--changed 10]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from _common import close, machine_info, plan_layout, prepare_tree, services, write_results, zk_client
from kafka import KafkaProducer

from core.kafka import zkdata
from core.model import ReplicaAssignment
from sinks.requests import ensure_topics
from streaming.zk.admin_watch import AdminPathWatcher
from streaming.zk.snapshot_reader import SnapshotReader


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--changed", type=int, default=10, help="topic znodes given a partition more after the read")
    args = ap.parse_args()
    out: dict[str, Any] = {"benchmark": "watcher_first_round", "partitions": args.partitions}
    with services() as svc:
        out["machine"] = machine_info(svc.zookeeper.port)
        zk = zk_client(svc.zookeeper.connect)
        layout = plan_layout(args.partitions, 10, 3)
        prepare_tree(zk, layout)
        reader = SnapshotReader(zk)
        snapshot = reader.read()
        data = reader.topic_data(snapshot)
        for topic in list(layout.topics)[: args.changed]:
            parts = {p: ReplicaAssignment(r) for p, r in layout.topics[topic].items()}
            parts[len(parts)] = ReplicaAssignment((0, 1, 2))
            zk.set(zkdata.topic_path(topic), zkdata.encode_topic_znode(parts, None).encode())
        events_topic = "bench-watcher-events"
        ensure_topics(svc.broker.bootstrap, [events_topic])
        producer = KafkaProducer(bootstrap_servers=svc.broker.bootstrap, acks="all", linger_ms=0)
        runs: dict[str, list[float]] = {"decoded": [], "compared": []}
        published: dict[str, list[Any]] = {"decoded": [], "compared": []}
        for r in range(args.rounds):
            for mode in ("decoded", "compared") if r % 2 == 0 else ("compared", "decoded"):
                watcher = AdminPathWatcher(zk, producer, events_topic, 7, 1000, resync_interval_s=60)
                watcher.prime(snapshot, data if mode == "compared" else None)
                t0 = time.perf_counter()
                events = watcher.sync()
                took = time.perf_counter() - t0
                runs[mode].append(took)
                published[mode].append(events)
                print(f"round {r} {mode:8s} first round {took:.3f} s, {len(events)} events", flush=True)
        assert published["decoded"] == published["compared"], "the same events both ways"
        assert all(len(e) == args.changed for e in published["compared"])
        producer.close()
        close(zk)
    out["runs"] = runs
    med = {k: round(statistics.median(v), 3) for k, v in runs.items()}
    out["median_s"] = med
    out["compared_over_decoded"] = round(med["compared"] / med["decoded"], 2)
    ratio = out["compared_over_decoded"]
    print(f"median: decoded {med['decoded']:.3f} s, compared {med['compared']:.3f} s, ratio {ratio}")
    print(f"results: {write_results('watcher_first_round', out)}")


if __name__ == "__main__":
    sys.exit(main())
