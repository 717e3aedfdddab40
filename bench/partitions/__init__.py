"""Network partitions and a ZooKeeper ensemble's failures (issue 41, items 1, 2, 3, 4 and 8).

Every process is real and runs on a test host of its own, a network namespace (``bench/harness/netns.py``):
Debian's ZooKeeper as an ensemble of three servers (one host each), Apache Kafka (one KRaft node), five
simulated broker processes (``python -m simbrokers``) and ``livectl run`` controllers on one checkpoint (the
crash matrix's harness, :mod:`bench.harness`). "Cut off from ZooKeeper" cuts a host from all three servers.
A cut is a pair of blackhole routes between two hosts: silent, both ways, nothing refused; healing deletes
them. The test process (the root namespace) still reaches every host, so it observes throughout.

Faults (``--faults``):

- ``zk-cut:idle``: the active controller cut off from ZooKeeper between micro-batches, its link to Kafka
  kept; input (a creation, an invalid command, a record that is not JSON) arrives meanwhile. The standby
  takes over once the cut-off one's session expires and answers it; the link returns.
- ``zk-cut:before-zk-writes``: the same, cut as the micro-batch holding a creation is planned in the
  checkpoint (``offsets/N``) and before its ZooKeeper writes.
- ``zk-cut:after-zk-writes``: the same, cut right after the first partition state of a 150-partition
  creation reached ZooKeeper: the batch's other transactions, requests and admin result still to go.
- ``broker-zk-cut``: a simulated broker that leads partitions cut off from ZooKeeper, not from Kafka: its
  registration expires while it still serves; the link returns.
- ``kafka-cut``: the active controller cut off from Kafka, not from ZooKeeper, while input waits; the link
  returns.
- ``kafka-cut:in-batch``: the same, cut as the micro-batch holding a creation is planned, a standby waiting,
  held past ``sink_retry_timeout_ms``; what the controller does is recorded, then the link returns.
- ``zk-leader-kill:reassign`` / ``zk-leader-kill:broker-failure``: the ensemble's leader SIGKILLed as a
  reassignment's RS is written / as a leading broker's registration goes after its SIGKILL; it is started
  again once the work is done.
- ``zk-minority-cut:reassign`` / ``zk-minority-cut:broker-failure``: the same moments, the server holding the
  active controller's session (a follower, or the leader when the session is there) cut off from the other
  two servers and from every other host; healed once the work is done. For these four the active
  controller must keep its lease and epoch (its session moves to another server) and finish the work, and
  every server's copy of the tree must be the same afterwards.
- ``zk-quorum-cut:reassign``: the server holding the active controller's session cut off from the other two
  servers only, its clients still reaching it, a standby waiting, as a reassignment is sent: the controller
  keeps its lease, or is fenced (exit 3, one line) and the standby finishes.
- ``zk-degraded`` / ``kafka-degraded``: the active controller's link to the ensemble / to Kafka degraded,
  not cut (``tc``'s ``tbf``: 32 kbit/s, a queue of two packets, tail drops; both ways), a standby waiting,
  while a 150-partition creation, an invalid command and a leading broker's SIGKILL arrive; healed once the
  work is done (at least 30 s): the controller carries on slower, or gives up its lease with one line and the
  standby takes over (:mod:`bench.partitions.degraded`; the ``tbf`` drop counts are in the row).
- ``worker-cut`` (item 5): the controller under ``spark-submit`` on a Spark standalone cluster whose two
  workers are on hosts of their own; the worker running a task of a micro-batch's stateful stage cut off from
  the driver, whichever it is: the executor is declared lost, the task runs again on the other worker, the
  batch's outputs appear once (:mod:`bench.partitions.worker_cut`). It needs the packed environment
  (``livectl package-env``), built at the run's start unless ``--env-archive`` names one.

Checked for every fault (item 8): no message of the cut-off controller's epoch on the requests,
admin-results or rejected topics once it was cut off (and no znode written after the link returned but
by its successor), leader and controller epochs only grow, no two brokers leading one partition at one
leader epoch (the brokers' own views), every admin command answered once with its final result, no
acknowledged record lost (the simulated brokers' data plane, where records are produced), and ZooKeeper and
the brokers' views agreeing after healing (the crash matrix's convergence check).

Run (as root: namespaces and routes)::

    .venv/bin/python -m bench partitions                     # every fault
    .venv/bin/python -m bench partitions --faults zk-cut:idle
    .venv/bin/python -m bench partitions --faults zk-degraded,kafka-degraded
    .venv/bin/python -m bench partitions --faults worker-cut --env-archive dist/livectl-env.tar.gz

Prints the table (fault, what happened, seconds, problems) and writes
``bench/results/partitions-<UTC stamp>.json``. Exit code 1 when a fault broke an invariant.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench import harness as cm
from bench.harness import netns
from bench.partitions.common import CI_FAULTS, FAULTS, Hosts, Row, hosts
from bench.partitions.degraded import degraded_link
from bench.partitions.ensemble import ensemble_fault, quorum_cut
from bench.partitions.kafka_cuts import kafka_cut, kafka_cut_in_batch
from bench.partitions.worker_cut import worker_cut
from bench.partitions.zookeeper_cuts import broker_zk_cut, zk_cut

__all__ = ["CI_FAULTS", "FAULTS", "Hosts", "Row", "main", "run"]


def run(
    faults: list[str],
    run_dir: Path,
    log: Callable[[str], None] = print,
    *,
    env_archive: Path | None = None,
    shaping: netns.Shaping | None = None,
) -> list[Row]:
    """``faults`` in order on one cluster (one Matrix: its controllers and brokers), on fresh hosts.
    ``env_archive``: the packed environment ``worker-cut`` submits the controller with (built here, beside the
    services' start, when it is ``None`` and ``worker-cut`` is among ``faults``). ``shaping``: the degraded
    faults' link (default: :data:`bench.partitions.degraded.ZK_SHAPING` and ``KAFKA_SHAPING``)."""
    from bench.harness.sparkcluster import EnvBuild

    rows = []
    build = EnvBuild(run_dir / "env") if env_archive is None and "worker-cut" in faults else None
    try:
        with hosts(run_dir) as h:
            m = h.matrix(run_dir / "cluster")
            try:
                m.open()
                for fault in faults:
                    if fault == "worker-cut":
                        archive = env_archive if build is None else build.archive()
                        assert archive is not None
                        rows.append(worker_cut(h, m, archive, log=log))
                        continue
                    if m.active is None or not m.active.alive():
                        m.wait_loaded(m.start_controller())
                    rows.append(_fault(h, m, fault, log, shaping))
            finally:
                m.close()
    finally:
        if build is not None:
            build.discard()
    return rows


def _fault(h: Hosts, m: cm.Matrix, fault: str, log: Callable[[str], None], shaping: netns.Shaping | None = None) -> Row:
    """One of the faults run by ``livectl run`` controllers (every fault but ``worker-cut``)."""
    if fault.startswith("zk-cut:"):
        return zk_cut(h, m, fault.split(":", 1)[1], log)
    if fault == "broker-zk-cut":
        return broker_zk_cut(h, m, log)
    if fault == "kafka-cut":
        return kafka_cut(h, m, log=log)
    if fault == "kafka-cut:in-batch":
        return kafka_cut_in_batch(h, m, log=log)
    if fault in ("zk-degraded", "kafka-degraded"):
        return degraded_link(h, m, fault.split("-", 1)[0], shaping=shaping, log=log)
    if fault == "zk-quorum-cut:reassign":
        return quorum_cut(h, m, log)
    if fault.split(":", maxsplit=1)[0] in ("zk-leader-kill", "zk-minority-cut") and fault in FAULTS:
        return ensemble_fault(h, m, fault, log)
    raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--faults", default=",".join(FAULTS), help="comma-separated faults (default: all)")
    ap.add_argument(
        "--env-archive",
        type=Path,
        help="worker-cut: the packed environment to submit the controller with (livectl package-env's output; "
        "default: built at the start of the run)",
    )
    ap.add_argument(
        "--degraded-rate", help="zk-degraded, kafka-degraded: the link's rate, in tc's units (default: 32kbit)"
    )
    ap.add_argument(
        "--degraded-queue", help="zk-degraded, kafka-degraded: the tbf's queue, in tc's units (default: 3000b)"
    )
    args = ap.parse_args()
    if args.env_archive is not None and not args.env_archive.is_file():
        ap.error(f"--env-archive: {args.env_archive} is not a file")
    faults = [f for f in args.faults.split(",") if f]
    for f in faults:
        if f not in FAULTS:
            ap.error(f"--faults: unknown fault {f!r}; known: {', '.join(FAULTS)}")
    if os.geteuid() != 0:
        ap.error("network namespaces need root")
    from bench.harness import machine_info, print_table, spark_scratch, write_results

    spark_scratch()
    run_dir = Path(tempfile.mkdtemp(prefix="livectl-partitions-"))
    shaping = None
    if args.degraded_rate or args.degraded_queue:
        shaping = netns.Shaping(
            rate=args.degraded_rate or netns.Shaping.rate, limit=args.degraded_queue or netns.Shaping.limit
        )
    rows = run(faults, run_dir, env_archive=args.env_archive.resolve() if args.env_archive else None, shaping=shaping)
    print()
    print_table(["fault", "what happened", "cut→converged s", "invariants held"], [r.cells() for r in rows])
    for r in rows:
        if r.problems:
            print(f"{r.fault}: {r.problems}")
    write_results("partitions", {"machine": machine_info(), "rows": [r.__dict__ for r in rows]})
    return 0 if all(not r.problems for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
