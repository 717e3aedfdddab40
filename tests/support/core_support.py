"""Test helpers: a fake ZooKeeper that applies ZkWrites, a cluster driver and invariant checks."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field

from core.context import ControllerContext
from core.controller import ControllerConfig, ControllerState, initial_state, step
from core.decisions import BrokerRequest, Decision, ZkOp, ZkWrite
from core.events import (
    AlterPartition,
    BrokerFailure,
    BrokerStartup,
    ControlledShutdown,
    ControllerFailover,
    CreateTopic,
    DeleteTopic,
    Event,
    PartitionError,
    StopReplicaResponse,
)
from core.kafka.requests import RequestApi, RequestBody, WireBody
from core.kafka.zksnapshot import snapshot_from_znodes
from core.model import Broker, Endpoint, LeaderAndIsr, TopicPartition
from sinks.memory import MemoryZooKeeper, ZkRefusedError


class ZkConflictError(AssertionError):
    pass


class _TextNodes(MutableMapping[str, tuple[str | None, int]]):
    """A :class:`MemoryZooKeeper`'s znodes as text (``None`` = no data), the form the core reads them in
    (:func:`core.kafka.zkdata.snapshot_from_znodes`); writing here places a znode as it is, like a test's set-up."""

    def __init__(self, tree: MemoryZooKeeper) -> None:
        self._tree = tree

    def __getitem__(self, path: str) -> tuple[str | None, int]:
        data, version = self._tree.nodes[path]
        return (data.decode() if data else None), version

    def __setitem__(self, path: str, value: tuple[str | None, int]) -> None:
        data, version = value
        self._tree.nodes[path] = ((data or "").encode(), version)

    def __delitem__(self, path: str) -> None:
        del self._tree.nodes[path]

    def __iter__(self) -> Iterator[str]:
        return iter([p for p in self._tree.nodes if p != "/"])

    def __len__(self) -> int:
        return len(self._tree.nodes) - 1


@dataclass
class FakeZk:
    """The controller's writes applied to the tests' one in-memory ZooKeeper (:class:`MemoryZooKeeper`,
    ZooKeeper's rules: versions, parents, ``NotEmpty``), unfenced. A refusal fails the test, except a delete
    of a znode that is already gone: the sinks report that one (``NoNode``) and go on, so it is kept in
    ``refused`` (the core deletes clean-up znodes it cannot know exist, e.g. a gone topic's config)."""

    tree: MemoryZooKeeper = field(default_factory=MemoryZooKeeper)
    history: list[ZkWrite] = field(default_factory=list)
    refused: list[tuple[ZkWrite, str]] = field(default_factory=list)

    @property
    def nodes(self) -> MutableMapping[str, tuple[str | None, int]]:
        return _TextNodes(self.tree)

    def apply(self, writes: Iterable[Decision]) -> None:
        for w in writes:
            if not isinstance(w, ZkWrite):
                continue
            self.history.append(w)
            try:
                self.tree.apply(w)
            except ZkRefusedError as e:
                if w.op is ZkOp.DELETE and e.code == "NoNode" and e.path == w.path:
                    self.refused.append((w, e.code))
                    continue
                raise ZkConflictError(f"{e.code} {w.op.value} {w.path}") from None

    def get(self, path: str) -> str | None:
        n = self.nodes.get(path)
        return n[0] if n else None


def endpoint(b: int) -> tuple[Endpoint, ...]:
    return (Endpoint("PLAINTEXT", f"broker{b}", 9092 + b),)


def startup(b: int, epoch: int = 100, rack: str | None = None) -> BrokerStartup:
    return BrokerStartup(b, epoch + b, rack, endpoint(b))


def typed_body(request: BrokerRequest) -> RequestBody:
    """The body of a request the controller built (a typed body, never a :class:`WireBody` passed through)."""
    assert not isinstance(request.body, WireBody), request
    return request.body


