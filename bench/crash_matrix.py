"""Crash matrix: the controller process SIGKILLed at points taken from ZooKeeper watches; every point must
converge to the tree a clean run leaves.

Real services on free loopback ports (Debian's ZooKeeper, Apache Kafka), five simulated broker
*processes* (``python -m simbrokers``, one each), and the controller as real ``livectl run`` processes (each
its own Spark driver, ``local[2]``) on one shared checkpoint. For each point, on topics of its own:

1. the stage is set (topics created and online in ZooKeeper and in the brokers' own view);
2. in ``standby`` mode a second ``livectl run`` is started and waits for the lease; a watch is armed on
   ZooKeeper (``kazoo`` DataWatch) that SIGKILLs the active controller's process group (its Python and its
   Spark JVM) the moment the point's write is seen;
3. the scenario's trigger is fired (an admin command, a broker SIGTERMed or SIGKILLed);
4. after the kill the standby takes over (``standby``) once the dead one's ZooKeeper session ends, or a new
   ``livectl run`` is started on the same checkpoint (``restart``); ``clean`` kills nothing;
5. convergence is awaited and checked against the tree a clean run leaves: each topic's assignment with no
   adding/removing replicas, leader = the first live replica of the assignment, ISR = the live replicas,
   no ``/admin`` leftovers (``/admin/reassign_partitions``, ``/admin/delete_topics/<t>``), a deleted topic
   gone with its config; each live broker's own view (``--status-file``) at ZooKeeper's leader and leader
   epoch, the leader at ZooKeeper's ISR; the admin command answered exactly once with its final result.

Points (``scenario:point``): reassignment ``reassign:rs-written`` (target+origin written),
``reassign:new-in-isr`` (first new replica in the ISR), ``reassign:leader-moved``,
``reassign:target-written``, ``reassign:admin-path-removed`` (Kafka's legacy ``/admin/reassign_partitions``,
read by the controller at failover); creation ``create:topic-written``, ``create:partial`` (a 150-partition
topic killed after its first transactions, ``zk_ops_per_transaction`` = 20); deletion
``delete:marker-created``, ``delete:topic-removed``; ``shutdown:first-leader-moved`` (controlled shutdown,
SIGTERM to a broker), ``shutdown:batch-planned`` (the micro-batch holding the broker's ControlledShutdown
planned in the checkpoint's ``offsets/`` and not committed: polled, not watched); ``failure:first-state-write``
(broker SIGKILLed, its session ends);
``failure:while-down`` (the controller killed first, then the broker, while no controller runs).

One controller start per point (the next point's active is the one that converged the previous one).

Run::

    .venv/bin/python -m bench crash_matrix                                   # every point, both modes
    .venv/bin/python -m bench crash_matrix --points reassign:rs-written,delete:marker-created --modes restart

Prints the table (point, mode, what the watch saw, seconds to converge, problems) and writes
``bench/results/crash-matrix-<UTC stamp>.json``. Exit code 1 when a point did not converge.
"""

from __future__ import annotations

import argparse
import sys

from bench.harness import MODES, POINTS, machine_info, print_table, run_matrix, services, write_results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", default=",".join(POINTS), help="comma-separated points (default: all)")
    ap.add_argument("--modes", default="restart,standby", help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--keep", action="store_true", help="keep the run folder (logs of every process)")
    args = ap.parse_args()
    points = [p for p in args.points.split(",") if p]
    modes = [x for x in args.modes.split(",") if x]
    for p in points:
        if p not in POINTS:
            ap.error(f"--points: unknown point {p!r}; known: {', '.join(POINTS)}")
    for x in modes:
        if x not in MODES:
            ap.error(f"--modes: unknown mode {x!r}; known: {', '.join(MODES)}")
    plan = [(p, x) for x in modes for p in points]
    with services(keep=args.keep) as svc:
        rows = run_matrix(svc.zookeeper.connect, svc.broker.bootstrap, svc.run_dir / "matrix", plan)
        print()
        print_table(["point", "mode", "seen at the kill", "kill→converged s", "converged"], [r.cells() for r in rows])
        for r in rows:
            if r.problems:
                print(f"{r.point} ({r.mode}): {r.problems}")
        write_results("crash-matrix", {"machine": machine_info(), "rows": [r.__dict__ for r in rows]})
    return 0 if all(r.converged for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
