"""Benchmark: one ``core.controller.step`` handling a broker failure.

10 brokers, 100,000 partitions with replication factor 3 (1,000 topics x 100 partitions, Kafka's
default placement), all online. Times ``step(state, [BrokerFailure(b)])`` — elections for the
partitions the broker led, ISR shrinks for the ones it followed, the ZooKeeper writes and the batched
requests — and, as a baseline measured in the same run, a plain Python loop over the partitions that
reads each one's leader and ISR and builds a tuple. Prints both, and the ratio.

Run: ``.venv/bin/python -m bench core_step [--partitions N] [--repeat R]``. Target: under 2 s.
"""

from __future__ import annotations

import argparse
import gc
import time

from core.context import ControllerContext
from core.controller import ControllerState, step
from core.decisions import BrokerRequest, ZkWrite
from core.events import BrokerFailure
from core.kafka.request_encoding import encode_body
from core.kafka.requests import WireBody
from core.model import Broker, Endpoint, LeaderAndIsr, PartitionReplica, ReplicaAssignment, TopicPartition
from core.placement import BrokerRack, assign_replicas
from core.states import PartitionState, ReplicaState


def build_state(n_brokers: int, n_partitions: int, rf: int, per_topic: int) -> ControllerState:
    ctx = ControllerContext(controller_id=0, epoch=1, epoch_zk_version=0)
    for b in range(n_brokers):
        ctx.add_live_broker(Broker(b, 1000 + b, None, (Endpoint("PLAINTEXT", f"broker{b}", 9092),)))
    brokers = [BrokerRack(b) for b in range(n_brokers)]
    n_topics = n_partitions // per_topic
    for t in range(n_topics):
        topic = f"topic-{t:05d}"
        ctx.topic_ids[topic] = f"{t:022d}"
        placed = assign_replicas(brokers, per_topic, rf, start_index=t % n_brokers)
        for p, reps in placed.items():
            tp = TopicPartition(topic, p)
            ctx.set_assignment(tp, ReplicaAssignment(reps))
            ctx.put_leadership(tp, LeaderAndIsr(reps[0], reps, 0, 0), 1)
            ctx.put_partition_state(tp, PartitionState.ONLINE)
            for r in reps:
                ctx.replica_states[PartitionReplica(topic, p, r)] = ReplicaState.ONLINE
    return ControllerState(ctx)


def baseline(state: ControllerState, broker: int) -> float:
    t0 = time.perf_counter()
    out = []
    for tp, li in state.context.partition_leadership.items():
        lai = li.leader_and_isr
        if broker in lai.isr:
            out.append((tp, lai.leader, tuple(r for r in lai.isr if r != broker)))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    state = build_state(args.brokers, args.partitions, args.rf, 100)
    print(
        f"built {args.partitions} partitions on {args.brokers} brokers (rf {args.rf}) "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    best_step = float("inf")
    best_base = float("inf")
    for i in range(args.repeat):
        broker = i % args.brokers
        gc.collect()
        best_base = min(best_base, baseline(state, broker))
        t0 = time.perf_counter()
        new_state, decisions = step(state, [BrokerFailure(broker)])
        elapsed = time.perf_counter() - t0
        best_step = min(best_step, elapsed)
        zk = sum(1 for d in decisions if isinstance(d, ZkWrite))
        reqs = sum(1 for d in decisions if isinstance(d, BrokerRequest))
        # step() decides typed bodies (a WireBody is what the driver decodes from a bucket's row)
        size = sum(
            len(encode_body(d.body))
            for d in decisions
            if isinstance(d, BrokerRequest) and not isinstance(d.body, WireBody)
        )
        offline = sum(1 for s in new_state.context.partition_states.values() if s is PartitionState.OFFLINE)
        print(
            f"run {i}: broker {broker} failed: step {elapsed:.3f} s, {zk} ZooKeeper writes, {reqs} requests "
            f"({size / 1e6:.1f} MB of bodies), {offline} offline partitions"
        )
    print(f"step (best of {args.repeat}): {best_step:.3f} s  [target < 2 s: {'OK' if best_step < 2 else 'MISSED'}]")
    print(
        f"baseline plain loop over the partitions: {best_base:.3f} s; ratio step/baseline: {best_step / best_base:.1f}x"
    )


if __name__ == "__main__":
    main()
