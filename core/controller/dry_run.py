"""Dry runs: an admin command with ``dry_run`` set is answered with the decisions the controller would make
for it, and nothing is applied.

The command runs through the controller's own handler (the same :func:`core.controller.event_loop.handle` a
real command takes) on a working copy of the bucket's state as it stands at that point of the step, after the
events before it; the copy is then dropped. The step's own state and effects are untouched: none of the dry
run's ZooKeeper writes or broker requests reaches a sink. The bucket answers the command instead with one
:class:`~core.decisions.AdminResult` whose status, error and message are those the real command would get,
and whose ``details`` add, in :func:`core.codec.dry_run_details.dry_run_details`' form, every decision of that
working step (its ZooKeeper writes, its requests per broker, its admin answers, its state-change failures, in
the step's order) and the partitions it would change, each as it would be after.

The decisions are those a step over the same state with the command (not dry) makes, decision for decision,
with one value of the command's own: a created topic's id, which is derived from the request id
(:func:`core.controller.topics.topic_id_for`), so the real command that follows a dry run, with a request id
of its own, gets another id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from core.codec.dry_run_details import DryRunPartition, dry_run_details
from core.context import ControllerContext
from core.controller.step_context import StepContext
from core.decisions import AdminResult, AdminStatus
from core.events import AdminCommand, Event
from core.model import TopicPartition

__all__ = ["dry_run"]


def dry_run(c: StepContext, cmd: AdminCommand, handle: Callable[[StepContext, Event], None]) -> None:
    """Answer ``cmd`` (``dry_run`` set) with what ``handle`` would decide for it from ``c``'s state now."""
    work = StepContext(c.state())  # its own copy of the context: ``c.ctx`` stays as it was
    before = c.ctx
    handle(work, dataclasses.replace(cmd, dry_run=False))  # type: ignore[type-var]
    decisions = work.decisions()
    answers = [d for d in decisions if isinstance(d, AdminResult) and d.request_id == cmd.request_id]
    own = answers[-1] if answers else AdminResult(cmd.request_id, cmd.TYPE, AdminStatus.OK)
    topics = cmd.topics() or tuple(sorted(before.all_topics | work.ctx.all_topics))
    details = {**own.details_json(), **dry_run_details(decisions, _changed(before, work.ctx, topics))}
    c.fx.admin.append(AdminResult(cmd.request_id, cmd.TYPE, own.status, own.error, own.message, details))


def _changed(before: ControllerContext, after: ControllerContext, topics: tuple[str, ...]) -> list[DryRunPartition]:
    """The partitions of ``topics`` whose assignment, state or leadership differ after, as they are after."""
    out = []
    for topic in topics:
        tps = {*before.partitions_for_topic(topic), *after.partitions_for_topic(topic)}
        for tp in sorted(tps, key=lambda t: t.partition):
            if _view(before, tp) != _view(after, tp):
                out.append(_row(after, tp))
    return out


def _view(ctx: ControllerContext, tp: TopicPartition) -> tuple[object, ...]:
    assigned = ctx.partition_assignments.get(tp)
    return (assigned, ctx.partition_state(tp), ctx.leader_and_isr(tp))


def _row(ctx: ControllerContext, tp: TopicPartition) -> DryRunPartition:
    assigned = ctx.partition_assignments.get(tp)
    li = ctx.leader_and_isr(tp)
    return DryRunPartition(
        tp.topic,
        tp.partition,
        ctx.partition_state(tp).value,
        assigned.replicas if assigned else (),
        assigned.adding_replicas if assigned else (),
        assigned.removing_replicas if assigned else (),
        li.leader if li else -1,
        li.leader_epoch if li else -1,
        li.isr if li else (),
    )
