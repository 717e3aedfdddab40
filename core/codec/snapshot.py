"""The failover snapshot's JSON form (:class:`core.snapshot.ZkSnapshot` inside a controller-failover
event) and the partition-state znodes that the driver's re-reads carry.

A snapshot's broker is encoded with the field names the form has always had (``broker_id``,
``broker_epoch``), so that events already written still decode.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from core import jsonform as jf
from core import limits as lim
from core.codec.values import read_endpoints, read_tp_list
from core.errors import FormatError
from core.model import Broker, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot


def encode_broker(b: Broker) -> dict[str, Any]:
    """A snapshot's broker as JSON: ``{"broker_id", "broker_epoch", "rack", "endpoints"}``."""
    return {
        "broker_id": b.id,
        "broker_epoch": b.epoch,
        "rack": b.rack,
        "endpoints": [
            {"listener": e.listener, "host": e.host, "port": e.port, "security_protocol": e.security_protocol}
            for e in b.endpoints
        ],
    }


def read_partition_state_znode(st: Any, p: str, what: str = "") -> PartitionStateZnode:
    st = jf.obj(st, p.rstrip("."))
    return PartitionStateZnode(
        jf.integer(st, "leader", p, minimum=-1, maximum=lim.MAX_BROKER_ID),
        jf.integer(st, "leader_epoch", p, minimum=0, maximum=lim.INT32_MAX),
        jf.int_list(
            st,
            "isr",
            p,
            minimum=0,
            maximum=lim.MAX_BROKER_ID,
            distinct=True,
            what=what,
            max_items=lim.MAX_REPLICATION_FACTOR,
        ),
        jf.integer(st, "controller_epoch", p, minimum=0, maximum=lim.INT32_MAX),
        jf.integer(st, "zk_version", p, minimum=0, maximum=lim.INT32_MAX),
        jf.opt_integer(st, "leader_recovery_state", 0, p, minimum=0, maximum=1),
    )


def read_states(o: Mapping[str, Any], topic: str, required: bool = True) -> tuple[tuple[int, PartitionStateZnode], ...]:
    raw = jf.req(o, "states") if required else (o.get("states") or [])
    if not isinstance(raw, list):
        raise FormatError("states", f"must be a list, got {type(raw).__name__}")
    states = []
    for i, entry in enumerate(raw):
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not isinstance(entry[0], int)
            or isinstance(entry[0], bool)
            or not 0 <= entry[0] <= lim.INT32_MAX
        ):
            raise FormatError(f"states[{i}]", "must be [partition, partition-state znode]")
        states.append(
            (entry[0], read_partition_state_znode(entry[1], f"states[{i}][1].", f"partition {topic}-{entry[0]}"))
        )
    return tuple(states)


def _plain_state_entry(tp_raw: Any, st: Any) -> tuple[TopicPartition, PartitionStateZnode] | None:
    """A ``partition_states`` entry as :func:`decode_snapshot`'s checks read it, when every field is plainly
    fit — a non-empty ASCII topic, integers (not booleans) within 64 bits, a list of them for the ISR —
    else ``None``, and the checks name the fault. One pass without the per-field helpers: a snapshot
    holds an entry per partition."""
    if type(tp_raw) is not dict or type(st) is not dict:
        return None
    topic: Any = tp_raw.get("topic")
    partition: Any = tp_raw.get("partition")
    isr: Any = st.get("isr")
    if type(topic) is not str or not topic or not topic.isascii() or type(isr) is not list:
        return None
    leader: Any = st.get("leader")
    leader_epoch: Any = st.get("leader_epoch")
    controller_epoch: Any = st.get("controller_epoch")
    zk_version: Any = st.get("zk_version")
    recovery: Any = st.get("leader_recovery_state")
    if recovery is None:
        recovery = 0
    for x in (partition, leader, leader_epoch, controller_epoch, zk_version, recovery, *isr):
        if type(x) is not int or not lim.INT64_MIN <= x <= lim.INT64_MAX:
            return None
    return TopicPartition(topic, partition), PartitionStateZnode(
        leader, leader_epoch, tuple(isr), controller_epoch, zk_version, recovery
    )


