"""The pure half of ``livectl demo``: the cluster as read from ZooKeeper, what changed between two reads,
readable lines for the controller's requests and admin results, and the checks each scenario step waits
for. No I/O here: values in, values (or text) out, so every rule is testable without services.

Views are built by the shell (:mod:`livectl.demo`) from Kafka's ZooKeeper layout (``/brokers/ids``,
``/brokers/topics/<t>``, ``…/partitions/<p>/state``, ``/admin/delete_topics``, ``/admin/reassign_partitions``)
and from the simulated brokers' ``--status-file`` JSON (``{"brokers": {"<id>": {"partitions": {"<t>-<p>":
{"role", "leader", "leader_epoch", "isr", …}}}}}``).

Checks return the list of what is still wrong (empty = the step's effect is there), so a step that times
out can say exactly what it was waiting for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: at most this many partitions are named in one timeline line
MAX_NAMED = 4


@dataclass(frozen=True)
class PartitionView:
    """One partition: assignment from ``/brokers/topics/<t>``, leadership from its ``state`` znode."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    #: ``None`` while the state znode does not exist
    leader: int | None = None
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()


@dataclass(frozen=True)
class ClusterView:
    """What ZooKeeper says at one moment. Partitions are keyed by ``"<topic>-<partition>"``."""

    #: registered broker id -> broker epoch (the registration's czxid)
    brokers: Mapping[int, int] = field(default_factory=dict)
    #: topic -> partition -> view
    topics: Mapping[str, Mapping[int, PartitionView]] = field(default_factory=dict)
    #: children of ``/admin/delete_topics``
    delete_topics: tuple[str, ...] = ()
    #: ``/admin/reassign_partitions`` exists
    reassign_pending: bool = False
    controller: int | None = None
    controller_epoch: int | None = None

    def partitions(self) -> dict[str, PartitionView]:
        return {f"{t}-{p}": pv for t, parts in sorted(self.topics.items()) for p, pv in sorted(parts.items())}


def tp_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def _ids(xs: Iterable[int]) -> str:
    return "[" + ",".join(str(x) for x in xs) + "]"


def _named(names: Sequence[str]) -> str:
    if len(names) <= MAX_NAMED:
        return ", ".join(names)
    return ", ".join(names[:MAX_NAMED]) + f" (+{len(names) - MAX_NAMED} more)"


# ---------------------------------------------------------------------------------------------- diffs


def diff_views(old: ClusterView, new: ClusterView) -> list[str]:
    """Readable lines for what changed in ZooKeeper between two reads, in a stable order: controller,
    brokers, topics (created, assignment changes, deleted), partition leadership, admin znodes."""
    lines: list[str] = []
    if (new.controller, new.controller_epoch) != (old.controller, old.controller_epoch) and new.controller is not None:
        lines.append(f"/controller: controller {new.controller}, epoch {new.controller_epoch}")
    for b in sorted(set(new.brokers) - set(old.brokers)):
        lines.append(f"broker {b} registered (broker epoch {new.brokers[b]})")
    for b in sorted(set(old.brokers) - set(new.brokers)):
        lines.append(f"broker {b} registration gone")
    for b in sorted(set(old.brokers) & set(new.brokers)):
        if old.brokers[b] != new.brokers[b]:
            lines.append(f"broker {b} re-registered (broker epoch {old.brokers[b]} -> {new.brokers[b]})")
    for t in sorted(set(new.topics) - set(old.topics)):
        parts = new.topics[t]
        assignment = " ".join(f"{p}:{_ids(pv.replicas)}" for p, pv in sorted(parts.items()))
        lines.append(f"topic {t} created: {len(parts)} partitions, replicas {assignment}")
    for t in sorted(set(old.topics) - set(new.topics)):
        lines.append(f"topic {t} removed from /brokers/topics")
    old_parts, new_parts = old.partitions(), new.partitions()
    for name, pv in new_parts.items():
        before = old_parts.get(name)
        if before is not None and (before.replicas, before.adding, before.removing) != (
            pv.replicas,
            pv.adding,
            pv.removing,
        ):
            extra = ""
            if pv.adding or pv.removing:
                extra = f" (adding {_ids(pv.adding)}, removing {_ids(pv.removing)})"
            lines.append(f"{name} replicas {_ids(before.replicas)} -> {_ids(pv.replicas)}{extra}")
    for name, pv in new_parts.items():
        before = old_parts.get(name)
        if pv.leader is None:
            continue
        if before is None or before.leader is None:
            lines.append(f"{name} online: leader {pv.leader}, epoch {pv.leader_epoch}, isr {_ids(pv.isr)}")
        elif (before.leader, before.leader_epoch, before.isr) != (pv.leader, pv.leader_epoch, pv.isr):
            leader = f"leader {before.leader} -> {pv.leader}" if before.leader != pv.leader else f"leader {pv.leader}"
            isr = f"isr {_ids(before.isr)} -> {_ids(pv.isr)}" if before.isr != pv.isr else f"isr {_ids(pv.isr)}"
            lines.append(f"{name} {leader}, epoch {pv.leader_epoch}, {isr}")
    for t in sorted(set(new.delete_topics) - set(old.delete_topics)):
        lines.append(f"/admin/delete_topics/{t} created (topic queued for deletion)")
    for t in sorted(set(old.delete_topics) - set(new.delete_topics)):
        lines.append(f"/admin/delete_topics/{t} removed")
    if new.reassign_pending != old.reassign_pending:
        lines.append("/admin/reassign_partitions " + ("written" if new.reassign_pending else "removed"))
    return lines


