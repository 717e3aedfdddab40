"""``livectl reassign`` (``kafka-reassign-partitions``): execute with throttles, verify (and clear the
throttles), cancel, list, and follow a reassignment's progress — with honest exit codes.

Throttles are written as Kafka's tool writes them (``ReassignPartitionsCommand.modifyReassignmentThrottle``):

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

``--execute`` and ``--cancel`` wait for the controller's answer to the request (as Kafka's tool waits for
the AlterPartitionReassignments response): any per-partition error is exit 1 with one line per failed
partition. With ``--wait`` they then follow the reassignment to its end, printing the partitions done out
of the total and, per partition still moving, the adding replicas not yet in the ISR (a redrawn line with a
bar on a terminal, plain lines otherwise). A reassignment that a later one superseded or cancelled ends in
exit 1, reported as such.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from kazoo.exceptions import NoNodeError

from admin import configs, files
from admin.common import (
    EXIT_OK,
    NotFinishedError,
    OperationFailedError,
    UsageError,
    bootstrap_server,
    broker_ids,
    forbid,
    ints,
    kafka_config,
    require,
    run_command,
    validated,
    zk_connect,
)
from admin.publish import ResultFollower, new_request_id, publish_command
from admin.zkread import ZkReader, connect
from core.decisions import AdminResult, AdminStatus
from core.events import AdminCommand, CancelReassignment, ReassignPartitions
from core.kafka import zkdata
from core.kafka.configs import (
    ALTER_LOG_DIRS_THROTTLED_RATE,
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
)
from core.kafka.error_codes import KafkaError as Errors
from core.model import PartitionTarget, TopicPartition

BROKER_THROTTLES = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, ALTER_LOG_DIRS_THROTTLED_RATE)
TOPIC_THROTTLES = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)

CANNOT_EXECUTE = (
    "Cannot execute because there is an existing partition assignment. Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used "
    "to change the throttle by resubmitting the current reassignment."
)


def add_options(p: argparse.ArgumentParser, action: argparse._MutuallyExclusiveGroup) -> None:
    action.add_argument("--list", action="store_true", help="list the reassignments in progress")
    action.add_argument("--describe", action="store_true", help="same as --list")
    p.add_argument(
        "--throttle",
        type=int,
        default=None,
        metavar="RATE",
        help="--execute: inter-broker replication throttle in bytes/s on the moving replicas",
    )
    p.add_argument(
        "--replica-alter-log-dirs-throttle",
        type=int,
        default=None,
        metavar="RATE",
        help="--execute: replica.alter.log.dirs.io.max.bytes.per.second on the brokers involved",
    )
    p.add_argument("--additional", action="store_true", help="--execute: add to reassignments already in progress")
    p.add_argument("--preserve-throttles", action="store_true", help="--verify/--cancel: leave the throttles in place")
    p.add_argument("--output", choices=["text", "json"], default="text", help="--verify/--list: text or json")


# ----------------------------------------------------------------------------- reading the state


@dataclass(frozen=True)
class Moving:
    """One partition being reassigned, as ``/brokers/topics/<t>`` holds it."""

    tp: TopicPartition
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


def in_progress(zk: ZkReader, topics: Sequence[str] | None = None) -> dict[TopicPartition, Moving]:
    """Every partition with adding or removing replicas (of ``topics``, or of all topics)."""
    out: dict[TopicPartition, Moving] = {}
    for t in topics if topics is not None else zk.topics():
        znode = zk.topic(t)
        if znode is None:
            continue
        adding, removing = dict(znode.adding_replicas), dict(znode.removing_replicas)
        for p, reps in znode.partitions:
            if p in adding or p in removing:
                tp = TopicPartition(t, p)
                out[tp] = Moving(tp, tuple(reps), tuple(adding.get(p, ())), tuple(removing.get(p, ())))
    return out


# ----------------------------------------------------------------------------- throttles (pure)


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


# ----------------------------------------------------------------------------- the commands


def execute(args: argparse.Namespace, path: Path) -> int:

    for option in ("--throttle", "--replica-alter-log-dirs-throttle"):
        value = getattr(args, option.lstrip("-").replace("-", "_"))
        if value is not None and value < 0:
            raise UsageError(option, f"must be 0 or more bytes/s, got {value}")
    request_id = new_request_id()
    targets = files.read_reassignment(path, request_id)
    with connect(zk_connect(args)) as zk:
        registered = set(zk.brokers())
        topics = sorted({t.topic for t in targets})
        current = _current_assignment(zk, topics)
        moving = in_progress(zk)
    for i, t in enumerate(targets):
        tp = TopicPartition(t.topic, t.partition)
        if tp not in current:
            raise UsageError(f"{path}: partitions[{i}].partition", f"partition {tp} does not exist")
        unknown = sorted(set(t.replicas) - registered)
        if unknown:
            raise UsageError(f"{path}: partitions[{i}].replicas", f"unknown broker(s) {ints(unknown)}")
    if moving and not args.additional:
        raise OperationFailedError(CANNOT_EXECUTE)
    rollback = {TopicPartition(t.topic, t.partition): current[TopicPartition(t.topic, t.partition)] for t in targets}
    print("Current partition replica assignment")
    print()
    print(files.reassignment_json(rollback))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle is not None or args.replica_alter_log_dirs_throttle is not None:
        proposed = {TopicPartition(t.topic, t.partition): t.replicas for t in targets}
        _set_throttles(args, proposed, current, moving)
    command = ReassignPartitions(request_id, targets)
    return _submit_and_follow(args, command, targets)


def _set_throttles(
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
            configs.change_broker_configs(zk, str(b), rates)
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
            have = configs.read_entity_configs(zk, "brokers", b)
            gone = [k for k in BROKER_THROTTLES if k in have]
            if gone:
                configs.change_broker_configs(zk, b, {}, gone)
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


def cancel(args: argparse.Namespace, path: Path) -> int:
    command = files.cancel_command(path, new_request_id())
    follower = _open_follower(args)
    try:
        return _cancel(args, command, follower)
    finally:
        follower.close()


def _cancel(args: argparse.Namespace, command: CancelReassignment, follower: ResultFollower) -> int:
    partitions = command.partitions
    answer = _submit(args, command, follower)
    failed = _failed_partitions(answer)
    if failed:
        lines = [f"{tp}: {error}: {message}" if message else f"{tp}: {error}" for tp, error, message in failed]
        ok = [str(tp) for tp in partitions if str(tp) not in {f[0] for f in failed}]
        if ok:
            print("Successfully cancelled partition reassignments for: " + ",".join(ok))
        s = "s" if len(failed) > 1 else ""

        raise OperationFailedError(f"Error cancelling partition reassignment{s} for:\n" + "\n".join(lines))
    print("Successfully cancelled partition reassignments for: " + ",".join(str(tp) for tp in partitions))
    if not args.preserve_throttles:
        clear_throttles(args, command.topics())
    if args.wait and answer.status is AdminStatus.IN_PROGRESS:
        return _follow(args, command, [(tp, None) for tp in partitions], follower)
    return 0


def list_reassignments(args: argparse.Namespace) -> int:

    with connect(zk_connect(args)) as zk:
        moving = in_progress(zk)
        legacy = zk.pending_reassignments()
    if args.output == "json":
        doc = [
            {
                "topic": m.tp.topic,
                "partition": m.tp.partition,
                "replicas": list(m.replicas),
                "adding_replicas": list(m.adding),
                "removing_replicas": list(m.removing),
            }
            for m in sorted(moving.values(), key=lambda m: m.tp)
        ]
        queued = [{"topic": t.topic, "partition": t.partition, "replicas": list(t.replicas)} for t in legacy]
        print(json.dumps({"reassignments": doc, "queued": queued}, indent=2))
        return 0
    if not moving and not legacy:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for m in sorted(moving.values(), key=lambda m: m.tp):
        print(f"{m.tp}: replicas: {ints(m.replicas)}. adding: {ints(m.adding)}. removing: {ints(m.removing)}.")
    for t in legacy:
        tp = TopicPartition(t.topic, t.partition)
        if tp not in moving:
            print(f"{tp}: queued in /admin/reassign_partitions, target: {ints(t.replicas)}.")
    return 0


def verify(args: argparse.Namespace, path: Path) -> int:

    targets = files.read_reassignment(path, "verify")
    rows: list[dict[str, Any]] = []
    with connect(zk_connect(args)) as zk:
        legacy = {TopicPartition(t.topic, t.partition) for t in zk.pending_reassignments()}
        znodes = {t: zk.topic(t) for t in sorted({x.topic for x in targets})}
        moving = in_progress(zk, [t for t, z in znodes.items() if z is not None])
        states = {
            TopicPartition(t.topic, t.partition): zk.partition_state(t.topic, t.partition)
            for t in targets
            if TopicPartition(t.topic, t.partition) in moving
        }
    for t in targets:
        tp = TopicPartition(t.topic, t.partition)
        znode = znodes[t.topic]
        replicas = dict(znode.partitions).get(t.partition) if znode is not None else None
        row: dict[str, Any] = {"topic": t.topic, "partition": t.partition, "target": list(t.replicas)}
        if replicas is None:
            row |= {"status": "missing", "message": f"Partition {tp} does not exist."}
        elif tp in moving or tp in legacy:
            m = moving.get(tp)
            st = states.get(tp)
            waiting = [r for r in (m.adding if m else ()) if st is None or r not in st.isr]
            row |= {"status": "in_progress", "message": f"Reassignment of partition {tp} is still in progress."}
            row["adding_not_in_isr"] = waiting
        elif replicas == t.replicas:
            row |= {"status": "completed", "message": f"Reassignment of partition {tp} is completed."}
        else:
            row |= {
                "status": "mismatch",
                "message": f"There is no active reassignment of partition {tp}, but replica set is "
                f"{ints(replicas)} rather than {ints(t.replicas)}.",
            }
        row["replicas"] = list(replicas) if replicas is not None else None
        rows.append(row)
    pending = any(r["status"] == "in_progress" for r in rows)
    mismatch = any(r["status"] in ("missing", "mismatch") for r in rows)
    if args.output == "json":
        print(json.dumps({"partitions": rows}, indent=2))
    else:
        print("Status of partition reassignment:")
        for r in rows:
            print(r["message"])
    if not pending and not args.preserve_throttles:
        if args.output == "json":
            with _stdout_to(sys.stderr):
                clear_throttles(args, sorted({t.topic for t in targets}))
        else:
            print()
            clear_throttles(args, sorted({t.topic for t in targets}))
    if mismatch:
        return 1
    return 3 if pending else 0


class _stdout_to:  # noqa: N801 - used as a context manager, like contextlib's redirect_stdout
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.saved: TextIO | None = None

    def __enter__(self) -> None:
        self.saved, sys.stdout = sys.stdout, self.stream

    def __exit__(self, *exc: object) -> None:
        assert self.saved is not None
        sys.stdout = self.saved


# ----------------------------------------------------------------------------- answers and progress


def _open_follower(args: argparse.Namespace) -> ResultFollower:

    return ResultFollower.open(bootstrap_server(args), args.admin_results_topic, kafka_config(args))


def _submit(args: argparse.Namespace, command: AdminCommand, follower: ResultFollower) -> AdminResult:
    """Publish ``command`` and wait (up to ``--timeout``) for the controller's first answer, read with
    ``follower`` (opened before, so that no answer is missed; kept open for :func:`_follow`)."""

    command = validated(command).command
    bootstrap, config = bootstrap_server(args), kafka_config(args)
    publish_command(bootstrap, args.admin_topic, command, command.request_id, config)
    print(f"Submitted {command.TYPE} (request {command.request_id}).", file=sys.stderr)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        got = follower.poll(command.request_id)
        if got is not None:
            if got.status is AdminStatus.ERROR and not _failed_partitions(got):
                raise OperationFailedError(f"{got.error or 'ERROR'}: {got.message}")
            return got
    raise NotFinishedError(f"no answer from the controller to request {command.request_id} after "
                               f"{args.timeout:g}s; is it running?")  # fmt: skip


def partition_outcomes(result: AdminResult) -> list[tuple[str, str, str]]:
    """``(partition, error or "NONE", message)`` of every partition in the answer's details."""
    parts = result.details.get("partitions")
    if not isinstance(parts, Mapping):
        return []
    out = []
    for tp, r in sorted(parts.items()):
        if isinstance(r, Mapping):
            out.append((str(tp), str(r.get("error") or Errors.NONE.name), str(r.get("message", ""))))
    return out


