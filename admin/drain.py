"""``livectl brokers --drain N`` / ``--cancel-drain N``: move every replica off a broker (issue 44, item 1).

A drain is a record in ZooKeeper, ``/livectl/drains/<N>`` = ``{"version":1,"batch_size":B,"throttle":T}``
(``throttle`` in bytes/s, -1 for none), and rounds that bring the cluster closer to an empty broker N, each
planned by :func:`core.drain.plan_drain` from what ZooKeeper holds then: N's leaderships first (a reorder,
then a preferred election), then its replicas, at most ``B`` partitions moving at once, each move a
reassignment the controller carries out (Kafka's throttle on the brokers and topics involved when ``T`` is
set). The broker is cordoned first, so nothing new lands on it meanwhile.

Nothing of a drain lives in this process: the rounds read ZooKeeper and the reassignments are the
controller's, which survive its restart or a takeover. ``--drain N`` run again (after a timeout, a crash of
the tool, a controller takeover) takes the record's settings unless new ones are given and goes on from
where the cluster is. ``--cancel-drain N`` deletes the record, cancels the reassignments moving replicas off N
(their partitions go back to their replicas before the move), clears the throttles when the drain set one
and leaves N cordoned; a ``--drain`` following it sees the record gone and stops. Once N holds nothing, the
throttles are cleared and the record deleted.

Brokers that are not alive (not registered) are never placed on. A move whose new broker dies is re-planned
onto another live broker (a reassignment superseding it); a partition whose move would keep, or keeps, a dead
broker that was a replica before waits for it (:class:`core.drain.Blocked`), said once per change while the
drain goes on with the others. When nothing else is left to start or to complete, the drain ends with exit 1
naming those partitions and their brokers, rather than waiting out ``--timeout``: the record stays, and
``--drain N`` run again, once the brokers are back or those replicas moved, goes on.
"""

from __future__ import annotations

import argparse
import json
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError

from admin import configs, dry_run
from admin.common import (
    EXIT_OK,
    NotFinishedError,
    OperationFailedError,
    UsageError,
    bootstrap_server,
    ints,
    kafka_config,
    zk_connect,
)
from admin.cordon import change as change_cordon
from admin.publish import ResultFollower, new_request_id, publish_command
from admin.reassign.state import Moving, in_progress
from admin.reassign.throttles import clear_throttles, throttled_replicas
from admin.zkread import ZkReader, connect
from core.cordon import DRAINS
from core.decisions import AdminResult, AdminStatus
from core.drain import DrainStep, PartitionView, plan_drain
from core.errors import FormatError
from core.events import AdminCommand, CancelReassignment, ElectLeaders, ReassignPartitions
from core.kafka.configs import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
)
from core.model import ElectionType, PartitionTarget, TopicPartition
from core.placement import BrokerRack
from sinks.entity_configs import change_broker_configs

DRAIN_VERSION = 1
#: seconds between rounds while replicas are moving
POLL_S = 1.0


def drain_path(broker: int) -> str:
    return f"{DRAINS}/{broker}"


@dataclass(frozen=True)
class DrainRecord:
    batch_size: int
    throttle: int

    def encode(self) -> bytes:
        body = {"version": DRAIN_VERSION, "batch_size": self.batch_size, "throttle": self.throttle}
        return json.dumps(body, separators=(",", ":")).encode()

    @staticmethod
    def decode(data: bytes | str) -> DrainRecord:
        try:
            raw: Any = json.loads(data)
        except ValueError as e:
            raise FormatError("$", f"not valid JSON: {e}") from None
        if not isinstance(raw, dict) or raw.get("version") != DRAIN_VERSION:
            raise FormatError("version", f"expected {DRAIN_VERSION}")
        batch, throttle = raw.get("batch_size"), raw.get("throttle")
        if type(batch) is not int or batch < 1:
            raise FormatError("batch_size", "expected an integer of at least 1")
        if type(throttle) is not int or throttle < -1:
            raise FormatError("throttle", "expected bytes/s, or -1 for none")
        return DrainRecord(batch, throttle)


def read_record(zk: Any, broker: int) -> DrainRecord | None:
    try:
        data, _ = zk.get(drain_path(broker))
    except NoNodeError:
        return None
    try:
        return DrainRecord.decode(data)
    except FormatError as e:
        raise OperationFailedError(f"{drain_path(broker)} is not livectl's drain record: {e}") from None


