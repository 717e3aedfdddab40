"""Creating the sink's topics where the broker does not create them on first use."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from typing import Any

#: how long the created topics may take to reach the broker's metadata with a leader for every partition
METADATA_WAIT_S = 60.0


class TopicsNotReadyError(RuntimeError):
    """Created topics whose partitions had no leader in the broker's metadata within the wait."""


def ensure_topics(
    bootstrap_servers: str,
    topics: Iterable[str],
    partitions: int = 1,
    replication: int = 1,
    client_config: Mapping[str, Any] | None = None,
) -> None:
    """Create whichever of ``topics`` do not exist, with ``partitions``: a broker may not create topics on
    first use (``auto.create.topics.enable=false``), and one that does gives them its default partitions. Returns
    once every topic created here has a leader for each partition in the broker's metadata: a consumer that
    subscribes before that is assigned no partition and waits for its next metadata refresh (five minutes by
    default). :class:`TopicsNotReadyError` names the topics still without one after :data:`METADATA_WAIT_S`."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(**dict(client_config or {}), bootstrap_servers=bootstrap_servers)
    try:
        existing = set(admin.list_topics())
        missing = [NewTopic(t, partitions, replication) for t in topics if t not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics(missing)
            _wait_for_leaders(admin, [t.name for t in missing])
    finally:
        admin.close()


def _wait_for_leaders(admin: Any, names: list[str]) -> None:
    deadline = time.monotonic() + METADATA_WAIT_S
    waiting = names
    while True:
        described = admin.describe_topics(waiting)
        ready = {
            d["name"]
            for d in described
            if d.get("error_code") == 0
            and d.get("partitions")
            and all(p.get("error_code") == 0 and p.get("leader_id", -1) >= 0 for p in d["partitions"])
        }
        waiting = [t for t in waiting if t not in ready]
        if not waiting:
            return
        if time.monotonic() >= deadline:
            raise TopicsNotReadyError(
                f"topics {', '.join(waiting)}: created, but without a leader for every partition in the broker's "
                f"metadata after {METADATA_WAIT_S:g} s"
            )
        time.sleep(0.1)