def _failed_partitions(result: AdminResult) -> list[tuple[str, str, str]]:
    """``(partition, error, message)`` of every partition the answer reports as failed."""
    return [o for o in partition_outcomes(result) if o[1] != Errors.NONE.name]


def _submit_and_follow(
    args: argparse.Namespace, command: ReassignPartitions, targets: Sequence[PartitionTarget]
) -> int:

    follower = _open_follower(args)
    try:
        answer = _submit(args, command, follower)
        failed = _failed_partitions(answer)
        if failed:
            lines = [f"{tp}: {error}: {message}" if message else f"{tp}: {error}" for tp, error, message in failed]
            raise OperationFailedError("Error reassigning partition(s):\n" + "\n".join(lines))
        names = ",".join(f"{t.topic}-{t.partition}" for t in targets)
        print(f"Successfully started partition reassignments for {names}")
        if not args.wait or answer.status is AdminStatus.OK:
            return 0
        wanted = [(TopicPartition(t.topic, t.partition), t.replicas) for t in targets]
        return _follow(args, command, wanted, follower)
    finally:
        follower.close()


@dataclass(frozen=True)
class PartitionProgress:
    tp: TopicPartition
    done: bool
    #: adding replicas not yet in the ISR
    waiting: tuple[int, ...]
    #: the partition's znode shows the reassignment (or its end)
    started: bool = True