def cluster_view(
    zk: ZkReader,
) -> tuple[dict[TopicPartition, PartitionView], list[BrokerRack], set[int], dict[TopicPartition, Moving]]:
    """Every partition (replicas: the target of one being reassigned), the live brokers, the cordoned ones
    and the reassignments in progress, from ZooKeeper."""
    moving = in_progress(zk)
    views: dict[TopicPartition, PartitionView] = {}
    for topic in zk.topics():
        znode = zk.topic(topic)
        if znode is None:
            continue
        for p, replicas in znode.partitions:
            tp = TopicPartition(topic, p)
            state = zk.partition_state(topic, p)
            # the full replica set: a partition moving off the broker holds it until the move completes
            leader, isr = (state.leader, state.isr) if state is not None else (-1, ())
            m = moving.get(tp)
            adding, removing = (m.adding, m.removing) if m is not None else ((), ())
            views[tp] = PartitionView(tuple(replicas), leader, isr, m is not None, adding, removing)
    brokers = [BrokerRack(b, r.rack) for b, r in sorted(zk.brokers().items())]
    return views, brokers, set(zk.cordoned()), moving


def _answer(args: argparse.Namespace, command: AdminCommand, label: str) -> AdminResult:
    """Publish ``command`` and return the controller's first answer (``in_progress`` counts); an error answer
    raises :class:`OperationFailedError`, none in ``--timeout`` :class:`NotFinishedError`."""
    bootstrap, config = bootstrap_server(args), kafka_config(args)
    follower = ResultFollower.open(bootstrap, args.admin_results_topic, config)
    try:
        publish_command(bootstrap, args.admin_topic, command, command.request_id, config)
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            got = follower.poll(command.request_id)
            if got is None:
                continue
            if got.status is AdminStatus.ERROR:
                raise OperationFailedError(f"{label}: {got.error}: {got.message}", got)
            return got
    finally:
        follower.close()
    raise NotFinishedError(f"{label}: no answer from the controller in {args.timeout:g}s")


def _throttle(
    args: argparse.Namespace,
    throttle: int,
    moves: tuple[PartitionTarget, ...],
    views: dict[TopicPartition, PartitionView],
    moving: dict[TopicPartition, Moving],
) -> None:
    """Kafka's reassignment throttle (:mod:`admin.reassign.throttles`) on the topics and brokers of ``moves``."""
    proposed = {TopicPartition(m.topic, m.partition): m.replicas for m in moves}
    current = {tp: views[tp].replicas for tp in proposed}
    leader, follower, brokers = throttled_replicas(proposed, current, moving)
    for topic in sorted(leader):
        add = {LEADER_THROTTLED_REPLICAS: leader[topic], FOLLOWER_THROTTLED_REPLICAS: follower[topic]}
        configs.alter_topic_configs(args, topic, add, ())
    with configs.writer(zk_connect(args)) as zk:
        for b in sorted(brokers):
            change_broker_configs(
                zk, str(b), {LEADER_THROTTLED_RATE: str(throttle), FOLLOWER_THROTTLED_RATE: str(throttle)}
            )


def _round(args: argparse.Namespace, broker: int, record: DrainRecord) -> DrainStep:
    with connect(zk_connect(args)) as zk:
        views, brokers, cordoned, moving = cluster_view(zk)
    step = plan_drain(broker, views, brokers, cordoned, record.batch_size)
    if step.leader_moves:
        reorders = tuple(
            m for m in step.leader_moves if m.replicas != views[TopicPartition(m.topic, m.partition)].replicas
        )
        if reorders:
            _answer(args, ReassignPartitions(new_request_id(), reorders), "reorder")
        tps = tuple(TopicPartition(m.topic, m.partition) for m in step.leader_moves)
        try:
            _answer(args, ElectLeaders(new_request_id(), ElectionType.PREFERRED, tps), "preferred election")
        except OperationFailedError as e:  # a replica left the ISR meanwhile: the next round plans again
            print(f"Some leaderships stay on broker {broker} for now: {e}")
        else:
            print(f"Moved the leadership of {len(tps)} partition(s) off broker {broker}.")
    elif step.replica_moves or step.replans:
        moves = (*step.replans, *step.replica_moves)
        if record.throttle >= 0:
            _throttle(args, record.throttle, moves, views, moving)
        _answer(args, ReassignPartitions(new_request_id(), moves), "reassignment")
        for m in step.replans:
            tp = TopicPartition(m.topic, m.partition)
            gone = ints([r for r in views[tp].adding if r not in m.replicas])
            print(
                f"Re-planned the move of {tp} off broker {broker}: broker {gone} is not alive; "
                f"target {ints(m.replicas)}."
            )
        if step.replica_moves:
            print(
                f"Moving {len(step.replica_moves)} partition(s) off broker {broker} "
                f"({step.in_flight} moving already, {step.remaining} left on it)."
            )
    return step


