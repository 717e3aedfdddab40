"""When a simulated broker sends an ISR proposal again (issue 41, item 6): as Kafka's
``DefaultAlterPartitionManager`` does, never on a timer — a proposal waits for its answer however long the
controller's backlog is — but after a top-level error (with a backoff), to a new controller (a higher
controller epoch in a controller request) and after its record could not be written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from simbrokers_support import MiniController, cluster, envelope, lisr_body, part

from core.events import AlterPartition, Event
from core.kafka.error_codes import KafkaError
from core.kafka.requests import RequestApi
from simbrokers.broker import SimBroker

pytestmark = pytest.mark.unit

#: BrokerConfig's default
BACKOFF_MS = 500


def proposals(events: list[Event]) -> list[AlterPartition]:
    return [e for e in events if isinstance(e, AlterPartition)]


def shrinking_leader() -> tuple[SimBroker, MiniController, AlterPartition]:
    """Broker 1 leads ``orders-0`` (controller epoch 1); its followers never fetch, so at 500 ms it proposes
    the ISR (1,)."""
    brokers, _ = cluster(replica_lag_time_max_ms=100)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    [ev] = proposals(brokers[1].tick(500))
    assert ev.new_isr == (1,)
    return brokers[1], ctl, ev


def update_metadata(controller_epoch: int) -> dict[str, Any]:
    return {
        "controllerId": 0,
        "controllerEpoch": controller_epoch,
        "brokerEpoch": -1,
        "topicStates": [],
        "liveBrokers": [],
    }


def stop_other_partition(controller_epoch: int) -> dict[str, Any]:
    """A StopReplica for a partition broker 1 does not host."""
    return {
        "controllerId": 0,
        "controllerEpoch": controller_epoch,
        "brokerEpoch": -1,
        "topicStates": [
            {
                "topicName": "other",
                "partitionStates": [{"partitionIndex": 0, "leaderEpoch": -2, "deletePartition": False}],
            }
        ],
    }


def test_an_unanswered_proposal_is_never_sent_again_on_a_timer() -> None:
    """The long run's backlog fed itself: each proposal was written again every 5 s until answered."""
    broker, ctl, ev = shrinking_leader()
    for t in (600, 5_500, 10_500, 60_000, 3_600_000):
        assert broker.tick(t) == [], t
    assert part(broker).pending is not None and part(broker).pending.sent == 1
    ctl.alter_partition(ev)  # answered an hour later: committed
    assert part(broker).pending is None and part(broker).isr == (1,)


@pytest.mark.parametrize(
    "api",
    [RequestApi.UPDATE_METADATA, RequestApi.STOP_REPLICA, RequestApi.LEADER_AND_ISR],
)
def other_leader_and_isr(controller_epoch: int) -> dict[str, Any]:
    """A LeaderAndIsr for a partition of another topic."""
    lisr = lisr_body(leader=1, leader_epoch=0, isr=[1], replicas=[1], c_epoch=controller_epoch)
    lisr["topicStates"][0]["topicName"] = "other"
    return lisr


BODIES: dict[RequestApi, Callable[[int], dict[str, Any]]] = {
    RequestApi.UPDATE_METADATA: update_metadata,
    RequestApi.STOP_REPLICA: stop_other_partition,
    RequestApi.LEADER_AND_ISR: other_leader_and_isr,
}


@pytest.mark.parametrize("api", list(BODIES))
def test_a_new_controller_gets_the_unanswered_proposal_again(api: RequestApi) -> None:
    broker, _, ev = shrinking_leader()
    body = BODIES[api]
    # the same controller's request: the proposal still waits
    broker.handle(envelope(1, api, body(1), epoch=1, batch=10), 700)
    assert broker.tick(1_000) == []
    # a new controller's: sent again at the next tick, the same proposal (its correlation id)
    broker.handle(envelope(1, api, body(2), epoch=2, batch=1), 1_100)
    [again] = proposals(broker.tick(1_200))
    assert again == ev
    assert part(broker).pending is not None and part(broker).pending.sent_controller_epoch == 2
    # sent to that controller, it waits again: its further requests do not resend it
    broker.handle(envelope(1, api, body(2), epoch=2, batch=2), 1_300)
    assert broker.tick(60_000) == []


def test_a_proposal_sent_to_the_new_controller_is_not_sent_again_for_it() -> None:
    """Proposed after the new controller's first request: that controller has it already."""
    brokers, _ = cluster(replica_lag_time_max_ms=100)
    ctl = MiniController(brokers, [1, 2, 3])
    ctl.elect(1, [1, 2, 3])
    broker = brokers[1]
    broker.handle(envelope(1, RequestApi.UPDATE_METADATA, update_metadata(2), epoch=2, batch=1), 100)
    [ev] = proposals(broker.tick(500))
    assert part(broker).pending is not None and part(broker).pending.sent_controller_epoch == 2
    broker.handle(envelope(1, RequestApi.UPDATE_METADATA, update_metadata(2), epoch=2, batch=2), 600)
    assert broker.tick(700) == []
    broker.handle(envelope(1, RequestApi.UPDATE_METADATA, update_metadata(3), epoch=3, batch=1), 800)
    assert proposals(broker.tick(900)) == [ev]