def read_progress(
    zk: ZkReader, wanted: Sequence[tuple[TopicPartition, tuple[int, ...] | None]]
) -> list[PartitionProgress]:
    """Per partition: done (no longer moving, and at its target when one is given), else the adding
    replicas that are not in the ISR yet."""
    topics = sorted({tp.topic for tp, _ in wanted})
    moving = in_progress(zk, topics)
    assignment = {t: dict(z.partitions) if (z := zk.topic(t)) is not None else {} for t in topics}
    out = []
    for tp, target in wanted:
        m = moving.get(tp)
        if m is None:
            done = target is None or tuple(assignment[tp.topic].get(tp.partition, ())) == tuple(target)
            out.append(PartitionProgress(tp, done, (), started=done))
            continue
        st = zk.partition_state(tp.topic, tp.partition)
        isr = set(st.isr) if st is not None else set()
        out.append(PartitionProgress(tp, False, tuple(r for r in m.adding if r not in isr)))
    return out


def progress_lines(progress: Sequence[PartitionProgress]) -> list[str]:
    done = sum(p.done for p in progress)
    lines = [f"{done}/{len(progress)} partitions done"]
    for p in progress:
        if not p.started:
            lines.append(f"  {p.tp}: not started yet")
        elif not p.done:
            waiting = ",".join(map(str, p.waiting)) or "none (finishing)"
            lines.append(f"  {p.tp}: adding replicas not yet in the ISR: {waiting}")
    return lines