def decode_snapshot(raw: Any) -> ZkSnapshot:
    o = jf.obj(raw, "snapshot")
    p = "snapshot."
    brokers = tuple(
        Broker(
            jf.integer(b, "broker_id", p),
            jf.integer(b, "broker_epoch", p),
            jf.opt_string(b, "rack"),
            read_endpoints(b, p),
        )
        for b in jf.obj_list(o, "brokers", p)
    )

    def pairs(x: Any, name: str) -> tuple[tuple[int, tuple[int, ...]], ...]:
        return tuple((int(k), jf.int_seq(v, name)) for k, v in x)

    topics = tuple(
        TopicZnode(
            jf.string(t, "topic", p),
            pairs(jf.req(t, "partitions", p), p + "partitions"),
            pairs(t.get("adding_replicas") or (), p + "adding_replicas"),
            pairs(t.get("removing_replicas") or (), p + "removing_replicas"),
            jf.opt_string(t, "topic_id"),
            jf.opt_integer(t, "zk_version", 0),
        )
        for t in jf.obj_list(o, "topics", p)
    )
    states = []
    for entry in jf.req(o, "partition_states", p):
        tp_raw, st = entry
        plain = _plain_state_entry(tp_raw, st)
        if plain is not None:
            states.append(plain)
            continue
        tp = TopicPartition(jf.string(tp_raw, "topic", p), jf.integer(tp_raw, "partition", p))
        states.append(
            (
                tp,
                PartitionStateZnode(
                    jf.integer(st, "leader", p),
                    jf.integer(st, "leader_epoch", p),
                    jf.int_list(st, "isr", p),
                    jf.integer(st, "controller_epoch", p),
                    jf.integer(st, "zk_version", p),
                    jf.opt_integer(st, "leader_recovery_state", 0, p),
                ),
            )
        )
    pending = tuple(
        PartitionTarget(jf.string(e, "topic", p), jf.integer(e, "partition", p), jf.int_list(e, "replicas", p))
        for e in (o.get("pending_reassignments") or ())
    )
    return ZkSnapshot(
        jf.integer(o, "controller_epoch", p),
        jf.integer(o, "controller_epoch_zk_version", p),
        brokers,
        topics,
        tuple(states),
        pending,
        tuple(o.get("topics_to_delete") or ()),
        read_tp_list(o, "pending_preferred_elections", required=False),
        tuple((str(t), tuple((str(k), str(v)) for k, v in cfg)) for t, cfg in (o.get("topic_configs") or ())),
        tuple(
            jf.text(t, f"{p}offline_replica_topics", max_length=lim.MAX_NAME_LENGTH)
            for t in (o.get("offline_replica_topics") or ())
        ),
        jf.int_seq(
            o.get("cordoned_brokers") or [],
            f"{p}cordoned_brokers",
            minimum=0,
            maximum=lim.MAX_BROKER_ID,
            max_items=lim.MAX_LIST_ITEMS,
        ),
    )


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _pairs_json(pairs: tuple[tuple[int, tuple[int, ...]], ...]) -> str:
    return "[" + ",".join(f"[{p},[{','.join(map(str, rs))}]]" for p, rs in pairs) + "]"


def _topic_json(t: TopicZnode) -> str:
    return (
        f'{{"adding_replicas":{_pairs_json(t.adding_replicas)},"partitions":{_pairs_json(t.partitions)},'
        f'"removing_replicas":{_pairs_json(t.removing_replicas)},"topic":{json.dumps(t.topic)},'
        f'"topic_id":{json.dumps(t.topic_id)},"zk_version":{t.zk_version}}}'
    )


#: parts of snapshots encoded (:func:`encode_failover_json`'s ``state_texts``): by the identity of a
#: partition-state entry or a topic znode, that object (kept alive, so its identity is not reused) and its text
StateTexts = dict[int, tuple[object, str]]


def _state_json(tp: TopicPartition, st: PartitionStateZnode, name: Callable[[str], str] = json.dumps) -> str:
    return (
        f'[{{"partition":{tp.partition},"topic":{name(tp.topic)}}},'
        f'{{"controller_epoch":{st.controller_epoch},"isr":[{",".join(map(str, st.isr))}],'
        f'"leader":{st.leader},"leader_epoch":{st.leader_epoch},'
        f'"leader_recovery_state":{st.leader_recovery_state},"zk_version":{st.zk_version}}}]'
    )


