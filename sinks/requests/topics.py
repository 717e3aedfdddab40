"""Creating the sink's topics where the broker does not create them on first use."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any


def ensure_topics(
    bootstrap_servers: str,
    topics: Iterable[str],
    partitions: int = 1,
    replication: int = 1,
    client_config: Mapping[str, Any] | None = None,
) -> None:
    """Create whichever of ``topics`` do not exist, with ``partitions``: a broker may not create topics on
    first use (``auto.create.topics.enable=false``), and one that does gives them its default partitions."""
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
    finally:
        admin.close()
