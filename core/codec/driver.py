"""Decoders of the internal events the driver makes: controller failover (with its snapshot), the
partition states and topics it re-read after ZooKeeper refused a write, and the periodic ticks."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from core import jsonform as jf
from core import limits as lim
from core.codec.snapshot import decode_snapshot, read_states
from core.codec.values import read_configs, read_topic
from core.errors import FormatError
from core.events import (
    AutoRebalanceTick,
    ControllerFailover,
    Event,
    PartitionStatesRead,
    Tick,
    TopicCreationRefused,
)
from core.snapshot import TopicZnode


def _partition_states_read(o: Mapping[str, Any]) -> Event:
    topic = read_topic(o)
    return PartitionStatesRead(topic, read_states(o, topic))


def _topic_creation_refused(o: Mapping[str, Any]) -> Event:
    topic = read_topic(o)
    refused = jf.string(o, "refused_topic_id", max_length=lim.MAX_NAME_LENGTH)
    raw = o.get("znode")
    znode = None
    if raw is not None:
        z = jf.obj(raw, "znode")
        p = "znode."

        def pairs(x: Any, name: str) -> tuple[tuple[int, tuple[int, ...]], ...]:
            if not isinstance(x, list) or not all(isinstance(e, list) and len(e) == 2 for e in x):
                raise FormatError(name, "must be a list of [partition, replicas]")
            return tuple((jf.integer({"p": k}, "p", name + ".", minimum=0), jf.int_seq(v, name)) for k, v in x)

        znode = TopicZnode(
            topic,
            pairs(jf.req(z, "partitions", p), p + "partitions"),
            pairs(z.get("adding_replicas") or [], p + "adding_replicas"),
            pairs(z.get("removing_replicas") or [], p + "removing_replicas"),
            jf.opt_string(z, "topic_id", p),
            jf.opt_integer(z, "zk_version", 0, p),
        )
    configs = tuple(sorted(read_configs(o))) if o.get("configs") else ()
    return TopicCreationRefused(topic, refused, znode, read_states(o, topic, required=False), configs)


def _failover(o: Mapping[str, Any]) -> Event:
    return ControllerFailover(jf.integer(o, "controller_id", minimum=0), decode_snapshot(jf.req(o, "snapshot")))


def _rebalance(o: Mapping[str, Any]) -> Event:
    limit = o.get("max_leaders")
    return AutoRebalanceTick(
        jf.int_seq(
            o.get("brokers") or [], "brokers", minimum=0, maximum=lim.MAX_BROKER_ID, max_items=lim.MAX_LIST_ITEMS
        ),
        None if limit is None else jf.integer(o, "max_leaders", minimum=0, maximum=2**31 - 1),
        jf.int_seq(
            o.get("bucket_limits") or [], "bucket_limits", minimum=0, maximum=2**31 - 1, max_items=lim.MAX_LIST_ITEMS
        ),
    )


def _tick(o: Mapping[str, Any]) -> Event:
    return Tick(jf.opt_integer(o, "now_ms", 0, minimum=0))


DECODERS: Mapping[str, Callable[[Mapping[str, Any]], Event]] = MappingProxyType(
    {
        ControllerFailover.TYPE: _failover,
        PartitionStatesRead.TYPE: _partition_states_read,
        TopicCreationRefused.TYPE: _topic_creation_refused,
        AutoRebalanceTick.TYPE: _rebalance,
        Tick.TYPE: _tick,
    }
)
