"""Readers of the model's values out of decoded JSON, shared by the event decoders: topic names by
Kafka's rules, partition and broker ids, topic-partition lists, endpoints, configs.

Each names the field and the reason through :class:`core.errors.FormatError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from core import jsonform as jf
from core import limits as lim
from core.errors import FormatError
from core.kafka.error_codes import KafkaError
from core.limits import MAX_TOPIC_LENGTH
from core.model import Endpoint, TopicPartition

#: Kafka's ``Topic.LEGAL_CHARS``; matched against the whole name (``fullmatch``: a ``$`` would let a
#: final newline through)
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]+")
#: the same rule as one regular expression, for the great-expectations suite
TOPIC_NAME_REGEX = r"^(?!\.\.?\Z)[a-zA-Z0-9._-]{1,249}\Z"
#: Kafka's ``Uuid.toString()``: 16 bytes, base64url without padding
TOPIC_ID_REGEX = re.compile(r"[A-Za-z0-9_-]{21}[AQgw]")
INVALID_TOPIC = KafkaError.INVALID_TOPIC_EXCEPTION.name


def validate_topic_name(name: str, fieldname: str = "topic") -> str:
    """Kafka's topic name rules (``org.apache.kafka.common.internals.Topic.validate``); the error is
    Kafka's ``INVALID_TOPIC_EXCEPTION``."""
    if not name:
        raise FormatError(fieldname, "topic name is illegal, it can't be empty", INVALID_TOPIC)
    if name in (".", ".."):
        raise FormatError(fieldname, 'topic name cannot be "." or ".."', INVALID_TOPIC)
    if len(name) > MAX_TOPIC_LENGTH:
        raise FormatError(
            fieldname,
            f"topic name is illegal, it can't be longer than {MAX_TOPIC_LENGTH} characters, "
            f"got {len(name)}: {lim.show(name)}",
            INVALID_TOPIC,
        )
    if not _TOPIC_RE.fullmatch(name):
        raise FormatError(
            fieldname,
            f"topic name {lim.show(name)} is illegal, it contains a character other than ASCII alphanumerics, "
            "'.', '_' and '-'",
            INVALID_TOPIC,
        )
    return name


def topic_field(o: Mapping[str, Any], field_: str = "topic", prefix: str = "") -> str:
    """A topic name field, checked by Kafka's rules."""
    v = jf.req(o, field_, prefix)
    if not isinstance(v, str):
        raise FormatError(prefix + field_, f"must be a string, got {type(v).__name__}", INVALID_TOPIC)
    return validate_topic_name(v, prefix + field_)


def read_configs(o: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    configs = jf.str_map(o, "configs", max_key_length=lim.MAX_NAME_LENGTH, max_value_length=lim.MAX_CONFIG_VALUE_LENGTH)
    # /config/topics/<t> holds them all: {"version":1,"config":{…}}
    size = len(json.dumps({"version": 1, "config": configs}, separators=(",", ":")).encode())
    if size > lim.MAX_ZNODE_BYTES:
        raise FormatError(
            "configs",
            f"the topic's config znode would be {size} bytes, over the {lim.MAX_ZNODE_BYTES} bytes a znode may "
            f"hold (ZooKeeper's jute.maxbuffer is {lim.JUTE_MAXBUFFER})",
            KafkaError.INVALID_CONFIG.name,
        )
    return tuple(sorted(configs.items()))


def read_tp_list(o: Mapping[str, Any], field_: str, *, required: bool) -> tuple[TopicPartition, ...]:
    if o.get(field_) is None and not required:
        return ()
    out = []
    for i, e in enumerate(jf.obj_list(o, field_, max_items=lim.MAX_LIST_ITEMS)):
        pre = f"{field_}[{i}]."
        out.append(TopicPartition(topic_field(e, "topic", pre), read_partition_id(e, pre)))
    return tuple(out)


def read_partition_id(o: Mapping[str, Any], prefix: str = "") -> int:
    return jf.integer(o, "partition", prefix, minimum=0, maximum=lim.INT32_MAX)


def read_broker_id(o: Mapping[str, Any], field_: str = "broker_id", prefix: str = "") -> int:
    return jf.integer(o, field_, prefix, minimum=0, maximum=lim.MAX_BROKER_ID)


def read_error_code(o: Mapping[str, Any], prefix: str = "") -> int:
    return jf.opt_integer(o, "error_code", 0, prefix, minimum=-(2**15), maximum=lim.INT16_MAX)


def read_name(o: Mapping[str, Any], field_: str, prefix: str = "") -> str:
    return jf.string(o, field_, prefix, max_length=lim.MAX_NAME_LENGTH)


def read_endpoints(o: Mapping[str, Any], prefix: str = "") -> tuple[Endpoint, ...]:
    if o.get("endpoints") is None:
        return ()
    out = []
    for i, e in enumerate(jf.obj_list(o, "endpoints", prefix, max_items=1000)):
        pre = f"{prefix}endpoints[{i}]."
        out.append(
            Endpoint(
                read_name(e, "listener", pre),
                read_name(e, "host", pre),
                jf.integer(e, "port", pre, minimum=0, maximum=lim.MAX_PORT),
                jf.opt_string(e, "security_protocol", pre, max_length=lim.MAX_NAME_LENGTH) or "PLAINTEXT",
            )
        )
    return tuple(out)


def read_topic(o: Mapping[str, Any]) -> str:
    return topic_field(o)
