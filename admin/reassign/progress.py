"""Following a reassignment to its end (``--wait``): per partition, done or the adding replicas not yet in
the ISR, drawn as a redrawn bar on a terminal and as plain lines otherwise; the final answer decides the
exit code.

A move completes only when every target replica is in the ISR, so one whose target holds a broker that is not
alive (not registered) waits for that broker, whatever its bytes say. When every partition still in flight
waits so (:func:`blocked_by_not_alive`), nothing can finish by itself: the wait ends at once, exit 1, naming the
partitions and brokers and what to do (:func:`not_alive_message`), rather than waiting out ``--timeout``. The
reassignment stays in ZooKeeper as Kafka keeps it, and completes once the brokers are back. There is no grace
period, as a drain has none (:mod:`admin.drain`): ZooKeeper shows a restarting broker unregistered from its
session's end to its new registration, log recovery included (seconds to many minutes), so no short grace
covers a restart, and nothing is lost by ending the wait."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from admin.common import (
    NotFinishedError,
    OperationFailedError,
    zk_connect,
)
from admin.publish import ResultFollower
from admin.reassign.answers import failed_partitions
from admin.reassign.state import in_progress
from admin.zkread import ZkReader, connect
from core.decisions import AdminResult, AdminStatus
from core.events import AdminCommand, CancelReassignment
from core.model import TopicPartition
from core.move_progress import waiting, waiting_text


@dataclass(frozen=True)
class PartitionProgress:
    tp: TopicPartition
    done: bool
    #: adding replicas not yet in the ISR
    waiting: tuple[int, ...]
    #: the partition's znode shows the reassignment (or its end)
    started: bool = True
    #: every target replica not in the ISR (the move completes when there is none): the adding ones and any
    #: other, such as a replica whose broker died
    target_waiting: tuple[int, ...] = ()
    #: of those, the ones whose broker is not alive
    not_alive: tuple[int, ...] = ()


def read_progress(
    zk: ZkReader, wanted: Sequence[tuple[TopicPartition, tuple[int, ...] | None]]
) -> list[PartitionProgress]:
    """Per partition: done (no longer moving, and at its target when one is given), else the adding
    replicas that are not in the ISR yet."""
    topics = sorted({tp.topic for tp, _ in wanted})
    moving = in_progress(zk, topics)
    live = set(zk.brokers()) if moving else set()
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
        target_waiting, not_alive = waiting(m.target, isr, live)
        adding = tuple(r for r in m.adding if r not in isr)
        out.append(PartitionProgress(tp, False, adding, target_waiting=target_waiting, not_alive=not_alive))
    return out


def progress_lines(progress: Sequence[PartitionProgress]) -> list[str]:
    done = sum(p.done for p in progress)
    lines = [f"{done}/{len(progress)} partitions done"]
    for p in progress:
        if not p.started:
            lines.append(f"  {p.tp}: not started yet")
        elif not p.done:
            others = [r for r in p.target_waiting if r not in p.waiting]
            if p.not_alive or others:  # what it waits for beyond its adding replicas (a dead broker above all)
                adding = ",".join(map(str, p.waiting)) or "none"
                why = waiting_text(p.target_waiting, p.not_alive)
                lines.append(f"  {p.tp}: adding replicas not yet in the ISR: {adding}; {why}")
                continue
            waiting_ids = ",".join(map(str, p.waiting)) or "none (finishing)"
            lines.append(f"  {p.tp}: adding replicas not yet in the ISR: {waiting_ids}")
    return lines


def progress_bar(progress: Sequence[PartitionProgress], elapsed: float, width: int = 24) -> str:
    done = sum(p.done for p in progress)
    total = max(len(progress), 1)
    # rounded down: a full bar only when every partition is done
    filled = width * done // total
    pending = [f"{p.tp}(+{','.join(map(str, p.waiting))})" for p in progress if not p.done and p.waiting]
    text = f"reassign [{'#' * filled}{'.' * (width - filled)}] {done}/{len(progress)} {elapsed:5.1f}s"
    if pending:
        text += " waiting: " + " ".join(pending)
    return text


def blocked_by_not_alive(progress: Sequence[PartitionProgress]) -> tuple[PartitionProgress, ...]:
    """The partitions still in flight when each of them waits for a broker that is not alive (none can complete
    until one is back, whatever else it waits for); ``()`` while any other can still start or finish, or none is
    left."""
    pending = [p for p in progress if not p.done]
    if not pending or any(not p.started or not p.not_alive for p in pending):
        return ()
    return tuple(pending)


def _brokers(ids: Iterable[int]) -> str:
    ids = sorted(set(ids))
    return ("broker " if len(ids) == 1 else "brokers ") + ", ".join(map(str, ids))


def not_alive_message(
    command: AdminCommand, blocked: Sequence[PartitionProgress], reassignment_json_file: object
) -> str:
    """Why ``--wait`` ends with partitions in flight that wait for brokers that are not alive, and what to do."""
    items = [f"{p.tp} ({_brokers(p.not_alive)})" for p in blocked[:10]]
    more = f", and {len(blocked) - 10} more" if len(blocked) > 10 else ""
    dead_ids = {r for p in blocked for r in p.not_alive}
    dead = _brokers(dead_ids)
    back, them = ("it is back", "it") if len(dead_ids) == 1 else ("they are back", "them")
    head = (
        f"{len(blocked)} partition(s) wait for brokers that are not alive: {', '.join(items)}{more}; a move "
        f"completes only when every target replica is in the ISR, and nothing else is in flight, so the tool stops "
        f"waiting (request {command.request_id})"
    )
    file = f"--reassignment-json-file {reassignment_json_file}"
    if isinstance(command, CancelReassignment):
        return (
            f"the cancellation cannot complete: {head}. It stays in place (in ZooKeeper) and completes once {back}: "
            f"start {dead} (follow it with `livectl reassign --list`), or reassign those partitions "
            f"without {them} (`livectl reassign --execute --additional`)."
        )
    # a dead broker that is not an adding replica was a replica before the move: going back waits for it too
    kept = sorted({r for p in blocked for r in p.not_alive if r not in p.waiting})
    also = (
        f" (a cancellation waits for {_brokers(kept)} too, a replica before the move: to go on without it, "
        f"reassign to replicas without it with `livectl reassign --execute --additional`)"
        if kept
        else ""
    )
    return (
        f"the reassignment cannot complete: {head}. It stays in place (in ZooKeeper) and completes once {back}: "
        f"start {dead}, then follow it with `livectl reassign --verify {file}`; or cancel it with "
        f"`livectl reassign --cancel {file}`{also}."
    )


def follow(
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
    blocked: tuple[PartitionProgress, ...] = ()
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
                if blocked := blocked_by_not_alive(progress):
                    # only brokers that are not alive can end it: waiting would be waiting for an operator
                    break
    finally:
        if tty:
            out.write("\n")
    if blocked:  # (an error answer ends the loop before this is looked at)
        raise OperationFailedError(not_alive_message(command, blocked, args.reassignment_json_file))
    if final is None or (final.status is AdminStatus.OK and not all(p.done for p in progress)):
        rid = command.request_id
        raise NotFinishedError(
            f"reassignment (request {rid}) not finished within {args.timeout:g}s; it goes on: follow it with "
            f"`livectl reassign --verify --reassignment-json-file {args.reassignment_json_file}`, its answer with "
            f"`livectl audit --request-id {rid}`"
        )
    if final is not None and final.status is AdminStatus.ERROR:
        failed = failed_partitions(final)
        lines = [f"{tp}: {error}: {message}" for tp, error, message in failed] or [f"{final.error}: {final.message}"]
        raise OperationFailedError("The reassignment did not complete:\n" + "\n".join(lines))
    what = "Cancellation" if isinstance(command, CancelReassignment) else "Reassignment"
    print(f"{what} of {len(wanted)} partition(s) completed.")
    return 0
