"""The codec's JSON forms are the ones already written to topics and checkpoints: a failover event pinned
byte for byte, and the one broker type shared by the snapshot and the controller's context."""

from __future__ import annotations

import pytest

from core.codec.events import ADMIN_TYPES, EVENT_TYPES, decode_event, event_from_json, event_to_json
from core.controller import ControllerState, initial_state, step
from core.errors import FormatError
from core.events import ControllerFailover, CreateTopic, ElectLeaders
from core.model import Broker, ElectionType, Endpoint, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot

pytestmark = pytest.mark.unit

SNAPSHOT = ZkSnapshot(
    3,
    2,
    (Broker(1, 7, "r1", (Endpoint("PLAINTEXT", "h", 9092),)), Broker(2, 8)),
    (TopicZnode("t", ((0, (1, 2)),), ((0, (2,)),), (), "AAAAAAAAAAAAAAAAAAAAAA", 4),),
    ((TopicPartition("t", 0), PartitionStateZnode(1, 2, (1, 2), 3, 4, 1)),),
    (PartitionTarget("t", 0, (2, 1)),),
    ("x",),
    (TopicPartition("t", 0),),
    (("t", (("a", "b"),)),),
    ("o",),
)

#: written by livectl before the model moved out of core/events.py: a snapshot's broker is
#: {"broker_id", "broker_epoch", ...}
FAILOVER_JSON = (
    '{"controller_id":5,"snapshot":{"brokers":[{"broker_epoch":7,"broker_id":1,"endpoints":[{"host":"h",'
    '"listener":"PLAINTEXT","port":9092,"security_protocol":"PLAINTEXT"}],"rack":"r1"},{"broker_epoch":8,'
    '"broker_id":2,"endpoints":[],"rack":null}],"controller_epoch":3,"controller_epoch_zk_version":2,'
    '"offline_replica_topics":["o"],"partition_states":[[{"partition":0,"topic":"t"},{"controller_epoch":3,'
    '"isr":[1,2],"leader":1,"leader_epoch":2,"leader_recovery_state":1,"zk_version":4}]],'
    '"pending_preferred_elections":[{"partition":0,"topic":"t"}],"pending_reassignments":[{"partition":0,'
    '"replicas":[2,1],"topic":"t"}],"topic_configs":[["t",[["a","b"]]]],"topics":[{"adding_replicas":[[0,[2]]],'
    '"partitions":[[0,[1,2]]],"removing_replicas":[],"topic":"t","topic_id":"AAAAAAAAAAAAAAAAAAAAAA",'
    '"zk_version":4}],"topics_to_delete":["x"]},"type":"controller_failover","version":1}'
)


def test_failover_event_keeps_its_written_form() -> None:
    event = ControllerFailover(5, SNAPSHOT)
    assert event_to_json(event) == FAILOVER_JSON
    assert event_from_json(FAILOVER_JSON) == event


def test_admin_commands_keep_their_written_form() -> None:
    elect = ElectLeaders("r", ElectionType.PREFERRED, (TopicPartition("t", 1),))
    create = CreateTopic("r", "t", 2, 1, ((1,), (2,)), (("k", "v"),))
    assert event_to_json(elect) == (
        '{"election_type":"PREFERRED","partitions":[{"partition":1,"topic":"t"}],"request_id":"r",'
        '"type":"elect_leaders","version":1}'
    )
    assert event_to_json(create) == (
        '{"configs":{"k":"v"},"partitions":2,"replica_assignment":{"0":[1],"1":[2]},"replication_factor":1,'
        '"request_id":"r","topic":"t","type":"create_topic","version":1}'
    )
    assert decode_event({"version": 1, "type": "elect_leaders", "request_id": "r", "election_type": "preferred"}) == (
        ElectLeaders("r", ElectionType.PREFERRED)
    )


def test_every_event_type_has_its_decoder_and_admin_types_are_the_commands() -> None:
    commands = {"create_topic", "delete_topic", "create_partitions", "reassign_partitions"}
    commands |= {"cancel_reassignment", "elect_leaders", "alter_topic_config"}
    assert commands == ADMIN_TYPES
    assert ADMIN_TYPES < EVENT_TYPES and len(EVENT_TYPES) == 29
    for t in EVENT_TYPES:  # known: whatever is refused is a field of the event, never its type
        try:
            decode_event({"version": 1, "type": t})
        except FormatError as e:
            assert e.field != "type", t
    with pytest.raises(FormatError, match="unknown event type 'nope'"):
        decode_event({"version": 1, "type": "nope"})


def test_a_snapshot_broker_is_the_context_broker() -> None:
    """Failover takes the snapshot's brokers as the live brokers, unchanged, and the checkpointed state
    keeps them."""
    state, _ = step(initial_state(), [ControllerFailover(5, SNAPSHOT)])
    assert state.context.live_brokers == {1: SNAPSHOT.brokers[0], 2: SNAPSHOT.brokers[1]}
    assert ControllerState.from_bytes(state.to_bytes()).context.live_brokers == state.context.live_brokers