def _quoting() -> Callable[[str], str]:
    names: dict[str, str] = {}

    def name(topic: str) -> str:
        quoted = names.get(topic)
        if quoted is None:
            quoted = names[topic] = json.dumps(topic)
        return quoted

    return name


def remember_state_texts(snapshot: ZkSnapshot, texts: StateTexts) -> None:
    """Make ``texts`` hold the encoded text of each of ``snapshot``'s partition-state entries and topic znodes
    and no other, taking one's text from ``texts`` when the same object is there (a standby's reads ahead keep
    the objects of topics that did not change: :class:`core.kafka.zksnapshot.TopicBlock`)."""
    name = _quoting()
    kept: StateTexts = {}
    for entry, text in _known(snapshot.partition_states, texts, lambda e: _state_json(e[0], e[1], name)):
        kept[id(entry)] = (entry, text)
    for topic, text in _known(snapshot.topics, texts, _topic_json):
        kept[id(topic)] = (topic, text)
    texts.clear()
    texts.update(kept)


def _known(objects: tuple[Any, ...], texts: StateTexts, encode: Callable[[Any], str]) -> Iterator[tuple[Any, str]]:
    """Each of ``objects`` with its text: from ``texts`` when it is that very object there, else ``encode``'s."""
    get = texts.get
    for o in objects:
        hit = get(id(o))
        yield o, (hit[1] if hit is not None and hit[0] is o else encode(o))


def _texts_of(objects: tuple[Any, ...], texts: StateTexts, encode: Callable[[Any], str]) -> str:
    """``objects`` encoded and joined by commas, each one's text from ``texts`` when it is that very object."""
    return ",".join(text for _o, text in _known(objects, texts, encode))


def encode_failover_json(controller_id: int, snapshot: ZkSnapshot, state_texts: StateTexts | None = None) -> str:
    """The JSON text of ``ControllerFailover(controller_id, snapshot)`` exactly as
    :func:`core.codec.events.event_to_json` writes it (keys sorted, no spaces), built directly: the generic
    encoder walks every dataclass field of every partition state by reflection, which for a 100k-partition
    snapshot costs seconds on the new controller's critical path. ``tests/unit/core`` checks both agree.
    ``state_texts`` (:func:`remember_state_texts`) gives partition-state entries and topic znodes already
    encoded, by identity."""
    name = _quoting()
    if state_texts:
        states = _texts_of(snapshot.partition_states, state_texts, lambda e: _state_json(e[0], e[1], name))
        topics = _texts_of(snapshot.topics, state_texts, _topic_json)
    else:
        states = ",".join(_state_json(tp, st, name) for tp, st in snapshot.partition_states)
        topics = ",".join(_topic_json(t) for t in snapshot.topics)
    s = snapshot
    brokers = _compact([encode_broker(b) for b in s.brokers])
    preferred = _compact([{"partition": tp.partition, "topic": tp.topic} for tp in s.pending_preferred_elections])
    pending = _compact(
        [{"partition": p.partition, "replicas": list(p.replicas), "topic": p.topic} for p in s.pending_reassignments]
    )
    configs = _compact([[t, [list(kv) for kv in cfg]] for t, cfg in s.topic_configs])
    # left out while empty: the form written before the field was added (core.codec.events)
    cordoned = f'"cordoned_brokers":{_compact(list(s.cordoned_brokers))},' if s.cordoned_brokers else ""
    return (
        f'{{"controller_id":{controller_id},"snapshot":{{"brokers":{brokers},'
        f'"controller_epoch":{s.controller_epoch},"controller_epoch_zk_version":{s.controller_epoch_zk_version},'
        f"{cordoned}"
        f'"offline_replica_topics":{_compact(list(s.offline_replica_topics))},"partition_states":[{states}],'
        f'"pending_preferred_elections":{preferred},"pending_reassignments":{pending},"topic_configs":{configs},'
        f'"topics":[{topics}],"topics_to_delete":{_compact(list(s.topics_to_delete))}}},'
        '"type":"controller_failover","version":1}'
    )
