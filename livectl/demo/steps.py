"""The seven steps of ``livectl demo``: each an action, a check that lists what is not done yet (empty =
done) and a summary line. The steps build on each other in order (:data:`SCENARIO`)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.events import CreateTopic, DeleteTopic, ElectLeaders, ReassignPartitions
from core.model import ElectionType, PartitionTarget
from livectl import scenario as sc
from livectl.demo.processes import BrokerHandle
from livectl.demo.report import DemoError, DemoOptions, DemoReport

#: the topics of the scenario
ORDERS, PAYMENTS, AUDIT = "orders", "payments", "audit"


@dataclass(frozen=True)
class Step:
    """``action`` does it (and may return a line for the timeline), ``check`` lists what is still missing
    (waited on until empty), ``done`` describes the result."""

    title: str
    action: Callable[[], str | None]
    check: Callable[[], list[str]]
    done: Callable[[], str]


class Run(Protocol):
    """What the steps need of the run (:class:`livectl.demo.runner.Demo`)."""

    o: DemoOptions
    report: DemoReport
    brokers: dict[int, BrokerHandle]
    plan: sc.DemoPlan
    #: "simulated" or "Kafka": how the timeline names the brokers' kind
    broker_kind: str

    def snapshot(self) -> tuple[sc.ClusterView, dict[int, dict[str, Any]]]:
        """ZooKeeper's view and the brokers' status documents, as last read."""
        ...

    def send(self, label: str, command: Any) -> str:
        """Publish an admin command with a fresh request id (returned)."""
        ...

    def result_problems(self, rids: dict[str, str]) -> list[str]:
        """Admin results still missing; raises :class:`DemoError` on an error result."""
        ...

    def requests_since(self, since: float) -> list[dict[str, Any]]:
        """The controller's requests seen since ``since`` (``time.monotonic()``)."""
        ...

    def start_broker(self, broker_id: int) -> BrokerHandle:
        """Start broker ``broker_id`` in its own process."""
        ...

    def broker_start_problems(self, ids: Sequence[int] | range) -> list[str]:
        """Brokers of ``ids`` not registered or without a status yet; raises if one exited."""
        ...

    def record_processes(self) -> None:
        """Write down the processes started, for the next run's clean-up."""
        ...


def create_topics(d: Run) -> Step:
    wanted = {ORDERS: 6, PAYMENTS: 3, AUDIT: 2}
    rids: dict[str, str] = {}
    rf, audit = d.plan.payments_rf, d.plan.audit

    def action() -> str:
        for label, cmd in (
            (f"create_topic {ORDERS}", CreateTopic("", ORDERS, 6, 3)),
            (f"create_topic {PAYMENTS}", CreateTopic("", PAYMENTS, 3, rf)),
            (f"create_topic {AUDIT}", CreateTopic("", AUDIT, 2, 2, replica_assignment=audit)),
        ):
            rids[d.send(label, cmd)] = label
        on = " | ".join(",".join(str(b) for b in r) for r in audit)
        return (
            f"sent: create {ORDERS} (6 partitions, RF 3) and {PAYMENTS} (3 partitions, RF {rf}) placed by the "
            f"controller, {AUDIT} on brokers {on}"
        )

    def check() -> list[str]:
        problems = d.result_problems(rids)
        view, status = d.snapshot()
        for topic, count in wanted.items():
            parts = view.topics.get(topic)
            if parts is None:
                problems.append(f"/brokers/topics/{topic} missing")
                continue
            if len(parts) != count:
                problems.append(f"{topic} has {len(parts)} partitions, want {count}")
            for p, pv in parts.items():
                if pv.leader is None:
                    problems.append(f"{topic}-{p} has no state znode")
                elif pv.leader != pv.replicas[0] or set(pv.isr) != set(pv.replicas):
                    problems.append(f"{topic}-{p} leader {pv.leader} isr {list(pv.isr)}")
        return problems + sc.brokers_disagree(view, status)

    def done() -> str:
        view, _ = d.snapshot()
        n = sum(len(view.topics[t]) for t in wanted)
        return f"{n} partitions online in ZooKeeper; every leader and follower confirmed by its broker"

    return Step("create topics", action, check, done)


