"""``topics --list`` and ``topics --describe``, read from ZooKeeper and reported as ``kafka-topics`` does.

* ReplicationFactor is the replica count the topic has once its reassignments end: the target replicas
  (replicas minus removing ones) of its first partition, not the replica set of the moment, which counts
  the adding replicas too.
* ``Offline:`` lists the replicas on brokers that are not registered and the replicas the controller
  holds offline on a failed log dir (``/livectl/offline_replicas/<t>``, :mod:`core.offline_replicas`),
  as Kafka's tool lists the Metadata ``offlineReplicas``: in replica order, each once.
* ``--under-replicated-partitions``, ``--unavailable-partitions``, ``--under-min-isr-partitions`` and
  ``--at-min-isr-partitions`` print only the partitions that match, each by :mod:`core.figures`' definition
  (Kafka's ``kafka-topics``), the one the status page, the metrics and the Spark UI count by; partitions of
  topics marked for deletion match none. ``--topics-with-overrides`` prints only the topic line of topics
  with config overrides. The effective ``min.insync.replicas`` is the topic's override, else the cluster
  default in ``/config/brokers/<default>``, else Kafka's default 1.
* ``--output json`` prints one JSON document with the same facts.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from admin.zkread import ZkReader, connect
from core import figures
from core.figures import DEFAULT_MIN_ISR, MIN_INSYNC_REPLICAS


@dataclass(frozen=True)
class PartitionView:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    def under_replicated(self) -> bool:
        return figures.is_under_replicated(self.replicas, self.adding_replicas, len(self.isr))

    def unavailable(self, live: set[int]) -> bool:
        return not figures.has_live_leader(self.leader, live)

    def under_min_isr(self, min_isr: int, live: set[int]) -> bool:
        return figures.is_under_min_isr(self.leader, live, len(self.isr), min_isr)


@dataclass(frozen=True)
class TopicView:
    name: str
    topic_id: str | None
    partition_count: int
    replication_factor: int
    configs: dict[str, str]
    marked_for_deletion: bool
    min_insync_replicas: int
    partitions: tuple[PartitionView, ...]


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--under-min-isr-partitions", action="store_true", help="--describe: only partitions with ISR < min ISR"
    )
    p.add_argument(
        "--at-min-isr-partitions", action="store_true", help="--describe: only partitions with ISR = min ISR"
    )
    p.add_argument("--topics-with-overrides", action="store_true", help="--describe: only topics with config overrides")
    p.add_argument(
        "--output", choices=["text", "json"], default="text", help="--describe/--list, and a --dry-run: text or json"
    )


def _ints(xs: Sequence[int]) -> str:
    return ",".join(map(str, xs))


def read_topics(zk: ZkReader, names: Sequence[str]) -> list[TopicView]:
    live = set(zk.brokers())
    deleting = zk.marked_for_deletion()
    default_configs = zk.broker_default_config()
    cluster_min_isr = figures.min_isr_of(default_configs.get(MIN_INSYNC_REPLICAS)) or DEFAULT_MIN_ISR
    out = []
    for name in names:
        znode = zk.topic(name)
        if znode is None:
            continue
        configs = zk.topic_config(name)
        adding = dict(znode.adding_replicas)
        removing = dict(znode.removing_replicas)
        on_failed_dirs = zk.offline_dir_replicas(name)
        parts = []
        for p, replicas in znode.partitions:
            failed_dir = set(on_failed_dirs.get(p, ()))
            st = zk.partition_state(name, p)
            parts.append(
                PartitionView(
                    p,
                    st.leader if st is not None else -1,
                    tuple(replicas),
                    tuple(st.isr) if st is not None else (),
                    tuple(adding.get(p, ())),
                    tuple(removing.get(p, ())),
                    tuple(r for r in replicas if r not in live or r in failed_dir),
                )
            )
        rf = len(parts[0].target) if parts else 0
        out.append(
            TopicView(
                name,
                znode.topic_id,
                len(parts),
                rf,
                configs,
                name in deleting,
                figures.effective_min_isr(configs, cluster_min_isr),
                tuple(parts),
            )
        )
    return out


def _partition_filter(args: argparse.Namespace, live: set[int]) -> Callable[[TopicView, PartitionView], bool] | None:
    checks: list[Callable[[TopicView, PartitionView], bool]] = []
    if args.under_replicated_partitions:
        checks.append(lambda _t, p: p.under_replicated())
    if args.unavailable_partitions:
        checks.append(lambda _t, p: p.unavailable(live))
    if args.under_min_isr_partitions:
        checks.append(lambda t, p: p.under_min_isr(t.min_insync_replicas, live))
    if args.at_min_isr_partitions:
        checks.append(lambda t, p: figures.is_at_min_isr(len(p.isr), t.min_insync_replicas))
    if not checks:
        return None
    # a topic queued for deletion counts in no figure (core.figures)
    return lambda t, p: not t.marked_for_deletion and any(c(t, p) for c in checks)


def describe(
    args: argparse.Namespace, zk_hosts: str, match: Callable[[str], bool], missing: Callable[[], None]
) -> None:
    with connect(zk_hosts) as zk:
        names = [t for t in zk.topics() if match(t)]
        if not names:
            missing()
        live = set(zk.brokers())
        topics = read_topics(zk, names)
    if args.topics_with_overrides:
        topics = [t for t in topics if t.configs]
    keep = _partition_filter(args, live)
    if args.output == "json":
        doc = []
        for t in topics:
            o = asdict(t)
            o["partitions"] = [asdict(p) for p in t.partitions if keep is None or keep(t, p)]
            if args.topics_with_overrides:
                del o["partitions"]
            doc.append(o)
        print(json.dumps({"topics": doc}, indent=2))
        return
    for t in topics:
        if keep is None:
            cfg = ",".join(f"{k}={v}" for k, v in sorted(t.configs.items()))
            head = (
                f"Topic: {t.name}\tTopicId: {t.topic_id or 'none'}\tPartitionCount: {t.partition_count}\t"
                f"ReplicationFactor: {t.replication_factor}\tConfigs: {cfg}"
            )
            print(head + ("\tMarkedForDeletion: true" if t.marked_for_deletion else ""))
            if args.topics_with_overrides:
                continue
        for p in t.partitions:
            if keep is not None and not keep(t, p):
                continue
            line = (
                f"\tTopic: {t.name}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}\t"
                f"Replicas: {_ints(p.replicas)}\tIsr: {_ints(p.isr)}"
            )
            if p.adding_replicas:
                line += f"\tAdding Replicas: {_ints(p.adding_replicas)}"
            if p.removing_replicas:
                line += f"\tRemoving Replicas: {_ints(p.removing_replicas)}"
            if p.offline_replicas:
                line += f"\tOffline: {_ints(p.offline_replicas)}"
            print(line)


def list_topics(args: argparse.Namespace, zk_hosts: str, match: Callable[[str], bool]) -> None:
    with connect(zk_hosts) as zk:
        deleting = zk.marked_for_deletion()
        names = [t for t in zk.topics() if match(t)]
    if args.output == "json":
        doc: list[dict[str, Any]] = [{"name": t, "marked_for_deletion": t in deleting} for t in names]
        print(json.dumps({"topics": doc}, indent=2))
        return
    for t in names:
        print(f"{t} - marked for deletion" if t in deleting else t)


def looks_literal(pattern: str) -> bool:
    return not re.search(r"[\\^$.|?*+()\[\]{}]", pattern)