@dataclass
class Cluster:
    """Drives one controller state with a fake ZooKeeper and simple simulated brokers."""

    state: ControllerState
    zk: FakeZk = field(default_factory=FakeZk)
    decisions: list[Decision] = field(default_factory=list)
    controller_epoch: int = 1

    @staticmethod
    def start(
        brokers: Sequence[int], config: ControllerConfig | None = None, racks: dict[int, str] | None = None
    ) -> Cluster:
        c = Cluster(initial_state(config))
        snap = snapshot_from_znodes({}, [Broker(b, 100 + b, (racks or {}).get(b), endpoint(b)) for b in brokers], 1, 0)
        c.run(ControllerFailover(0, snap))
        return c

    def run(self, *events: Event) -> list[Decision]:
        self.state, ds = step(self.state, events)
        self.zk.apply(ds)
        self.decisions = ds
        return ds

    def create_topic(self, topic: str, assignment: tuple[tuple[int, ...], ...], **configs: str) -> list[Decision]:
        """Creates ``topic`` with ``assignment`` (one replica list per partition) and topic ``configs``, whose
        keyword names stand for the dotted Kafka names (``retention_ms`` is ``retention.ms``)."""
        return self.run(
            CreateTopic(
                f"create-{topic}",
                topic,
                replica_assignment=assignment,
                configs=tuple((k.replace("_", "."), v) for k, v in configs.items()),
            )
        )

    @property
    def ctx(self) -> ControllerContext:
        return self.state.context

    def leader_and_isr(self, tp: TopicPartition) -> LeaderAndIsr:
        """``tp``'s leader and ISR in the controller's context (which must hold one)."""
        lai = self.ctx.leader_and_isr(tp)
        assert lai is not None, f"{tp.topic}-{tp.partition} has no leader and ISR in the controller's context"
        return lai

    def requests(self, api: RequestApi | None = None, broker: int | None = None) -> list[BrokerRequest]:
        """The step's broker requests (of ``api``); with ``broker``, those it gets: a shared request naming it
        among its addressees as its own copy (:meth:`BrokerRequest.fan_out`: its broker epoch in the body)."""
        out = []
        for d in self.decisions:
            if not isinstance(d, BrokerRequest) or (api is not None and d.api is not api):
                continue
            if broker is None:
                out.append(d)
            else:
                out.extend(r for r in d.fan_out() if r.broker_id == broker)
        return out

    def failover(self, controller_id: int = 0) -> list[Decision]:
        """A new controller: epoch + 1, context rebuilt from the fake ZooKeeper."""
        self.controller_epoch += 1
        brokers = [
            Broker(b.id, b.epoch, b.rack, b.endpoints)
            for b in sorted(self.ctx.live_brokers.values(), key=lambda b: b.id)
        ]
        snap = snapshot_from_znodes(self.zk.nodes, brokers, self.controller_epoch, self.controller_epoch - 1)
        fresh = ControllerState(config=self.state.config)
        self.state = fresh
        return self.run(ControllerFailover(controller_id, snap))

    def catch_up(self, tp: TopicPartition) -> list[Decision]:
        """The leader adds every live replica of RS to the ISR (one AlterPartition)."""
        li = self.ctx.leadership(tp)
        assert li is not None
        lai = li.leader_and_isr
        live = self.ctx.live_broker_ids
        leader = lai.leader
        new_isr = lai.isr + tuple(r for r in self.ctx.replicas(tp) if r in live and r not in lai.isr)
        ev = AlterPartition(
            leader,
            self.ctx.live_brokers[leader].epoch,
            tp.topic,
            tp.partition,
            lai.leader_epoch,
            lai.partition_epoch,
            new_isr,
        )
        return self.run(ev)

    def ack_stop_replicas(self) -> list[Decision]:
        """Every broker answers the StopReplica (delete) requests of the last step with success."""
        events: list[Event] = []
        for r in self.requests(RequestApi.STOP_REPLICA):
            body = r.body_json()
            parts = tuple(
                PartitionError(ts["topicName"], ps["partitionIndex"], 0)
                for ts in body["topicStates"]
                for ps in ts["partitionStates"]
                if ps["deletePartition"]
            )
            if parts:
                events.append(StopReplicaResponse(r.broker_id, parts))
        return self.run(*events)


def every_api_requests() -> list[BrokerRequest]:
    """Requests of every API the core sends: creation, AlterPartition, failure, shutdown, deletion."""
    c = Cluster.start([1, 2, 3])
    out: list[BrokerRequest] = []
    c.run(CreateTopic("r1", "t", 2, 3))
    out += c.requests()
    lai = c.leader_and_isr(TopicPartition("t", 0))
    leader = lai.leader
    shrink = tuple(r for r in lai.isr if r != 3) if leader != 3 else lai.isr[:2]
    epoch = c.ctx.live_brokers[leader].epoch
    c.run(AlterPartition(leader, epoch, "t", 0, lai.leader_epoch, lai.partition_epoch, shrink, 0, 7))
    out += c.requests()
    c.run(AlterPartition(leader, epoch, "t", 0, lai.leader_epoch + 5, lai.partition_epoch, shrink, 0, 8))
    out += c.requests()
    c.run(BrokerFailure(3, c.ctx.live_brokers[3].epoch))
    out += c.requests()
    c.run(ControlledShutdown(2, c.ctx.live_brokers[2].epoch))
    out += c.requests()
    c.run(DeleteTopic("r2", "t"))
    out += c.requests()
    return out