def hard_kill(d: Run) -> Step:
    k = d.plan.kill
    led: list[str] = []

    def action() -> str:
        view, _ = d.snapshot()
        led.extend(n for n, pv in view.partitions().items() if pv.leader == k)
        d.report.facts["killed"] = k
        bp = d.brokers[k]
        bp.signal(signal.SIGKILL)
        if not bp.wait(10):
            raise DemoError(f"broker {k} (pid {bp.pid}) still runs 10 s after SIGKILL")
        bp.forget_status()
        d.record_processes()
        return (
            f"SIGKILL {d.broker_kind} broker {k} (pid {bp.pid}); it led {', '.join(led) or 'nothing'}; ZooKeeper "
            f"ends its session after ~{d.o.broker_session_timeout_ms / 1000:.0f} s"
        )

    def check() -> list[str]:
        view, status = d.snapshot()
        problems = [f"broker {k} still registered (session not expired yet)"] if k in view.brokers else []
        return problems + sc.leadership_problems(view, not_on=[k]) + sc.brokers_disagree(view, status)

    def done() -> str:
        view, _ = d.snapshot()
        parts = view.partitions()
        moved = ", ".join(f"{n} -> {parts[n].leader}" for n in led if n in parts)
        return f"broker {k} gone; new leaders {moved or '(none needed)'}; {k} removed from every ISR"

    return Step(f"hard-kill broker {k}", action, check, done)


def restart(d: Run) -> Step:
    k = d.plan.kill

    def action() -> str:
        bp = d.start_broker(k)
        return f"started broker {k} again (pid {bp.pid})"

    def check() -> list[str]:
        problems = d.broker_start_problems([k])
        view, status = d.snapshot()
        return problems + sc.missing_from_isr(view, k) + sc.brokers_disagree(view, status)

    def done() -> str:
        view, _ = d.snapshot()
        n = sum(1 for pv in view.partitions().values() if k in pv.replicas)
        return (
            f"broker {k} registered with broker epoch {view.brokers.get(k)}, caught up and back in the ISR "
            f"of {n} partitions"
        )

    return Step(f"restart broker {k}", action, check, done)


def reassign(d: Run) -> Step:
    targets: dict[int, tuple[int, ...]] = {}
    rids: dict[str, str] = {}

    def action() -> str:
        view, _ = d.snapshot()
        current = {p: pv.replicas for p, pv in view.topics[PAYMENTS].items()}
        targets.update(sc.reassignment_targets(current, sorted(view.brokers)))
        d.report.facts["payments_before"] = dict(current)
        d.report.facts["payments_targets"] = dict(targets)
        cmd = ReassignPartitions("", tuple(PartitionTarget(PAYMENTS, p, t) for p, t in sorted(targets.items())))
        rids[d.send(f"reassign {PAYMENTS}", cmd)] = f"reassign {PAYMENTS}"
        moves = ", ".join(f"{PAYMENTS}-{p} {list(current[p])} -> {list(t)}" for p, t in sorted(targets.items()))
        return f"sent: reassign {moves}"

    def check() -> list[str]:
        problems = d.result_problems(rids)
        view, status = d.snapshot()
        parts = view.topics.get(PAYMENTS, {})
        for p, t in targets.items():
            pv = parts.get(p)
            if pv is None:
                problems.append(f"{PAYMENTS}-{p} missing")
            elif pv.replicas != t or pv.adding or pv.removing:
                problems.append(
                    f"{PAYMENTS}-{p} replicas {list(pv.replicas)} "
                    f"(adding {list(pv.adding)}, removing {list(pv.removing)})"
                )
            elif set(pv.isr) != set(t) or pv.leader not in t:
                problems.append(f"{PAYMENTS}-{p} leader {pv.leader} isr {list(pv.isr)}")
        if view.reassign_pending:
            problems.append("/admin/reassign_partitions still exists")
        return problems + sc.brokers_disagree(view, status)

    def done() -> str:
        view, _ = d.snapshot()
        parts = view.topics[PAYMENTS]
        return (
            "; ".join(f"{PAYMENTS}-{p} on {list(pv.replicas)} led by {pv.leader}" for p, pv in sorted(parts.items()))
            + "; old replicas stopped and deleted"
        )

    return Step(f"reassign {PAYMENTS} onto other brokers", action, check, done)


