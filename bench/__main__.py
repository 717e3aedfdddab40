"""``python -m bench NAME [args]``: run one benchmark (its own ``--help`` says its options);
``python -m bench --list``: each benchmark with its purpose. Run from the checkout's root, where ``bench``
is importable (``.venv/bin/python -m bench …``)."""

from __future__ import annotations

import importlib
import sys

#: every benchmark, by module name, with what it measures in one line (tests/unit/bench checks the list
#: against the modules of bench/)
BENCHMARKS: dict[str, str] = {
    "broker_failure": "broker hard-killed -> its partitions' state znodes rewritten and LeaderAndIsr sent, "
    "beside ZooKeeper's raw write rate",
    "failover": "standby takeover after the active controller dies, and cold start from ZooKeeper",
    "admin_latency": "create-topic command -> all its partitions Online in ZooKeeper: p50 / p90 / p99",
    "crash_matrix": "the controller SIGKILLed at points seen by ZooKeeper watches: does every point converge",
    "partitions": "links cut between test hosts (network namespaces) under a running cluster: do the invariants hold",
    "long_run": "an hour at 100k partitions under admin commands, broker kills and takeovers: memory, threads, "
    "descriptors and admin latency per window, growth per hour, the invariants at the end",
    "feature_cost": "an optional feature's cost to the micro-batch (metrics, audit), with and without",
    "class_archive": "the driver's class-data-sharing archive: cold start, a standby's start and its takeover "
    "of the product's processes, with and without",
    "idle_cost": "an idle controller's CPU per trigger interval",
    "compression_cost": "each request_compression codec on a large batch's messages: send time and bytes",
    "packed_rows": "a failover's decision rows through Spark, packed beside plain",
    "worker_start": "a Python worker's start cost to a task, fresh and after Spark closed idle workers",
    "first_write": "a new controller's first write to livectl.requests after a failover (tail read, init, send)",
    "snapshot_reread": "a new controller's read of the ZooKeeper tree, cold and warm, against another tree's reader",
    "state_api": "one bucket's state in Spark changed 1 % per batch: applyInPandasWithState's blob beside "
    "transformWithStateInPandas' MapState",
    "bucket_cost": "the Python of one bucket's applyInPandasWithState call (--failover-call: the yardstick)",
    "core_step": "one core.controller.step handling a broker failure (pure Python)",
    "request_sink_cost": "decoding decision rows and building the request messages on the driver",
    "dispatch_cost": "the driver's side of one large micro-batch, from Spark's Arrow result to the messages",
    "alter_partition_batch": "one micro-batch of AlterPartition records (a broker's return) part by part, "
    "per record and per batch",
    "event_round_trip": "an input event's trip: validation, routing, the bucket, per step",
    "validation_cost": "the input suite's cost per micro-batch, passing and failing batches",
    "zk_sink_cost": "the ZooKeeper sink's write_batch beside the raw fenced multi-op rate",
    "snapshot_cost": "a new controller's ZooKeeper read part by part; multiRead beside one get per znode",
    "handoff_cost": "the failover hand-off: ZooKeeper read, each bucket's file written and shipped",
    "source_read": "the source's read of a 200k-record backlog on a clean link, by its fetch size (A/B)",
    "cpu_threads": "who uses the CPU during each Spark job of a benchmark run (record, then report)",
}

_USAGE = "usage: python -m bench NAME [args] | --list | --help"


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE)
        print(__doc__)
        return 0 if argv else 2
    if argv[0] == "--list":
        width = max(map(len, BENCHMARKS))
        for name, purpose in BENCHMARKS.items():
            print(f"{name:{width}}  {purpose}")
        return 0
    name, args = argv[0], argv[1:]
    if name not in BENCHMARKS:
        print(f"{_USAGE}\nunknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}", file=sys.stderr)
        return 2
    sys.argv = [f"bench {name}", *args]  # argparse names the program after it
    result = importlib.import_module(f"bench.{name}").main()
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