def progress_bar(progress: Sequence[PartitionProgress], elapsed: float, width: int = 24) -> str:
    done = sum(p.done for p in progress)
    total = max(len(progress), 1)
    filled = round(width * done / total)
    pending = [f"{p.tp}(+{','.join(map(str, p.waiting))})" for p in progress if not p.done and p.waiting]
    text = f"reassign [{'#' * filled}{'.' * (width - filled)}] {done}/{len(progress)} {elapsed:5.1f}s"
    if pending:
        text += " waiting: " + " ".join(pending)
    return text


def _follow(
    args: argparse.Namespace,
    command: AdminCommand,
    wanted: Sequence[tuple[TopicPartition, tuple[int, ...] | None]],
    follower: ResultFollower,
) -> int:
    """Follow the request to its final answer, drawing the progress read from ZooKeeper."""

    out = sys.stderr
    tty = out.isatty()
    start = time.monotonic()
    deadline = start + args.timeout
    last: list[str] = []
    final: AdminResult | None = None
    progress: list[PartitionProgress] = []
    try:
        with connect(zk_connect(args)) as zk:
            while time.monotonic() < deadline:
                progress = read_progress(zk, wanted)
                if tty:
                    width = shutil.get_terminal_size((120, 20)).columns - 1
                    out.write("\r" + progress_bar(progress, time.monotonic() - start)[:width].ljust(width))
                    out.flush()
                else:
                    lines = progress_lines(progress)
                    if lines != last:
                        out.write("\n".join(lines) + "\n")
                        last = lines
                got = follower.poll(command.request_id, 300)
                if got is not None and got.status is not AdminStatus.IN_PROGRESS:
                    final = got
                if final is not None and (final.status is AdminStatus.ERROR or all(p.done for p in progress)):
                    # the buckets of a request spanning several topics answer each for its own topics:
                    # an ok is final once ZooKeeper shows every partition done
                    break
    finally:
        if tty:
            out.write("\n")
    if final is None or (final.status is AdminStatus.OK and not all(p.done for p in progress)):
        raise NotFinishedError(f"reassignment not finished after {args.timeout:g}s")
    if final is not None and final.status is AdminStatus.ERROR:
        failed = _failed_partitions(final)
        lines = [f"{tp}: {error}: {message}" for tp, error, message in failed] or [f"{final.error}: {final.message}"]
        raise OperationFailedError("The reassignment did not complete:\n" + "\n".join(lines))
    what = "Cancellation" if isinstance(command, CancelReassignment) else "Reassignment"
    print(f"{what} of {len(wanted)} partition(s) completed.")
    return 0