def blocked_text(step: DrainStep) -> str:
    """The partitions a drain step found waiting for brokers that are not alive, in one line ('' for none)."""
    if not step.blocked:
        return ""
    items = [
        f"{b.tp} (broker {ints(b.not_alive)}{'; its move in flight' if b.in_flight else ''})" for b in step.blocked[:10]
    ]
    more = f", and {len(step.blocked) - 10} more" if len(step.blocked) > 10 else ""
    return (
        f"{len(step.blocked)} partition(s) wait for brokers that are not alive: {', '.join(items)}{more} "
        "(a move whose target holds a dead broker completes only when it is back in the ISR)"
    )


def _cannot_go_on(broker: int, step: DrainStep) -> str:
    reasons = []
    if step.blocked:
        reasons.append(
            blocked_text(step) + ": bring those brokers back, or move those partitions' replicas off them "
            "(livectl reassign --execute)"
        )
    if step.stuck:
        stuck = ", ".join(str(tp) for tp in step.stuck[:10])
        reasons.append(
            f"{len(step.stuck)} partition(s) on broker {broker} have no broker to move to "
            f"(too few live, uncordoned brokers): {stuck}"
        )
    return (
        f"the drain of broker {broker} cannot go on: " + "; ".join(reasons) + f"; then run livectl brokers --drain "
        f"{broker} again (the drain stays recorded, {step.remaining} partition(s) left on the broker)"
    )


def drain_command(args: argparse.Namespace) -> int:
    """``--drain N`` (with ``--batch-size`` and ``--throttle``): cordon, record, then rounds until N is empty,
    the record is gone (cancelled) or ``--timeout`` passed."""
    broker = args.drain
    if broker < 0:
        raise UsageError("--drain", f"must be a broker id (0 or more), got {broker}")
    if args.batch_size is not None and args.batch_size < 1:
        raise UsageError("--batch-size", f"must be at least 1, got {args.batch_size}")
    if args.throttle is not None and args.throttle < 0:
        raise UsageError("--throttle", f"must be bytes/s (0 or more), got {args.throttle}")
    if getattr(args, "dry_run", False):
        return drain_dry_run(args, broker)
    with configs.writer(zk_connect(args)) as zk:
        change_cordon(zk, broker, True)
        old = read_record(zk, broker)
        record = DrainRecord(
            args.batch_size if args.batch_size is not None else old.batch_size if old else 10,
            args.throttle if args.throttle is not None else old.throttle if old else -1,
        )
        if old is None:
            zk.create(drain_path(broker), record.encode(), makepath=True)
        elif old != record:
            zk.set(drain_path(broker), record.encode())
    how = f"batches of {record.batch_size}" + (f", throttle {record.throttle} B/s" if record.throttle >= 0 else "")
    print(f"{'Resuming' if old else 'Draining'} broker {broker} ({how}); it is cordoned.")
    deadline = time.monotonic() + args.timeout
    said = ""
    while True:
        step = _round(args, broker, record)
        if step.done:
            break
        if step.idle and (step.stuck or step.blocked):
            # nothing to start and nothing in flight that can complete: waiting would be waiting for an operator
            raise OperationFailedError(_cannot_go_on(broker, step))
        if (now := blocked_text(step)) and now != said:
            print(f"{now}; the drain goes on with the others.")
        said = now
        if time.monotonic() > deadline:
            raise NotFinishedError(
                f"broker {broker} still holds {step.remaining} partition(s) after {args.timeout:g}s; the drain "
                f"goes on with the moves started: run livectl brokers --drain {broker} again to continue it"
                + (f"; {said}" if said else "")
            )
        time.sleep(POLL_S if not step.leader_moves else 0)
        with configs.writer(zk_connect(args)) as zk:
            if read_record(zk, broker) is None:
                raise OperationFailedError(f"the drain of broker {broker} was cancelled (--cancel-drain)")
    with configs.writer(zk_connect(args)) as zk, suppress(NoNodeError):  # cancelled at the very end: gone already
        zk.delete(drain_path(broker))
    if record.throttle >= 0:
        with connect(zk_connect(args)) as reader:
            topics = reader.topics()
        clear_throttles(args, topics)
    print(f"Broker {broker} is drained: no replica and no leadership left on it; it stays cordoned.")
    return EXIT_OK


