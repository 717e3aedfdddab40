"""Reassignment throttles, written as Kafka's tool writes them
(``ReassignPartitionsCommand.modifyReassignmentThrottle``):

* on each moving topic, ``leader.replication.throttled.replicas`` = ``partition:broker`` for every source
  replica (the replicas the partition has, or its origin replicas when it is already moving) and
  ``follower.replication.throttled.replicas`` = ``partition:broker`` for every destination (a target
  replica that is not a source), items sorted as text, as Kafka's ``TreeSet`` sorts them;
* on every broker a moving partition's sources or destinations live on, ``leader.replication.throttled.rate``
  and ``follower.replication.throttled.rate`` = ``--throttle`` (bytes/s), and
  ``replica.alter.log.dirs.io.max.bytes.per.second`` = ``--replica-alter-log-dirs-throttle``.

Topic configs go through the controller (:func:`admin.configs.alter_topic_configs`); broker configs go to
``/config/brokers/<id>``; each change creates Kafka's ``/config/changes`` notification. ``--verify`` clears
every throttle (the rates on all brokers, the replica lists on the file's topics) once no partition of the
file is still moving, as Kafka does; ``--cancel`` too, unless ``--preserve-throttles``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from kazoo.exceptions import NoNodeError

from admin import configs
from admin.common import (
    zk_connect,
)
from admin.reassign.state import Moving
from admin.zkread import connect
from core.kafka import zkdata
from core.kafka.configs import (
    ALTER_LOG_DIRS_THROTTLED_RATE,
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
)
from core.model import TopicPartition
from sinks.entity_configs import change_broker_configs, read_entity_configs

BROKER_THROTTLES = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, ALTER_LOG_DIRS_THROTTLED_RATE)


TOPIC_THROTTLES = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)


def throttled_replicas(
    proposed: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
    moving: Mapping[TopicPartition, Moving],
) -> tuple[dict[str, str], dict[str, str], set[int]]:
    """Kafka's move map: per topic the leader and follower throttled-replica lists, and the brokers
    involved. Reassignments already in progress take part with their origin replicas as sources."""
    moves: dict[TopicPartition, tuple[set[int], set[int]]] = {
        tp: (set(m.origin), set(m.adding)) for tp, m in moving.items()
    }
    for tp, replicas in proposed.items():
        sources = moves[tp][0] if tp in moves else set(current[tp])
        moves[tp] = (sources, set(replicas) - sources)
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    brokers: set[int] = set()
    for tp, (sources, destinations) in moves.items():
        leader.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in sources)
        follower.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in destinations)
        brokers |= sources | destinations
    topics = {tp.topic for tp in proposed}
    return (
        {t: ",".join(sorted(leader[t])) for t in sorted(topics)},
        {t: ",".join(sorted(follower.get(t, set()))) for t in sorted(topics)},
        brokers,
    )


def set_throttles(
    args: argparse.Namespace,
    proposed: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
    moving: Mapping[TopicPartition, Moving],
) -> None:
    print("Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle "
          "is removed.")  # fmt: skip
    leader, follower, brokers = throttled_replicas(proposed, current, moving)
    if args.throttle is not None:
        for topic in sorted(leader):
            add = {LEADER_THROTTLED_REPLICAS: leader[topic], FOLLOWER_THROTTLED_REPLICAS: follower[topic]}
            configs.alter_topic_configs(args, topic, add, ())
    rates: dict[str, str] = {}
    if args.throttle is not None:
        rates[LEADER_THROTTLED_RATE] = rates[FOLLOWER_THROTTLED_RATE] = str(args.throttle)
    if args.replica_alter_log_dirs_throttle is not None:
        rates[ALTER_LOG_DIRS_THROTTLED_RATE] = str(args.replica_alter_log_dirs_throttle)
    with configs.writer(zk_connect(args)) as zk:
        for b in sorted(brokers):
            change_broker_configs(zk, str(b), rates)
    if args.throttle is not None:
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    if args.replica_alter_log_dirs_throttle is not None:
        print(f"The replica-alter-dir throttle limit was set to {args.replica_alter_log_dirs_throttle} B/s")


def clear_throttles(args: argparse.Namespace, topics: Sequence[str]) -> None:
    """Remove the throttle rates from every broker that has one and the replica lists from ``topics``."""

    with configs.writer(zk_connect(args)) as zk:
        try:
            entities = sorted(zk.get_children(zkdata.CONFIG_BROKERS))
        except NoNodeError:
            entities = []
        throttled = []
        for b in entities:
            have = read_entity_configs(zk, "brokers", b)
            gone = [k for k in BROKER_THROTTLES if k in have]
            if gone:
                change_broker_configs(zk, b, {}, gone)
                throttled.append(b)
    if throttled:
        print(f"Clearing broker-level throttles on brokers {','.join(throttled)}")
    with connect(zk_connect(args)) as reader:
        topic_configs = {t: reader.topic_config(t) for t in topics}
    for t in sorted(topic_configs):
        gone = [k for k in TOPIC_THROTTLES if k in topic_configs[t]]
        if gone:
            print(f"Clearing topic-level throttles on topic {t}")
            configs.alter_topic_configs(args, t, {}, gone)
