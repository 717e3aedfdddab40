"""Reading a topic from where it ends now: what a tool needs that sends something and then waits for the
answer (the admin CLI's ``--wait``, the simulated brokers' ``shutdown --wait``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from sinks.errors import SinkUnavailableError


def consumer_at_end(bootstrap: str, topic: str, client_config: Mapping[str, Any] | None = None) -> KafkaConsumer:
    """A consumer of every partition of ``topic``, positioned at its end (taken before a command is sent),
    reading committed transactions only: the controller writes its output topics in transactions, and an
    aborted one (a fenced or killed controller) was never said. Raises :class:`SinkUnavailableError` when
    Kafka cannot be reached or the topic does not exist."""
    try:
        consumer = KafkaConsumer(
            **dict(client_config or {}),
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            group_id=None,
            isolation_level="read_committed",
        )
    except KafkaError:
        raise SinkUnavailableError(f"cannot reach Kafka at {bootstrap}") from None
    parts = consumer.partitions_for_topic(topic)
    if not parts:
        consumer.close()
        # Kafka's metadata leaves out a topic the principal may not describe: the same answer as a missing one
        raise SinkUnavailableError(
            f"topic {topic} does not exist on {bootstrap} (or this client's principal is not allowed to describe "
            "it); is the controller running?"
        )
    tps = [TopicPartition(topic, p) for p in sorted(parts)]
    consumer.assign(tps)
    consumer.seek_to_end(*tps)
    for tp in tps:
        consumer.position(tp)  # resolve the end now: what is written after this is what the caller waits for
    return consumer