# ---------------------------------------------------------------------------------------------- requests


def _partition_names(body: Mapping[str, Any], key: str = "partitionStates") -> list[tuple[str, Mapping[str, Any]]]:
    out: list[tuple[str, Mapping[str, Any]]] = []
    for ts in body.get("topicStates") or ():
        for ps in ts.get(key) or ():
            out.append((tp_name(str(ts["topicName"]), int(ps["partitionIndex"])), ps))
    return out


def describe_requests(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per (batch, API) for messages read from ``livectl.requests`` (the request sink's values:
    ``{"api", "brokerId", "batchId", "controllerEpoch", "body"}``), in arrival order of their first message."""
    groups: dict[tuple[int, str], list[Mapping[str, Any]]] = {}
    for m in messages:
        groups.setdefault((int(m.get("batchId", -1)), str(m.get("api"))), []).append(m)
    lines = []
    for (batch, api), msgs in groups.items():
        brokers = ",".join(str(b) for b in sorted({b for m in msgs for b in _recipients(m)}))
        bodies = [m["body"] if isinstance(m["body"], dict) else json.loads(m["body"]) for m in msgs]
        lines.append(
            f"{api} -> broker{'s' if ',' in brokers else ''} {brokers} (batch {batch}): {_summary(api, bodies)}"
        )
    return lines


def _recipients(m: Mapping[str, Any]) -> list[int]:
    """The brokers a message is for: a shared one's addressees, or its ``brokerId``."""
    if m.get("addressees"):
        return [int(a["brokerId"]) for a in m["addressees"]]
    return [int(m["brokerId"])]


def _summary(api: str, bodies: Sequence[Mapping[str, Any]]) -> str:
    if api == "LeaderAndIsr":
        states: dict[str, Mapping[str, Any]] = {}
        for b in bodies:
            states.update(_partition_names(b))
        new = sum(1 for s in states.values() if s.get("isNew"))
        items = [
            f"{n} leader {s['leader']} epoch {s['leaderEpoch']} isr {_ids(s['isr'])}" for n, s in sorted(states.items())
        ]
        return _named(items) + (f"; {new} new" if new else "")
    if api == "UpdateMetadata":
        names = sorted({n for b in bodies for n, _ in _partition_names(b)})
        live = sorted({int(x["id"]) for b in bodies for x in b.get("liveBrokers") or ()})
        what = f"{len(names)} partition{'s' if len(names) != 1 else ''}" if names else "no partition changes"
        return f"{what}; live brokers {_ids(live)}"
    if api == "StopReplica":
        entries: dict[str, bool] = {}
        for b in bodies:
            for n, s in _partition_names(b):
                entries[n] = entries.get(n, False) or bool(s.get("deletePartition"))
        deleting = sorted(n for n, d in entries.items() if d)
        stopping = sorted(n for n, d in entries.items() if not d)
        parts = []
        if deleting:
            parts.append(_named(deleting) + " (delete)")
        if stopping:
            parts.append(_named(stopping) + " (stop)")
        return "; ".join(parts) or "nothing"
    if api == "ControlledShutdownResponse":
        errors = sorted({int(b.get("errorCode", 0)) for b in bodies} - {0})
        remaining = sorted(
            {
                tp_name(str(p["topicName"]), int(p["partitionIndex"]))
                for b in bodies
                for p in b.get("remainingPartitions") or ()
            }
        )
        head = f"error {errors[0]}" if errors else "ok"
        return head + (f", still leading {_named(remaining)}" if remaining else ", nothing remaining")
    if api == "AlterPartitionResponse":
        items = []
        for b in bodies:
            for t in b.get("topics") or ():
                for p in t.get("partitions") or ():
                    err = int(p.get("errorCode", 0))
                    name = tp_name(str(t["topicName"]), int(p["partitionIndex"]))
                    items.append(f"{name} isr {_ids(p.get('isr') or ())}" + (f" error {err}" if err else ""))
        return _named(sorted(items)) or "no partitions"
    return f"{len(bodies)} message{'s' if len(bodies) != 1 else ''}"


def describe_admin_result(result: Mapping[str, Any], label: str | None = None) -> str:
    """``create_topic orders -> ok: Topic created.`` from an ``livectl.admin-results`` value."""
    what = label or f"{result.get('command')} (request {str(result.get('request_id', ''))[:8]})"
    status = str(result.get("status"))
    error = result.get("error")
    message = str(result.get("message") or "")
    text = f"{what} -> {status}"
    if error:
        text += f" {error}"
    if message:
        text += f": {message}"
    return text


# ---------------------------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class DemoPlan:
    """Who the scenario acts on, for brokers ``1..brokers``: ``kill`` is hard-killed and restarted,
    ``shutdown`` shut down under control at the end; ``payments_rf`` is the replication factor of the topic
    that is reassigned (below the broker count, so that every partition has a broker to move onto);
    ``audit`` the explicit assignment of the topic deleted last (on brokers still up at that point, so that
    the deletion completes)."""

    brokers: int
    kill: int
    shutdown: int
    payments_rf: int
    audit: tuple[tuple[int, ...], ...]


def demo_plan(brokers: int) -> DemoPlan:
    """The scenario adapted to ``brokers`` brokers (at least 3): broker 3 is killed; the last broker is shut
    down, or broker 2 with only three (3 comes back and stays); ``payments`` has RF 3, or 2 with only three
    brokers (RF 3 on three brokers leaves no broker to reassign onto); ``audit`` lives on the two lowest ids
    other than the one shut down."""
    if brokers < 3:
        raise ValueError(
            f"brokers: the scenario needs at least 3 (it kills one, moves a topic onto another and shuts "
            f"one down), got {brokers}"
        )
    shutdown = brokers if brokers >= 4 else 2
    a, b = [i for i in range(1, brokers + 1) if i != shutdown][:2]
    return DemoPlan(brokers, kill=3, shutdown=shutdown, payments_rf=min(3, brokers - 1), audit=((a, b), (b, a)))


def reassignment_targets(assignment: Mapping[int, Sequence[int]], brokers: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """New replicas for every partition of a topic, moved onto *other* brokers as far as possible: the
    brokers not holding the partition come first (rotated by partition so that leaders spread), then the
    current replicas; same replication factor. Every target differs from the current assignment when
    there is at least one broker outside it."""
    ordered = sorted(brokers)
    out: dict[int, tuple[int, ...]] = {}
    for p, replicas in sorted(assignment.items()):
        outside = [b for b in ordered if b not in replicas]
        if outside:
            k = p % len(outside)
            outside = outside[k:] + outside[:k]
        target = tuple((outside + list(replicas))[: len(replicas)])
        out[p] = target
    return out


# ---------------------------------------------------------------------------------------------- checks


def broker_partitions(status: Mapping[int, Mapping[str, Any]]) -> dict[int, Mapping[str, Mapping[str, Any]]]:
    """``broker id -> "<t>-<p>" -> partition status`` from the brokers' status documents."""
    return {b: dict(s.get("partitions") or {}) for b, s in status.items()}


def brokers_disagree(
    view: ClusterView, status: Mapping[int, Mapping[str, Any]], skip_topics: Iterable[str] = ()
) -> list[str]:
    """What the live brokers' own view says differently from ZooKeeper (empty = they agree):

    * the leader of each partition leads it, at the leader epoch of the state znode;
    * every other replica that reports status follows that leader at that epoch;
    * no broker hosts a partition it is not a replica of (removed replicas were deleted).

    Only brokers present in ``status`` (the live ones) are checked; topics in ``skip_topics`` are ignored.
    """
    skip = set(skip_topics)
    parts = broker_partitions(status)
    problems: list[str] = []
    expected: dict[str, PartitionView] = {}
    for topic, plist in sorted(view.topics.items()):
        if topic in skip:
            continue
        for p, pv in sorted(plist.items()):
            name = tp_name(topic, p)
            expected[name] = pv
            if pv.leader is None:
                problems.append(f"{name} has no state znode")
                continue
            for r in pv.replicas:
                if r not in parts:  # not live (or no status yet): nothing to compare
                    continue
                got = parts[r].get(name)
                if got is None:
                    problems.append(f"broker {r} does not host {name}")
                    continue
                role = "leader" if r == pv.leader else "follower"
                if got.get("role") != role or got.get("leader_epoch") != pv.leader_epoch:
                    problems.append(
                        f"broker {r} sees {name} as {got.get('role')} (leader {got.get('leader')}, epoch "
                        f"{got.get('leader_epoch')}); ZooKeeper: {role}, leader {pv.leader}, epoch {pv.leader_epoch}"
                    )
                elif role == "follower" and got.get("leader") != pv.leader:
                    problems.append(f"broker {r} follows {got.get('leader')} for {name}; ZooKeeper: {pv.leader}")
    for b, hosted in sorted(parts.items()):
        for name in sorted(hosted):
            topic = name.rsplit("-", 1)[0]
            if topic in skip:
                continue
            assigned = expected.get(name)
            if assigned is None or b not in assigned.replicas:
                problems.append(f"broker {b} still hosts {name}, which is not assigned to it")
    return problems + metadata_disagrees(view, status, skip)


# ---------------------------------------------------------------------------------------------- real brokers

#: a partition's log directory in a Kafka broker's ``log.dirs`` (a deleted one is renamed ``…-delete`` first)
_LOG_DIR = re.compile(r"(.+)-([0-9]+)")


@dataclass(frozen=True)
class MetadataPartition:
    """One partition as a Kafka broker's metadata cache describes it (a MetadataResponse entry)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    error_code: int = 0


def hosted_partitions(log_dirs: Iterable[str]) -> list[str]:
    """``"<t>-<p>"`` of the partition directories among the names in a broker's ``log.dirs`` (directories
    renamed for deletion, future or stray replicas, and checkpoint files are not partitions it hosts)."""
    return sorted(n for n in log_dirs if _LOG_DIR.fullmatch(n) and not n.startswith("__"))


def kafka_broker_status(
    broker: int, metadata: Mapping[str, MetadataPartition], hosted: Iterable[str]
) -> dict[str, Any]:
    """A real Kafka broker's own view in the simulated brokers' status shape (:func:`brokers_disagree`):
    ``partitions`` has every partition whose log it hosts, its role, leader and leader epoch from its
    metadata cache; ``kafka_metadata`` is that whole cache (leader, epoch, ISR, replicas of every partition)."""
    partitions: dict[str, dict[str, Any]] = {}
    for name in hosted:
        m = metadata.get(name)
        if m is None:
            partitions[name] = {"role": None, "leader": None, "leader_epoch": None, "isr": []}
            continue
        role = "leader" if m.leader == broker else "follower"
        partitions[name] = {"role": role, "leader": m.leader, "leader_epoch": m.leader_epoch, "isr": list(m.isr)}
    cache = {
        name: {"leader": m.leader, "leader_epoch": m.leader_epoch, "isr": list(m.isr), "replicas": list(m.replicas)}
        for name, m in metadata.items()
        if not m.error_code
    }
    return {"partitions": partitions, "kafka_metadata": cache}


def metadata_disagrees(
    view: ClusterView, status: Mapping[int, Mapping[str, Any]], skip_topics: Iterable[str] = ()
) -> list[str]:
    """Where a real broker's metadata cache (``kafka_metadata`` of its status, from :func:`kafka_broker_status`)
    differs from ZooKeeper: each partition's leader, leader epoch, ISR (as a set) and replicas (in order), and
    no partition of a topic ZooKeeper no longer has. Status documents without ``kafka_metadata`` (the
    simulated brokers') are not checked here."""
    skip = set(skip_topics)
    problems: list[str] = []
    for b, doc in sorted(status.items()):
        cache = doc.get("kafka_metadata")
        if cache is None:
            continue
        for topic, plist in sorted(view.topics.items()):
            if topic in skip:
                continue
            for p, pv in sorted(plist.items()):
                name = tp_name(topic, p)
                got = cache.get(name)
                if pv.leader is None:
                    continue
                if got is None:
                    problems.append(f"broker {b}'s metadata has no {name}")
                    continue
                wanted = (pv.leader, pv.leader_epoch, sorted(pv.isr), list(pv.replicas))
                seen = (got["leader"], got["leader_epoch"], sorted(got["isr"]), list(got["replicas"]))
                if seen != wanted:
                    problems.append(
                        f"broker {b}'s metadata: {name} leader {seen[0]} epoch {seen[1]} isr {_ids(seen[2])} "
                        f"replicas {_ids(seen[3])}; ZooKeeper: leader {wanted[0]} epoch {wanted[1]} "
                        f"isr {_ids(wanted[2])} replicas {_ids(wanted[3])}"
                    )
        for name in sorted(cache):
            topic = name.rsplit("-", 1)[0]
            if topic not in skip and topic not in view.topics:
                problems.append(f"broker {b}'s metadata still has {name}, a topic ZooKeeper no longer has")
    return problems


def leadership_problems(
    view: ClusterView, *, not_on: Iterable[int] = (), topics: Iterable[str] | None = None
) -> list[str]:
    """Partitions without a leader, led by or with an ISR containing one of ``not_on``."""
    avoid = set(not_on)
    wanted = None if topics is None else set(topics)
    problems = []
    for name, pv in view.partitions().items():
        if wanted is not None and name.rsplit("-", 1)[0] not in wanted:
            continue
        if pv.leader is None or pv.leader < 0:
            problems.append(f"{name} has no leader")
        elif pv.leader in avoid:
            problems.append(f"{name} is still led by {pv.leader}")
        elif avoid & set(pv.isr):
            problems.append(f"{name} isr {_ids(pv.isr)} still has {_ids(sorted(avoid & set(pv.isr)))}")
    return problems


def not_preferred(view: ClusterView) -> list[str]:
    """Partitions whose preferred replica (the assignment head) could lead (it is registered and in the
    ISR) but does not."""
    out = []
    for name, pv in view.partitions().items():
        head = pv.replicas[0] if pv.replicas else None
        if head is not None and head in view.brokers and head in pv.isr and pv.leader != head:
            out.append(f"{name} led by {pv.leader}, preferred {head}")
    return out


def missing_from_isr(view: ClusterView, broker: int) -> list[str]:
    """Partitions that have ``broker`` as a replica but not in their ISR."""
    return [
        f"{name} isr {_ids(pv.isr)} lacks {broker}"
        for name, pv in view.partitions().items()
        if broker in pv.replicas and broker not in pv.isr
    ]


def format_table(view: ClusterView) -> list[str]:
    """The final state, one line per partition: ``topic-p  leader L  epoch E  isr [...]  replicas [...]``."""
    rows = [("partition", "leader", "epoch", "isr", "replicas")]
    for name, pv in view.partitions().items():
        rows.append((name, str(pv.leader), str(pv.leader_epoch), _ids(pv.isr), _ids(pv.replicas)))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