def preferred_election(d: Run) -> Step:
    before: list[str] = []
    rids: dict[str, str] = {}

    def action() -> str:
        view, _ = d.snapshot()
        before.extend(sc.not_preferred(view))
        rids[d.send("elect-leaders PREFERRED (all partitions)", ElectLeaders("", ElectionType.PREFERRED))] = (
            "elect-leaders PREFERRED"
        )
        return "not led by their preferred replica: " + (", ".join(before) or "none")

    def check() -> list[str]:
        problems = d.result_problems(rids)
        view, status = d.snapshot()
        return problems + sc.not_preferred(view) + sc.brokers_disagree(view, status)

    def done() -> str:
        return f"{len(before)} partition(s) moved back to their preferred leader; every partition is led by it"

    return Step("preferred-leader election", action, check, done)


def controlled_shutdown(d: Run) -> Step:
    s_id = d.plan.shutdown
    since = [0.0]
    led: list[str] = []

    def action() -> str:
        view, _ = d.snapshot()
        led.extend(n for n, pv in view.partitions().items() if pv.leader == s_id)
        since[0] = time.monotonic()
        d.report.facts["shut_down"] = s_id
        bp = d.brokers[s_id]
        bp.signal(signal.SIGTERM)
        leads = ", ".join(led) or "nothing"
        return f"SIGTERM broker {s_id} (pid {bp.pid}): Kafka's controlled shutdown; it leads {leads}"

    def answers() -> list[dict[str, Any]]:
        return [
            m
            for m in d.requests_since(since[0])
            if m.get("api") == "ControlledShutdownResponse" and int(m.get("brokerId", -1)) == s_id
        ]

    def check() -> list[str]:
        bp = d.brokers[s_id]
        problems = []
        if bp.running():
            problems.append(f"broker {s_id} still shutting down")
        else:
            unclean = bp.exit_problem()
            if unclean is not None:
                raise DemoError(unclean)
            bp.forget_status()
        view, status = d.snapshot()
        if s_id in view.brokers:
            problems.append(f"broker {s_id} still registered")
        clean = [m for m in answers() if not (m["body"].get("remainingPartitions") or m["body"].get("errorCode"))]
        if not clean:
            problems.append(f"no ControlledShutdownResponse with nothing remaining sent to broker {s_id}")
        return problems + sc.leadership_problems(view, not_on=[s_id]) + sc.brokers_disagree(view, status)

    def done() -> str:
        d.record_processes()
        view, _ = d.snapshot()
        parts = view.partitions()
        moved = ", ".join(f"{n} -> {parts[n].leader}" for n in led if n in parts)
        return (
            f"broker {s_id} shut down cleanly after {len(answers())} ControlledShutdown answer(s); "
            f"leadership moved first: {moved or '(it led nothing)'}"
        )

    return Step(f"controlled shutdown of broker {s_id}", action, check, done)


def delete_topic(d: Run) -> Step:
    rids: dict[str, str] = {}

    def action() -> str:
        rids[d.send(f"delete_topic {AUDIT}", DeleteTopic("", AUDIT))] = f"delete_topic {AUDIT}"
        return f"sent: delete {AUDIT}"

    def check() -> list[str]:
        problems = d.result_problems(rids)
        view, status = d.snapshot()
        if AUDIT in view.topics:
            problems.append(f"/brokers/topics/{AUDIT} still exists")
        if view.delete_topics:
            problems.append(f"/admin/delete_topics still lists {', '.join(view.delete_topics)}")
        for b, st in sorted(status.items()):
            hosted = [n for n in (st.get("partitions") or {}) if n.rsplit("-", 1)[0] == AUDIT]
            if hosted:
                problems.append(f"broker {b} still hosts {', '.join(hosted)}")
            # a real broker's metadata cache (the simulated brokers have none)
            cached = [n for n in (st.get("kafka_metadata") or {}) if n.rsplit("-", 1)[0] == AUDIT]
            if cached:
                problems.append(f"broker {b}'s metadata still has {', '.join(cached)}")
        return problems + sc.brokers_disagree(view, status, skip_topics=[AUDIT])

    def done() -> str:
        return f"{AUDIT} gone from ZooKeeper (/admin/delete_topics empty) and from every broker"

    return Step(f"delete topic {AUDIT}", action, check, done)


#: the scenario, in order
SCENARIO: tuple[Callable[[Run], Step], ...] = (
    create_topics,
    hard_kill,
    restart,
    reassign,
    preferred_election,
    controlled_shutdown,
    delete_topic,
)
