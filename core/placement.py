"""Kafka's default replica placement (``AdminUtils.assignReplicasToBrokers``).

Deterministic given ``start_index`` and ``replica_shift`` (Kafka draws both at random unless a fixed
start index is given, in which case both equal it). livectl never draws: commands derive them from a
stable hash of the topic name (:func:`stable_start_index`).

Rack-unaware: partition ``p``'s first replica is broker ``(p + start) mod n`` of the brokers sorted by
id; the others follow at shifts ``1 + (shift + j) mod (n - 1)``; the shift grows by one every ``n``
partitions. Rack-aware: the same walk over the rack-alternated broker list, skipping a broker whose
rack already has a replica while some rack has none, and a broker that already has a replica while
some broker has none. All brokers must have a rack, or none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from core.kafka.error_codes import KafkaError


class PlacementError(ValueError):
    """Placement is impossible; ``error`` is Kafka's error name."""

    def __init__(self, error: str, message: str) -> None:
        self.error = error
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class BrokerRack:
    id: int
    rack: str | None = None


def stable_start_index(topic: str, n_brokers: int) -> int:
    """A start index in ``[0, n_brokers)`` from a stable hash of ``topic`` (no randomness, no clock)."""
    if n_brokers <= 0:
        return 0
    return int.from_bytes(hashlib.sha256(topic.encode()).digest()[:8], "big") % n_brokers


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """Kafka's ``getRackAlternatedBrokerList``: one broker per rack in turn, racks sorted by name."""
    by_rack: dict[str, list[int]] = {}
    for b, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(b)
    racks = sorted(by_rack)
    iters = {r: iter(sorted(by_rack[r])) for r in racks}
    out: list[int] = []
    i = 0
    while len(out) < len(broker_racks):
        nxt = next(iters[racks[i]], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(racks)
    return out


def assign_replicas(
    brokers: Sequence[BrokerRack],
    n_partitions: int,
    replication_factor: int,
    *,
    start_index: int = 0,
    start_partition_id: int = 0,
    replica_shift: int | None = None,
    cordoned: Collection[int] = (),
) -> dict[int, tuple[int, ...]]:
    """Partition id -> replicas for ``n_partitions`` partitions numbered from ``start_partition_id``, over
    ``brokers`` less the ``cordoned`` ones (:mod:`core.cordon`: they get no new replica).

    Raises :class:`PlacementError` (``INVALID_PARTITIONS``, ``INVALID_REPLICATION_FACTOR``,
    ``INVALID_REPLICA_ASSIGNMENT`` for mixed rack information) like Kafka's checks."""
    if n_partitions <= 0:
        raise PlacementError(KafkaError.INVALID_PARTITIONS.name, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise PlacementError(KafkaError.INVALID_REPLICATION_FACTOR.name, "Replication factor must be larger than 0.")
    skipped = sorted(b.id for b in brokers if b.id in cordoned)
    if skipped:
        brokers = [b for b in brokers if b.id not in cordoned]
    if replication_factor > len(brokers):
        why = f" ({len(skipped)} cordoned: {', '.join(map(str, skipped))})" if skipped else ""
        raise PlacementError(
            KafkaError.INVALID_REPLICATION_FACTOR.name,
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}{why}.",
        )
    shift = start_index if replica_shift is None else replica_shift
    if all(b.rack is None for b in brokers):
        ids = sorted(b.id for b in brokers)
        return _rack_unaware(n_partitions, replication_factor, ids, start=(start_index, start_partition_id, shift))
    if any(b.rack is None for b in brokers):
        raise PlacementError(
            KafkaError.INVALID_REPLICA_ASSIGNMENT.name,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    racks = {b.id: b.rack for b in brokers if b.rack is not None}
    return _rack_aware(n_partitions, replication_factor, racks, start=(start_index, start_partition_id, shift))


def _rack_unaware(
    n_partitions: int, rf: int, broker_list: list[int], *, start: tuple[int, int, int]
) -> dict[int, tuple[int, ...]]:
    start_index, start_partition_id, shift = start
    n = len(broker_list)
    out: dict[int, tuple[int, ...]] = {}
    pid = max(0, start_partition_id)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start_index) % n
        reps = [broker_list[first]]
        reps.extend(broker_list[_replica_index(first, shift, j, n)] for j in range(rf - 1))
        out[pid] = tuple(reps)
        pid += 1
    return out


def _rack_aware(
    n_partitions: int, rf: int, racks: Mapping[int, str], *, start: tuple[int, int, int]
) -> dict[int, tuple[int, ...]]:
    start_index, start_partition_id, shift = start
    arranged = rack_alternated_brokers(racks)
    n = len(arranged)
    n_racks = len(set(racks.values()))
    out: dict[int, tuple[int, ...]] = {}
    pid = max(0, start_partition_id)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start_index) % n
        leader = arranged[first]
        reps = [leader]
        racks_with = {racks[leader]}
        brokers_with = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                b = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = racks[b]
                k += 1
                if (rack not in racks_with or len(racks_with) == n_racks) and (
                    b not in brokers_with or len(brokers_with) == n
                ):
                    reps.append(b)
                    racks_with.add(rack)
                    brokers_with.add(b)
                    break
        out[pid] = tuple(reps)
        pid += 1
    return out


def replacement_broker(
    replaced: int,
    replicas: Collection[int],
    brokers: Sequence[BrokerRack],
    cordoned: Collection[int],
    load: Mapping[int, int],
) -> int | None:
    """The broker to take ``replaced``'s place among ``replicas``, or ``None`` when none can: one of ``brokers``
    (the live ones, with racks), not cordoned, not ``replaced``, not already one of ``replicas``; of
    ``replaced``'s rack when one such is free, else of a rack no other replica is on, else any; then the one
    holding the fewest replicas (``load``: broker -> replica count), then the lowest id. A drain's destination
    (:mod:`core.drain`) and the repair of a replica placed on livectl's controller id
    (:func:`core.controller.topics.zk_topic_change`)."""
    rack = {b.id: b.rack for b in brokers}
    free = [b.id for b in brokers if b.id != replaced and b.id not in cordoned and b.id not in replicas]
    if not free:
        return None
    held = {rack.get(r) for r in replicas if r != replaced}

    def preference(b: int) -> tuple[int, int, int]:
        same = rack.get(replaced) is not None and rack.get(b) == rack.get(replaced)
        new_rack = rack.get(b) not in held
        return (0 if same else 1 if new_rack else 2, load.get(b, 0), b)

    return min(free, key=preference)


def validate_manual_assignment(
    assignment: Sequence[Sequence[int]], live_brokers: set[int] | None, expected_rf: int | None = None
) -> str | None:
    """Kafka's checks on an explicit assignment; the message of an ``INVALID_REPLICA_ASSIGNMENT`` or
    ``None`` when it is fine. ``live_brokers`` None skips the check that every broker is registered
    (Kafka's CreateTopics makes none; its CreatePartitions does)."""
    for i, reps in enumerate(assignment):
        if not reps:
            return f"Partition {i} has an empty replica list."
        if len(set(reps)) != len(reps):
            listed = ", ".join(map(str, reps))
            return f"Duplicate brokers not allowed in replica assignment: {listed} for partition id {i}."
        if expected_rf is not None and len(reps) != expected_rf:
            return (
                f"Inconsistent replication factor between partitions, partition 0 has {expected_rf} "
                f"while partition {i} has replication factor {len(reps)}."
            )
        unknown = [] if live_brokers is None else sorted(set(reps) - live_brokers)
        if unknown:
            return f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
    return None