def drain_dry_run(args: argparse.Namespace, broker: int) -> int:
    """``--drain N --dry-run``: the first round :func:`core.drain.plan_drain` would make from ZooKeeper now (with N
    cordoned, as the drain would have it), then the controller's dry run of that round's first command: the
    reorder reassignment of N's leaderships, else (all in order already) their preferred election, else the
    replica moves. Later rounds depend on the moves finishing and are not shown. Nothing is written."""
    with connect(zk_connect(args)) as zk:
        views, brokers, cordoned, _ = cluster_view(zk)
    with configs.writer(zk_connect(args)) as client:  # read only: the record's batch size
        old = read_record(client, broker)
    batch = args.batch_size if args.batch_size is not None else old.batch_size if old else 10
    step = plan_drain(broker, views, brokers, cordoned | {broker}, batch)
    print(
        f"Dry run of draining broker {broker} (batches of {batch}): {step.remaining} partition(s) on it, "
        f"{step.in_flight} moving already, {len(step.stuck)} with no broker to go to, "
        f"{len(step.blocked)} waiting for brokers that are not alive."
    )
    if step.blocked:
        print(blocked_text(step) + ".")
    if step.done:
        print(f"Broker {broker} holds nothing: the drain would end at once.")
        return EXIT_OK
    command: AdminCommand
    if step.leader_moves:
        print(f"First round: move the leadership of {len(step.leader_moves)} partition(s) off broker {broker}:")
        for m in step.leader_moves:
            was = views[TopicPartition(m.topic, m.partition)]
            print(
                f"  {m.topic}-{m.partition}: replicas {ints(was.replicas)} -> {ints(m.replicas)}, "
                "then a preferred election"
            )
        reorders = tuple(
            m for m in step.leader_moves if m.replicas != views[TopicPartition(m.topic, m.partition)].replicas
        )
        tps = tuple(TopicPartition(m.topic, m.partition) for m in step.leader_moves)
        if reorders:
            print("The controller's dry run of the reorder (the election follows it and is not previewed):")
            command = ReassignPartitions(new_request_id(), reorders)
        else:
            print("The controller's dry run of the preferred election:")
            command = ElectLeaders(new_request_id(), ElectionType.PREFERRED, tps)
    elif step.replica_moves or step.replans:
        moves = (*step.replans, *step.replica_moves)
        print(f"First round: move {len(moves)} partition(s) off broker {broker}:")
        for m in moves:
            was = views[TopicPartition(m.topic, m.partition)]
            again = " (re-planned: its new broker is not alive)" if m in step.replans else ""
            print(f"  {m.topic}-{m.partition}: replicas {ints(was.replicas)} -> {ints(m.replicas)}{again}")
        print("The controller's dry run of the reassignment:")
        command = ReassignPartitions(new_request_id(), moves)
    else:
        stuck = ", ".join(str(tp) for tp in step.stuck[:10])
        print(f"Nothing to start now: {step.in_flight} move(s) in flight; stuck: {stuck or 'none'}.")
        return EXIT_OK
    return dry_run.run(args, command, f"drain {broker}")


def cancel_command(args: argparse.Namespace) -> int:
    """``--cancel-drain N``: the record deleted, the reassignments moving replicas off N cancelled, and the
    drain's throttle (when it set one) cleared as the end of a drain clears it (:func:`clear_throttles`: the
    rates on every broker, the throttled replicas on every topic)."""
    broker = args.cancel_drain
    if broker < 0:
        raise UsageError("--cancel-drain", f"must be a broker id (0 or more), got {broker}")
    with configs.writer(zk_connect(args)) as zk:
        record = read_record(zk, broker)
        if record is None:
            raise OperationFailedError(f"broker {broker} is not being drained")
        zk.delete(drain_path(broker))
    with connect(zk_connect(args)) as zk:
        moving = in_progress(zk)
        topics = zk.topics()
    off = tuple(sorted(tp for tp, m in moving.items() if broker in m.removing))
    if off:
        _answer(args, CancelReassignment(new_request_id(), off), "cancel")
    print(f"Drain of broker {broker} cancelled; {len(off)} move(s) off it cancelled; it stays cordoned.")
    if record.throttle >= 0:
        # the drain's throttle goes with it, as kafka-reassign-partitions --cancel clears the throttles
        clear_throttles(args, topics)
    return EXIT_OK
