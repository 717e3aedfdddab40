"""A seeded fuzz of the controller's input: thousands of admin and broker-event records, valid and not,
through the query's own functions (prepare → per-bucket step → dispatch, on the in-memory sinks), with
every outcome checked (issue 17, item 4):

* nothing raises, whatever the record;
* every record is rejected on ``livectl.rejected`` with reasons that name the field (or say the record
  is not a JSON object), or was routed to its buckets (applied);
* every admin command with a usable ``request_id`` is answered, and after the cluster is driven to
  completion (all brokers up, replicas caught up, deletions acknowledged) its last answer is final
  (``ok`` or ``error``), never left ``in_progress``;
* every topic's partitions keep the replication factor its creation asked for; every znode fits
  ZooKeeper's limit and every message the producer's;
* replaying a micro-batch gives the same rows.

Spark runs exactly these functions; the real query meets a handful of the pills in
``tests/spark/streaming/test_streaming_poison_pills.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shell_pipeline import FakeGroupState, by_bucket

from core import events as ev
from core import limits as lim
from core.codec.decisions import read_details
from core.codec.events import event_to_json
from core.model import Broker
from core.snapshot import ZkSnapshot
from core.states import ReplicaState
from sinks.memory import MemoryRequestSink, MemoryZkSink, MemoryZooKeeper
from sinks.ports import Fence
from streaming.query import failover, routing, stateful
from streaming.query.dispatch import Dispatcher
from streaming.query.validation import InputValidator, Rejection, flatten
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore

pytestmark = pytest.mark.unit

SEED = 17
RECORDS = 3000
BATCH = 150
BUCKETS = 4
BROKERS = (1, 2, 3, 4, 5, 6)
ADMIN = "livectl.admin"
EVENTS = "livectl.broker-events"
TOPICS = [f"t{i}" for i in range(12)]
#: each topic name's replication factor: valid creations and reassignments keep it, so a topic whose
#: partitions end with another one was given it by the controller (create_partitions during a
#: reassignment took target + origin as the replication factor, issue 17)
RF = {t: 1 + i % 3 for i, t in enumerate(TOPICS)}


class Query:
    """The query's functions over the in-memory sinks, batch by batch; remembers where each record went."""

    def __init__(self, tmp: Path, validator: InputValidator) -> None:
        self.tmp = tmp
        #: the checkpoint the failover snapshots go to and the bucket step reads them from
        self.store = MemoryCheckpointStore(f"memory:{tmp}")
        self.validator = validator
        self.zk = MemoryZooKeeper()
        self.zk.create("/controller_epoch", b"1")
        self.fence = Fence(1, 0)
        self.sink = MemoryRequestSink(self.fence)
        self.dispatcher = Dispatcher(MemoryZkSink(self.zk, self.fence, "fuzz"), self.sink)
        self.states = {b: FakeGroupState() for b in range(-1, BUCKETS)}
        self.offsets = {ADMIN: 0, EVENTS: 0}
        self.batch = 0
        self.clock = 0
        #: (topic, offset) -> the record sent
        self.sent: dict[tuple[str, int], str] = {}
        #: (topic, offset) of records routed to a bucket as events
        self.routed: set[tuple[str, int]] = set()

    def run(self, items: list[tuple[str, str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
        rows = []
        for topic, value in items:
            self.clock += 1
            self.sent[(topic, self.offsets[topic])] = value
            rows.append((topic, 0, self.offsets[topic], pd.Timestamp(1_700_000_000_000 + self.clock, unit="ms"), value))
            self.offsets[topic] += 1
        records = pd.DataFrame(rows, columns=["topic", "partition", "offset", "timestamp", "value"])
        routed = pd.concat(
            [
                routing.prepare_frame(records, BUCKETS, ADMIN, self.validator),
                routing.tick_rows(self.clock, BUCKETS),
            ],
            ignore_index=True,
        )
        for src, offset, kind in zip(routed["src"], routed["offset"], routed["kind"], strict=True):
            if kind in (routing.KIND_EVENT, routing.KIND_FAILOVER_REF):
                self.routed.add((str(src).rsplit("/", 1)[0], int(offset)))
        out = self.step(routed)
        self.dispatcher.dispatch(out, self.batch)
        self.batch += 1
        return routed, out

    def step(self, routed: pd.DataFrame) -> pd.DataFrame:
        outputs: list[pd.DataFrame] = []
        for bucket, frame in by_bucket(routed):
            outputs.extend(
                stateful.step_bucket(
                    (bucket,),
                    iter([frame]),
                    self.states[int(bucket)],
                    self.store.root,
                    failover.StoreSnapshots(self.store),
                )
            )
        return pd.concat(outputs, ignore_index=True)

    def contexts(self) -> list[Any]:
        out = []
        for b in range(BUCKETS):
            v = self.states[b].value
            if v is not None:
                out.append(stateful.load_state(int(v[0]), int(v[1]), bytes(v[2])).context)
        return out

    def on(self, topic: str) -> list[dict[str, Any]]:
        return [m.value_json() for m in self.sink.messages if m.topic == topic]


# --------------------------------------------------------------------------- the generator


class Fuzzer:
    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.n = 0
        self.epochs = {b: 100 + b for b in BROKERS}

    def rid(self) -> str:
        self.n += 1
        return f"f{self.n}"

    def replicas(self, k: int | None = None) -> list[int]:
        return self.rnd.sample(BROKERS, k or self.rnd.randint(1, 3))

    def valid_admin(self) -> dict[str, Any]:
        r, t = self.rnd, self.rnd.choice(TOPICS)
        kind = r.choice(
            ["create", "create", "create_manual", "delete", "grow", "reassign", "cancel", "elect", "config"]
        )
        if kind == "create":
            return {
                "type": "create_topic",
                "topic": t,
                "partitions": r.randint(1, 6),
                "replication_factor": RF[t],
            }
        if kind == "create_manual":
            rf = RF[t]
            parts = r.randint(1, 4)
            return {
                "type": "create_topic",
                "topic": t,
                "replica_assignment": {str(p): self.replicas(rf) for p in range(parts)},
            }
        if kind == "delete":
            return {"type": "delete_topic", "topic": t}
        if kind == "grow":
            return {"type": "create_partitions", "topic": t, "total_count": r.randint(1, 10)}
        if kind == "reassign":
            return {
                "type": "reassign_partitions",
                "partitions": [
                    {"topic": t, "partition": p, "replicas": self.replicas(RF[t])}
                    for p in sorted(r.sample(range(6), 2))
                ],
            }
        if kind == "cancel":
            return {"type": "cancel_reassignment", "partitions": [{"topic": t, "partition": r.randint(0, 5)}]}
        if kind == "elect":
            chosen = [] if r.random() < 0.3 else [{"topic": t, "partition": r.randint(0, 5)}]
            return {"type": "elect_leaders", "election_type": r.choice(["PREFERRED", "UNCLEAN"]), "partitions": chosen}
        return {
            "type": "alter_topic_config",
            "topic": t,
            "configs": {"unclean.leader.election.enable": r.choice(["true", "false", "maybe"])},
        }

    def valid_broker_event(self) -> dict[str, Any]:
        r = self.rnd
        b = r.choice(BROKERS)
        kind = r.choice(["startup", "failure", "alter", "alter", "shutdown", "lisr", "stop"])
        if kind == "startup":
            self.epochs[b] += 1000
            return {"type": "broker_startup", "broker_id": b, "broker_epoch": self.epochs[b]}
        if kind == "failure":
            return {"type": "broker_failure", "broker_id": b, "broker_epoch": self.epochs[b]}
        if kind == "shutdown":
            return {"type": "controlled_shutdown", "broker_id": b, "broker_epoch": self.epochs[b]}
        t = r.choice(TOPICS)
        if kind == "alter":
            return {
                "type": "alter_partition",
                "broker_id": b,
                "broker_epoch": self.epochs[b],
                "topic": t,
                "partition": r.randint(0, 5),
                "leader_epoch": r.randint(0, 3),
                "partition_epoch": r.randint(0, 3),
                "new_isr": self.replicas(),
            }
        parts = [{"topic": t, "partition": r.randint(0, 5), "error_code": r.choice([0, 0, 56])}]
        return {
            "type": "leader_and_isr_response" if kind == "lisr" else "stop_replica_response",
            "broker_id": b,
            "partitions": parts,
        }

    def mutate(self, o: dict[str, Any]) -> str:
        """A broken copy of ``o`` (one of many ways), as record text."""
        r = self.rnd
        o = json.loads(json.dumps(o))
        how = r.randrange(22)
        keys = [k for k in o if k != "version"]
        if how == 0:
            return json.dumps(o)[: r.randint(0, 30)]  # cut short
        if how == 1:
            o.pop(r.choice(keys))
        elif how == 2:
            o[r.choice(keys)] = r.choice([None, "x", -1, 2**31, 2**64, 1.5, True, [], {}, [[1]]])
        elif how == 3:
            o["topic"] = r.choice(["probe-d\n", ".", "..", "a" * 250, "", "bad name", "caf\u00e9", "x/y"])
        elif how == 4:
            o["request_id"] = "\ud800"
        elif how == 5:
            o["request_id"] = "r" * r.choice([257, 600_000])
        elif how == 6:
            o["version"] = r.choice([0, 2, "1", None])
        elif how == 7:
            o["type"] = r.choice(["nope", "controller_failover", "", 7])
        elif how == 8:
            return "[" * r.choice([1000, 100_000])
        elif how == 9:
            return "x" * r.choice([10, 600_000])
        elif how == 10:
            o.update(
                type="create_topic",
                topic="big",
                partitions=r.choice([120_000, 2_147_483_648, 0, -3]),
                replication_factor=1,
            )
        elif how == 11:
            o.update(type="reassign_partitions", partitions=[{"topic": "t0", "partition": 0, "replicas": [1, 2, 1]}])
        elif how == 12:
            o.update(
                type="alter_partition",
                broker_id=1,
                broker_epoch=1,
                topic="t1",
                partition=2,
                leader_epoch=0,
                partition_epoch=0,
                new_isr=[3, 3],
            )
        elif how == 13:
            o.update(type="create_topic", topic="t2", replica_assignment={"0": [1, 2], "1": [2, 2]})
        elif how == 14:
            o.update(type="create_topic", topic="t3", replica_assignment={"0": [1, 2], "2": [2, 3]})
        elif how == 15:
            o.update(type="alter_topic_config", topic="t4", configs={"k": "\udc80"})
        elif how == 16:
            return json.dumps([o])
        elif how == 17:
            o.update(type="create_partitions", topic="t5", total_count=r.choice([0, 2**31, 150_000]))
        elif how == 18:
            o.update(type="broker_startup", broker_id=-1, broker_epoch=1)
        elif how == 19:
            o.update(type="elect_leaders", election_type="SIDEWAYS")
        elif how == 20:
            o.update(type="cancel_reassignment", partitions=[])
        else:
            o["partitions"] = [{"topic": "t6", "partition": 10**30, "replicas": [1]}]
        return json.dumps(o)

    def forged_ref(self) -> str:
        return json.dumps(
            {
                "version": 1,
                "type": "controller_failover_ref",
                "controller_id": 9,
                "controller_epoch": self.rnd.choice(["x", None, -1, 2**40, 99]),
                "path": self.rnd.choice(["/nowhere", 5]),
            }
        )

    def record(self) -> tuple[str, str]:
        r = self.rnd.random()
        if r < 0.02:
            return EVENTS, self.forged_ref()
        if r < 0.45:
            o = {"version": 1, **self.valid_admin(), "request_id": self.rid()}
            if self.rnd.random() < 0.3:
                return ADMIN, json.dumps(o)
            return ADMIN, self.mutate(o)
        o = {"version": 1, **self.valid_broker_event()}
        if self.rnd.random() < 0.6:
            return EVENTS, json.dumps(o)
        return EVENTS, self.mutate(o)


# --------------------------------------------------------------------------- driving to completion


def completion_events(q: Query) -> list[tuple[str, str]]:
    """What brokers would send next: every replica of a partition being reassigned catches up (the
    leader's AlterPartition), replicas of topics being deleted acknowledge their deletion."""
    items: list[tuple[str, str]] = []
    for ctx in q.contexts():
        live = ctx.live_broker_ids
        for tp in sorted(ctx.partitions_being_reassigned):
            li = ctx.partition_leadership.get(tp)
            if li is None or li.leader_and_isr.leader not in live:
                continue
            lai = li.leader_and_isr
            isr = list(lai.isr) + [x for x in ctx.replicas(tp) if x in live and x not in lai.isr]
            alter = ev.AlterPartition(
                lai.leader,
                ctx.live_brokers[lai.leader].epoch,
                tp.topic,
                tp.partition,
                lai.leader_epoch,
                lai.partition_epoch,
                tuple(isr),
            )
            items.append((EVENTS, event_to_json(alter)))
        for topic in sorted(ctx.topics_to_be_deleted):
            for pr in ctx.replicas_for_topic(topic):
                # the broker answers the StopReplica (delete) it was sent: replicas whose deletion started
                if pr.replica in live and ctx.replica_state(pr) is ReplicaState.DELETION_STARTED:
                    done = ev.StopReplicaResponse(pr.replica, (ev.PartitionError(pr.topic, pr.partition, 0),))
                    items.append((EVENTS, event_to_json(done)))
    return items


def names_a_field(expectation: str, reason: str) -> bool:
    if expectation == "payload_is_json_object" or "field '" in reason:
        return True
    if expectation.startswith("decode:"):
        field = expectation.removeprefix("decode:")
        return field != "" and reason.startswith(f"{field}: ")
    return False


# --------------------------------------------------------------------------- the test


def test_seeded_fuzz_every_record_is_rejected_answered_or_applied(tmp_path: Path) -> None:
    rnd = random.Random(SEED)
    q = Query(tmp_path, InputValidator())
    snapshot = ZkSnapshot(1, 0, tuple(Broker(b, 100 + b) for b in BROKERS), (), ())
    ref = failover.write_snapshot(q.store, 1000, snapshot, BUCKETS)
    q.run([(EVENTS, failover.ref_to_json(ref))])

    fz = Fuzzer(rnd)
    records = [fz.record() for _ in range(RECORDS)]
    replay_checked = False
    for start in range(0, len(records), BATCH):
        chunk = records[start : start + BATCH]
        saved = {b: s.value for b, s in q.states.items()}
        routed, out = q.run(chunk)
        if not replay_checked and (out["kind"] == "rejected").any():
            # Spark replays a batch from the same state with the same rows: the same outcome
            for b, value in saved.items():
                q.states[b].value = value
            again = q.step(routed)
            pd.testing.assert_frame_equal(out.reset_index(drop=True), again.reset_index(drop=True))
            replay_checked = True
    assert replay_checked

    # drive the cluster to completion: every broker up, then replicas catch up and deletions finish
    fz_up = []
    for b in BROKERS:
        fz.epochs[b] += 1000
        fz_up.append((EVENTS, event_to_json(ev.BrokerStartup(b, fz.epochs[b]))))
    q.run(fz_up)
    for _ in range(20):
        pending = completion_events(q)
        if not pending:
            break
        q.run(pending)
    q.run([])
    assert completion_events(q) == []

    rejected = {(m["source"]["topic"], m["source"]["offset"]): m for m in q.on("livectl.rejected")}
    results: dict[str, list[dict[str, Any]]] = {}
    for m in q.on("livectl.admin-results"):
        results.setdefault(m["request_id"], []).append(m)

    n_rejected = n_applied = n_answered = 0
    for (topic, offset), text in q.sent.items():
        position = (topic, offset)
        if position in rejected:
            n_rejected += 1
            m = rejected[position]
            assert m["reasons"], m
            for reason in m["reasons"]:
                name, _, why = reason.partition(": ")
                assert names_a_field(name, why), f"reason does not name the field: {reason!r} for {text[:200]!r}"
        else:
            assert position in q.routed, f"record {position} was neither rejected nor applied: {text[:200]!r}"
            n_applied += 1
        if topic != ADMIN:
            continue
        try:
            rid = json.loads(text).get("request_id")
        except (ValueError, RecursionError, AttributeError):
            rid = None
        if not (isinstance(rid, str) and 0 < len(rid) <= lim.MAX_REQUEST_ID_LENGTH and rid.isascii()):
            continue
        answers = results.get(rid)
        assert answers, f"admin command {rid} was never answered: {text[:200]!r}"
        n_answered += 1
        assert answers[-1]["status"] in ("ok", "error"), f"{rid} ended {answers[-1]}"
        # one final answer, and nothing after it
        finals = [a for a in answers if a["status"] != "in_progress"]
        assert len(finals) == 1, (rid, answers)
    assert n_rejected > RECORDS // 4 and n_applied > RECORDS // 4 and n_answered > RECORDS // 10

    # what was asked is what the cluster holds: every topic keeps its replication factor
    created = 0
    for (topic, _), text in q.sent.items():
        try:
            o = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if topic != ADMIN or not isinstance(o, dict) or o.get("type") not in ("create_topic", "create_partitions"):
            continue
        ok = [a for a in results.get(str(o.get("request_id")), []) if a["status"] == "ok"]
        if ok and o.get("topic") in RF:
            created += 1
            placed = read_details(ok[-1]["details"])["partitions"]
            assert {len(r) for r in placed.values()} == {RF[o["topic"]]}, (o, placed)
    assert created, "no topic was ever created"
    for ctx in q.contexts():
        for topic in ctx.topic_partitions:
            if topic in ctx.topics_to_be_deleted:
                continue
            tps = ctx.partitions_for_topic(topic)
            assert tps, topic
            rfs = {len(ctx.assignment(tp).target_replicas) for tp in tps}
            # a mutation may rename a valid creation's topic: it still holds one replication factor
            assert rfs == {RF[topic]} if topic in RF else len(rfs) == 1, (topic, rfs)

    for path, (data, _) in q.zk.nodes.items():
        assert len(data) <= lim.MAX_ZNODE_BYTES, path
    assert all(len(m.value) <= lim.MAX_MESSAGE_BYTES for m in q.sink.messages)


def test_every_fuzzed_record_failing_the_suite_is_a_rejection_naming_its_expectations(
    validator: InputValidator,
) -> None:
    # the suite (great-expectations, the one validator) over the fuzz's records and a few hand-made ones: the
    # quick pass and a single COMPLETE pass fail the same rows for the same expectations, in suite order, every
    # expectation of the suite is met by some record, and each failed row comes out of check() as a rejection
    # naming exactly those expectations, each with its reason
    fz = Fuzzer(random.Random(SEED + 1))
    items: list[tuple[str, str | bytes | None]] = [fz.record() for _ in range(RECORDS)]
    items += [(EVENTS, None), (ADMIN, ""), (ADMIN, "[1, 2]"), (EVENTS, "7"), (ADMIN, "[" * 100_000)]
    items += [(EVENTS, b"\xff\xfe not utf-8"), (ADMIN, json.dumps({"version": 1.0, "type": "delete_topic"}))]
    items += [(ADMIN, json.dumps({"version": True, "type": "create_topic", "topic": None}))]
    negative = {
        "version": 1,
        "type": "create_topic",
        "request_id": "n",
        "topic": "t",
        "replica_assignment": {"0": [-1]},
    }
    items += [(ADMIN, json.dumps(negative))]
    values: list[Any] = [v for _, v in items]
    sources = ["admin" if topic == ADMIN else "broker-events" for topic, _ in items]
    flat = flatten(values, sources)
    quick = {i: [e.name for e in exps] for i, exps in validator.failed_rows(flat).items()}
    one_pass = {i: [e.name for e in exps] for i, exps in validator.failed_rows_one_pass(flat).items()}
    assert quick == one_pass
    assert len(quick) > RECORDS // 4, "the fuzz fails the suite often enough"
    order = [e.name for e in validator.expectations]
    assert {name for names in quick.values() for name in names} == set(order)
    assert all(names == sorted(names, key=order.index) for names in quick.values())
    checked = validator.check(values, sources)
    assert len(checked) == len(values)
    for i, names in quick.items():
        out = checked[i]
        assert isinstance(out, Rejection) and list(out.expectations) == names, (i, values[i], out)
        assert len(out.reasons) == len(names) and all(out.reasons), (i, out)
    # the hand-made ones: none is a JSON object the suite and the decoder let through
    assert all(isinstance(out, Rejection) for out in checked[RECORDS:]), checked[RECORDS:]