# ----------------------------------------------------------------------------- the command line


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "reassign",
        parents=[common],
        help="move partition replicas between brokers (kafka-reassign-partitions)",
        description="Generate, execute, verify, cancel and list partition reassignments, like "
        "kafka-reassign-partitions. "
        'Files use Kafka\'s format {"version":1,"partitions":[{"topic","partition","replicas"}]}.',
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose an assignment for --topics-to-move-json-file")
    action.add_argument("--execute", action="store_true", help="start the reassignment in --reassignment-json-file")
    action.add_argument("--verify", action="store_true", help="check the reassignment in --reassignment-json-file")
    action.add_argument("--cancel", action="store_true", help="cancel the reassignments in --reassignment-json-file")
    p.add_argument("--reassignment-json-file", type=Path, help="Kafka's reassignment JSON")
    p.add_argument("--topics-to-move-json-file", type=Path, help='{"version":1,"topics":[{"topic":"foo"}]}')
    p.add_argument("--broker-list", help="brokers to place replicas on, e.g. 1,2,3 (--generate)")
    p.add_argument("--disable-rack-aware", action="store_true", help="ignore broker racks (--generate)")
    add_options(p, action)
    p.set_defaults(func=cmd_reassign)


def cmd_reassign(args: argparse.Namespace) -> int:
    return run_command(args, _reassign)


def _reassign(args: argparse.Namespace) -> int:
    if args.generate:
        path = require(args, "--topics-to-move-json-file", "with --generate")
        brokers = broker_ids(require(args, "--broker-list", "with --generate"), "--broker-list")
        return _reassign_generate(args, path, brokers)
    if args.list or args.describe:
        return list_reassignments(args)
    path = require(args, "--reassignment-json-file", "with --execute, --verify and --cancel")
    if not args.execute:
        forbid(args, ["--throttle", "--replica-alter-log-dirs-throttle", "--additional"], "without --execute")
    if args.execute:
        return execute(args, path)
    if args.verify:
        return verify(args, path)
    return cancel(args, path)


def _current_assignment(zk: ZkReader, topics: Sequence[str]) -> dict[TopicPartition, tuple[int, ...]]:
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for t in topics:
        znode = zk.topic(t)
        if znode is None:
            raise OperationFailedError(f"Topic '{t}' does not exist")
        for p, reps in znode.partitions:
            out[TopicPartition(t, p)] = reps
    return out


def _reassign_generate(args: argparse.Namespace, path: Path, broker_list: tuple[int, ...]) -> int:
    from core.placement import BrokerRack, PlacementError, assign_replicas, stable_start_index

    topics = files.read_topics_to_move(path)
    with connect(zk_connect(args)) as zk:
        registered = zk.brokers()
        current = _current_assignment(zk, topics)
    unknown = sorted(set(broker_list) - set(registered))
    if unknown:
        known = ints(sorted(registered))
        raise UsageError("--broker-list", f"unknown broker(s) {ints(unknown)}; registered: {known}")
    racks = [BrokerRack(b, None if args.disable_rack_aware else registered[b].rack) for b in sorted(set(broker_list))]
    proposed: dict[TopicPartition, tuple[int, ...]] = {}
    for t in topics:
        parts = sorted(tp for tp in current if tp.topic == t)
        rf = len(current[parts[0]]) if parts else 0
        try:
            placed = assign_replicas(racks, len(parts), rf, start_index=stable_start_index(t, len(racks)))
        except PlacementError as e:
            raise OperationFailedError(f"{e.error}: {e}") from None
        for tp in parts:
            proposed[tp] = placed[tp.partition]
    print("Current partition replica assignment")
    print(files.reassignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(files.reassignment_json(proposed))
    return EXIT_OK
