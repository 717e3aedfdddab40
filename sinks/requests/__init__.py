"""The request-topic sink: broker requests, admin results and rejected input, to Kafka (``acks=all``).

The public surface: :class:`RequestSink` (:class:`sinks.ports.RequestSinkPort` on Kafka) with its
``transactional.id`` (:func:`transactional_id`); :func:`ensure_topics`; and the messages it writes
(:func:`request_messages`, :func:`admin_result_messages`, :func:`rejected_messages`,
:class:`OutboundMessage`, :func:`partition_for_key`), which the in-memory sink (:mod:`sinks.memory`) writes
too. The modules, by concern, each with its contract:

- :mod:`sinks.requests.messages` — the three topics' messages: keys, values, headers, order, identities;
- :mod:`sinks.requests.merge` — merging the bodies of one broker and API;
- :mod:`sinks.requests.split` — splitting a request too large for one message, and the messages' JSON;
- :mod:`sinks.requests.tail` — idempotent replay by batch id: what of a batch a topic already holds;
- :mod:`sinks.requests.sink` — the transactional producer that writes a batch;
- :mod:`sinks.requests.fencing` — a producer fenced by a newer controller's, and kafka-python's reports of it;
- :mod:`sinks.requests.topics` — creating the topics.
"""

from sinks.requests.messages import (
    OutboundMessage,
    admin_result_messages,
    partition_for_key,
    rejected_messages,
    request_messages,
)
from sinks.requests.sink import RequestSink, transactional_id
from sinks.requests.split import MAX_MESSAGE_BYTES
from sinks.requests.tail import TAIL_WINDOW
from sinks.requests.topics import ensure_topics

__all__ = [
    "MAX_MESSAGE_BYTES",
    "TAIL_WINDOW",
    "OutboundMessage",
    "RequestSink",
    "admin_result_messages",
    "ensure_topics",
    "partition_for_key",
    "rejected_messages",
    "request_messages",
    "transactional_id",
]
