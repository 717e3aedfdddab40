"""Kafka's limits on what an input record may ask for, and the sizes livectl's outputs must fit.

One place for every bound, so that the decoder (:mod:`core.events`), the great-expectations suite
(``conf/expectations/livectl-input.json`` names them as ``$NAME`` placeholders, filled in from here by
:mod:`streaming.query.validation`) and the controller operations agree:

* Kafka's wire types: broker ids, partition ids and epochs are int32, broker epochs and times int64,
  ``replicationFactor`` of CreateTopics is int16, error codes int16;
* Kafka's topic names (``org.apache.kafka.common.internals.Topic``): ``[a-zA-Z0-9._-]{1,249}``, not
  ``.`` or ``..``;
* ZooKeeper's ``jute.maxbuffer`` (1 MiB by default): one znode's data, ``/brokers/topics/<t>`` above all,
  must stay below it, or the write is refused and the controller could never record the topic;
* livectl's own: ``request_id`` and other strings are bounded, so that every result and every rejected
  copy fits one Kafka message.
"""

from __future__ import annotations

INT8_MIN = -(2**7)
INT8_MAX = 2**7 - 1
INT16_MAX = 2**15 - 1
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

#: Kafka's ``Topic.MAX_NAME_LENGTH``
MAX_TOPIC_LENGTH = 249
#: CreateTopics ``numPartitions`` is an int32
MAX_PARTITIONS = INT32_MAX
#: CreateTopics ``replicationFactor`` is an int16
MAX_REPLICATION_FACTOR = INT16_MAX
MAX_BROKER_ID = INT32_MAX
MAX_PORT = 65535

#: ``request_id``: echoed as the key and in the value of every admin result
MAX_REQUEST_ID_LENGTH = 256
#: hosts, listener names, racks, security protocols, election types, config keys
MAX_NAME_LENGTH = 1024
#: one config value (the whole ``/config/topics/<t>`` znode is bounded by :data:`MAX_ZNODE_BYTES` too)
MAX_CONFIG_VALUE_LENGTH = 65536
#: entries of one list in an event (partitions of a reassignment file, ...); a Kafka record of 1 MB
#: cannot hold more than this many meaningful entries anyway
MAX_LIST_ITEMS = 1_000_000

#: ZooKeeper's default ``jute.maxbuffer`` (0xfffff): the largest request packet a server accepts
JUTE_MAXBUFFER = 0xFFFFF
#: the largest znode data livectl writes: ``jute.maxbuffer`` less room for the path, the request
#: header, the ACL and the fencing ``check`` of the multi-op that carries it
MAX_ZNODE_BYTES = 1_000_000

#: the largest message value livectl writes to a Kafka topic (before compression): below Kafka's
#: default ``max.message.bytes`` and kafka-python's ``max_request_size`` (1 MiB), whatever the compression
MAX_MESSAGE_BYTES = 900_000

# a topic znode without its partition entries: {"version":3,"topic_id":"<22>","partitions":{},
# "adding_replicas":{},"removing_replicas":{}}
_TOPIC_ZNODE_FRAME_BYTES = len('{"version":2,"partitions":{},"adding_replicas":{},"removing_replicas":{}}')


def digits_total(n: int) -> int:
    """Characters needed to write ``0, 1, …, n-1`` in decimal (no separators)."""
    total, width, low = 0, 1, 0
    while low < n:
        high = min(n, 10**width)
        total += (high - low) * width
        low, width = high, width + 1
    return total


def min_topic_znode_bytes(partitions: int, replication_factor: int) -> int:
    """A lower bound of the size of ``/brokers/topics/<t>`` for ``partitions`` partitions of
    ``replication_factor`` distinct replicas each (the smallest broker ids: 0, 1, 2, …). A request whose
    bound is over :data:`MAX_ZNODE_BYTES` can never be recorded, whatever brokers it is placed on."""
    if partitions <= 0:
        return _TOPIC_ZNODE_FRAME_BYTES
    # per partition: "p":[r0,r1,…] and a comma between entries
    per_partition = 2 + 1 + 2 + digits_total(replication_factor) + max(0, replication_factor - 1)
    return _TOPIC_ZNODE_FRAME_BYTES + digits_total(partitions) + partitions * per_partition + (partitions - 1)


def show(value: object, limit: int = 80) -> str:
    """``repr`` of ``value`` for an error message, cut at ``limit`` characters with the size noted, and
    ASCII only (a lone surrogate in a value must not make the message itself unencodable)."""
    text = ascii(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes | list | tuple | dict) else len(text)
    return f"{text[:limit]}… ({size} long)"