def test_a_stale_controllers_request_does_not_resend() -> None:
    broker, _, _ = shrinking_leader()
    broker.handle(envelope(1, RequestApi.UPDATE_METADATA, update_metadata(3), epoch=3, batch=1), 600)
    assert len(proposals(broker.tick(700))) == 1
    broker.handle(envelope(1, RequestApi.UPDATE_METADATA, update_metadata(2), epoch=2, batch=9), 800)
    assert broker.tick(900) == []


def test_a_leader_and_isr_for_the_partition_replaces_the_proposal() -> None:
    """A new controller's LeaderAndIsr naming the partition: its state wins, nothing old is sent again."""
    broker, _, ev = shrinking_leader()
    body = lisr_body(leader=1, leader_epoch=5, isr=[1, 2, 3], replicas=[1, 2, 3], partition_epoch=9, c_epoch=2)
    broker.handle(envelope(1, RequestApi.LEADER_AND_ISR, body, epoch=2, batch=1), 600)
    assert part(broker).pending is None
    assert broker.tick(650) == []
    [new] = proposals(broker.tick(800))  # the followers still lag: a new proposal at the new epochs
    assert new.correlation_id != ev.correlation_id and (new.leader_epoch, new.partition_epoch) == (5, 9)


def test_a_proposal_whose_record_was_not_written_is_sent_again_after_the_backoff() -> None:
    broker, _, ev = shrinking_leader()
    assert broker.alter_partition_not_sent(ev.correlation_id + 1, 600) is False  # no such proposal
    assert broker.alter_partition_not_sent(ev.correlation_id, 600) is True
    assert broker.tick(600 + BACKOFF_MS - 1) == []
    assert proposals(broker.tick(600 + BACKOFF_MS)) == [ev]
    assert broker.tick(60_000) == []


def test_a_failed_write_of_an_answered_proposal_sends_nothing() -> None:
    """The answer came first (the failure report of an earlier copy, say): nothing is waiting."""
    broker, ctl, ev = shrinking_leader()
    ctl.alter_partition(ev)
    assert broker.alter_partition_not_sent(ev.correlation_id, 600) is False
    assert broker.tick(600 + BACKOFF_MS) == []


def test_a_top_level_error_sends_the_proposal_again_after_the_backoff() -> None:
    broker, _, ev = shrinking_leader()
    body = {"errorCode": KafkaError.STALE_BROKER_EPOCH, "topics": [], "correlationId": ev.correlation_id}
    broker.handle(envelope(1, RequestApi.ALTER_PARTITION_RESPONSE, body, batch=50), 1_000)
    assert broker.tick(1_000 + BACKOFF_MS - 1) == []
    assert proposals(broker.tick(1_000 + BACKOFF_MS)) == [ev]
    assert broker.tick(60_000) == []


def test_a_ticks_proposals_go_out_as_requests_of_many_partitions() -> None:
    """Kafka's broker sends every pending partition in one AlterPartition request: a broker's return at 100k
    partitions was ~100,000 records on broker-events, one per partition, and as many micro-batches' worth."""
    from core.events import AlterPartitionRequest, ControlledShutdown
    from simbrokers.alter_requests import as_requests

    def ap(broker: int, epoch: int, p: int) -> AlterPartition:
        return AlterPartition(broker, epoch, "t", p, 0, 0, (broker,), correlation_id=p)

    first = [ap(1, 5, p) for p in range(5)]
    shutdown = ControlledShutdown(1, 5)
    later = [ap(1, 5, p) for p in range(5, 7)]
    other = [ap(1, 6, 7)]  # a new incarnation's: a request of its own
    out = as_requests([*first, shutdown, *later, *other], per_record=2)
    assert [type(e).__name__ for e in out] == ["AlterPartitionRequest"] * 3 + ["ControlledShutdown"] + [
        "AlterPartitionRequest"
    ] * 2
    requests = [e for e in out if isinstance(e, AlterPartitionRequest)]
    assert [r.proposals() for r in requests] == [
        tuple(first[0:2]),
        tuple(first[2:4]),
        tuple(first[4:5]),
        tuple(later),
        tuple(other),
    ]
    assert as_requests([]) == [] and as_requests([shutdown]) == [shutdown]
    assert as_requests([*first, shutdown], per_record=0) == [*first, shutdown]  # the form before requests
    # 60,000 proposals of one leader: 60 records
    assert len(as_requests([ap(2, 9, p) for p in range(60_000)])) == 60


def test_one_request_holds_one_sender_at_one_epoch() -> None:
    from core.events import AlterPartitionRequest

    a = AlterPartition(1, 5, "t", 0, 0, 0, (1,))
    with pytest.raises(ValueError, match="one sender"):
        AlterPartitionRequest.of((a, AlterPartition(2, 5, "t", 1, 0, 0, (2,))))
    with pytest.raises(ValueError, match="one sender"):
        AlterPartitionRequest.of((a, AlterPartition(1, 6, "t", 1, 0, 0, (1,))))
    with pytest.raises(ValueError, match="one sender"):
        AlterPartitionRequest.of(())
