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

from bench.harness.workloads import build_state
from core.controller import ControllerState, step
from core.decisions import BrokerRequest, ZkWrite
from core.events import BrokerFailure
from core.kafka.request_encoding import encode_body
from core.kafka.requests import WireBody
from core.states import PartitionState


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
