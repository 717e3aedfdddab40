"""A standby's failover batch decided ahead (:mod:`streaming.query.decided`): the bucket hands over the outcome
only for exactly the batch it was computed for, and it is the step's own rows and state bytes."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shell_pipeline import (
    ADMIN,
    BUCKETS,
    EVENTS,
    FakeGroupState,
    Pipeline,
    by_bucket,
    store_at,
)
from spark_conf import FakeSpark

from core import events as ev
from core.codec.events import event_to_json
from core.controller import ControllerConfig
from core.model import Broker, PartitionTarget, TopicPartition
from core.snapshot import PartitionStateZnode, TopicZnode, ZkSnapshot
from sinks.memory import MemoryZooKeeper
from sinks.ports import Fence
from streaming.query import decided, failover, outcome, routing, stateful
from streaming.query.failover import StoreSnapshots
from streaming.query.validation import InputValidator

pytestmark = pytest.mark.unit

CONTROLLER = 1000  # Pipeline.failover_ref's


def _cluster(epoch: int = 1) -> ZkSnapshot:
    """A busy cluster's tree: many topics, a dead broker's replicas, a reassignment, a deletion, a
    preferred election and a topic config pending."""
    names = [f"t{i}" for i in range(24)]
    replicas = {
        t: [(p, ((i + p) % 4 + 1, (i + p + 1) % 4 + 1, (i + p + 2) % 4 + 1)) for p in range(3)]
        for i, t in enumerate(names)
    }
    return ZkSnapshot(
        epoch,
        epoch - 1,
        tuple(Broker(b, 100 + b) for b in (1, 2, 3)),  # broker 4 is gone
        tuple(TopicZnode(t, tuple(replicas[t])) for t in names),
        tuple(
            (TopicPartition(t, p), PartitionStateZnode(reps[0], 3, reps, epoch - 1 if epoch > 1 else 1, 0))
            for t in names
            for p, reps in replicas[t]
        ),
        pending_reassignments=(PartitionTarget("t1", 0, (1, 2, 3)),),
        topics_to_delete=("t5",),
        pending_preferred_elections=(TopicPartition("t7", 1),),
        topic_configs=(("t9", (("unclean.leader.election.enable", "true"),)),),
    )


def _stored_states(tmp_path: Path, validator: InputValidator) -> dict[int, tuple[Any, ...] | None]:
    """Every bucket's state as the previous controller left it (created a topic on epoch 1)."""
    first = Pipeline.failed_over(tmp_path, validator)
    first.run_batch([(ADMIN, event_to_json(ev.CreateTopic("r", "early", 3, 2)))])
    return {b: s.value for b, s in first.states.items()}


def _decider(tmp_path: Path, config: ControllerConfig) -> decided.Decider:
    return decided.Decider(
        controller_id=CONTROLLER, checkpoint_dir=store_at(tmp_path).root, num_buckets=BUCKETS, config=config
    )


def _hand_off(tmp_path: Path, snapshot: ZkSnapshot) -> tuple[dict[str, Any], dict[str, str]]:
    """What the hand-off writes after winning: the files of the snapshot read then, and the reference."""
    written: dict[str, str] = {}
    ref = failover.write_snapshot(store_at(tmp_path), CONTROLLER, snapshot, BUCKETS, written=written)
    return ref, written


def _batch(
    tmp_path: Path,
    validator: InputValidator,
    ref: dict[str, Any],
    extra: Sequence[tuple[str, str]] = (),
) -> pd.DataFrame:
    """The takeover's first micro-batch: the reference (and ``extra`` records), then a tick per bucket."""
    p = Pipeline(tmp_path, MemoryZooKeeper(), Fence(1, 0), validator)
    records = p.records([(EVENTS, failover.ref_to_json(ref)), *extra])
    return pd.concat([routing.prepare_frame(records, BUCKETS, ADMIN, validator), routing.tick_rows(5, BUCKETS)])


def _run(
    tmp_path: Path,
    stored: dict[int, tuple[Any, ...] | None],
    batch: pd.DataFrame,
    config: ControllerConfig,
    outcomes: dict[int, outcome.Outcome] | None,
    *,
    shipped: outcome.DecidedFiles | None = None,
    summaries: bool = False,
) -> tuple[list[list[Any]], dict[int, tuple[Any, ...] | None], list[int]]:
    """Each bucket's step on its stored state (no worker cache), with the outcomes as shipped (or the files
    ``shipped``) or none: rows, the states stored, the buckets that took an outcome."""
    stateful.forget_states()
    rows: list[list[Any]] = []
    states: dict[int, tuple[Any, ...] | None] = {}
    taken: list[int] = []

    def files(folder: str, bucket: int) -> bytes | None:
        o = (outcomes or {}).get(bucket)
        return o.to_bytes() if o is not None and o.folder == folder else None

    real_take = outcome.take

    def spy(bucket: int, *a: Any, **kw: Any) -> outcome.Outcome | None:
        got = real_take(bucket, *a, **kw)
        if got is not None:
            taken.append(bucket)
        return got

    outcome.take = spy
    try:
        for bucket, frame in by_bucket(batch):
            gs = FakeGroupState()
            gs.value = stored.get(int(bucket))
            for df in stateful.step_bucket(
                (bucket,),
                iter([frame]),
                gs,
                store_at(tmp_path).root,
                StoreSnapshots(store_at(tmp_path)),
                config=config,
                summaries=summaries,
                outcomes=shipped or (files if outcomes is not None else None),
            ):
                rows.extend(df.values.tolist())
            states[int(bucket)] = gs.value
    finally:
        outcome.take = real_take
    return rows, states, taken


def test_an_outcome_decided_ahead_is_the_steps_own_rows_and_state(tmp_path: Path, validator: InputValidator) -> None:
    config = ControllerConfig(auto_leader_rebalance_enable=False)
    stored = _stored_states(tmp_path, validator)
    ahead = _cluster(epoch=1)
    decider = _decider(tmp_path, config)
    stateful.forget_states()
    assert decider.update(ahead, {}, threading.Event()) == BUCKETS
    assert not stateful.cached_buckets()  # the driver keeps the outcomes, not the states the step built
    assert decider.update(ahead, {}, threading.Event()) == 0  # nothing changed: nothing decided again
    # won: the tree read after winning is the one read ahead, one epoch on
    ref, written = _hand_off(tmp_path, decided.predicted(ahead))
    outcomes = outcome.matching(decider.outcomes(), ref, written, config)
    assert sorted(outcomes) == list(range(BUCKETS))
    batch = _batch(tmp_path, validator, ref)
    rows, states, taken = _run(tmp_path, stored, batch, config, outcomes)
    step_rows, step_states, none = _run(tmp_path, stored, batch, config, None)
    assert taken == list(range(BUCKETS)) and none == []
    assert rows == step_rows and states == step_states
    assert any("LeaderAndIsr" in str(r[3]) or r[-1] is not None for r in rows)
    # on a new checkpoint (no stored state) too
    fresh_rows, fresh_states, taken = _run(tmp_path, {}, batch, config, outcomes)
    assert taken == list(range(BUCKETS))
    assert (fresh_rows, fresh_states) == _run(tmp_path, {}, batch, config, None)[:2]


def test_a_tree_that_changed_after_the_read_ahead_gets_its_outcome_only_where_it_did_not(
    tmp_path: Path, validator: InputValidator
) -> None:
    config = ControllerConfig()
    ahead = _cluster(epoch=1)
    decider = _decider(tmp_path, config)
    decider.update(ahead, {}, threading.Event())
    after = decided.predicted(ahead)
    # one partition's leader changed between the last read ahead and the win: its bucket's slice differs
    tp, st = after.partition_states[0]
    changed = ((tp, replace(st, leader=st.isr[1], leader_epoch=st.leader_epoch + 1, zk_version=1)),)
    after = replace(after, partition_states=changed + after.partition_states[1:])
    ref, written = _hand_off(tmp_path, after)
    outcomes = outcome.matching(decider.outcomes(), ref, written, config)
    moved = routing.bucket_of(tp.topic, BUCKETS)
    assert moved not in outcomes and len(outcomes) == BUCKETS - 1
    stored = _stored_states(tmp_path, validator)
    batch = _batch(tmp_path, validator, ref)
    rows, states, taken = _run(tmp_path, stored, batch, config, outcomes)
    assert moved not in taken and len(taken) == BUCKETS - 1
    assert (rows, states) == _run(tmp_path, stored, batch, config, None)[:2]


def test_another_epoch_other_configs_or_a_resuming_reference_take_no_outcome(tmp_path: Path) -> None:
    ahead = _cluster(epoch=1)
    decider = _decider(tmp_path, ControllerConfig())
    decider.update(ahead, {}, threading.Event())
    # another controller won first: the next epoch's tree is not the one predicted
    ref, written = _hand_off(tmp_path, replace(ahead, controller_epoch=3, controller_epoch_zk_version=2))
    assert outcome.matching(decider.outcomes(), ref, written, ControllerConfig()) == {}
    ref, written = _hand_off(tmp_path, decided.predicted(ahead))
    # a dynamic controller config read after winning differs from the one decided with
    assert outcome.matching(decider.outcomes(), ref, written, ControllerConfig(delete_topic_enable=False)) == {}
    assert outcome.matching(decider.outcomes(), {**ref, "resumes": True}, written, ControllerConfig()) == {}
    # a file kept from an earlier attempt of the same epoch is not in ``written``: nothing to compare with
    assert outcome.matching(decider.outcomes(), ref, {}, ControllerConfig()) == {}


def test_a_batch_with_more_than_the_reference_and_ticks_or_bookkeeping_runs_the_step(
    tmp_path: Path, validator: InputValidator
) -> None:
    config = ControllerConfig()
    stored = _stored_states(tmp_path, validator)
    ahead = _cluster(epoch=1)
    decider = _decider(tmp_path, config)
    decider.update(ahead, {}, threading.Event())
    ref, written = _hand_off(tmp_path, decided.predicted(ahead))
    outcomes = outcome.matching(decider.outcomes(), ref, written, config)
    # records that waited behind the failover barrier go into the same batch: every bucket of theirs steps
    command = [(ADMIN, event_to_json(ev.CreateTopic("r2", "late", 3, 2)))]
    batch = _batch(tmp_path, validator, ref, command)
    busy = {int(b) for b in batch[batch["kind"] == routing.KIND_EVENT]["bucket"]}
    rows, states, taken = _run(tmp_path, stored, batch, config, outcomes)
    assert busy and not busy & set(taken) and len(taken) == BUCKETS - len(busy)
    assert (rows, states) == _run(tmp_path, stored, batch, config, None)[:2]
    # a bucket whose stored state still waits to answer an admin request steps, whatever its batch
    waiting = dict(stored)
    for b in range(BUCKETS):
        gs = FakeGroupState()
        gs.value = stored[b]
        state = stateful.load_state(*gs.get) if gs.value is not None else None
        if state is not None:
            waiting[b] = stateful.dump_state(replace(state, pending_deletions={"r0": frozenset({"t5"})}))
    batch = _batch(tmp_path, validator, ref)
    rows, states, taken = _run(tmp_path, waiting, batch, config, outcomes)
    assert taken == [b for b in range(BUCKETS) if waiting.get(b) is None]
    assert (rows, states) == _run(tmp_path, waiting, batch, config, None)[:2]
    # the metrics endpoint on: the summary compares with the stored context, so the step runs (no look-up)
    called: list[int] = []

    def shipped(folder: str, bucket: int) -> bytes | None:
        called.append(bucket)
        return None

    _run(tmp_path, stored, batch, config, None, shipped=shipped, summaries=True)
    assert called == []


def _always(data: bytes) -> outcome.DecidedFiles:
    """Decided files that hold ``data`` for every folder and bucket."""
    return lambda folder, bucket: data


def test_a_damaged_or_foreign_outcome_file_runs_the_step(tmp_path: Path, validator: InputValidator) -> None:
    config = ControllerConfig()
    ahead = _cluster(epoch=1)
    decider = _decider(tmp_path, config)
    decider.update(ahead, {}, threading.Event())
    ref, written = _hand_off(tmp_path, decided.predicted(ahead))
    outcomes = outcome.matching(decider.outcomes(), ref, written, config)
    batch = _batch(tmp_path, validator, ref)
    expected = _run(tmp_path, {}, batch, config, None)[:2]
    # bucket 0's outcome served to every bucket: only bucket 0 takes it; one decided from another slice text:
    # none (the slice the step would load is compared with it)
    other = replace(outcomes[0], digest="0" * 32).to_bytes()
    for bad, takers in ((b"not a pickle", []), (outcomes[0].to_bytes(), [0]), (other, [])):
        rows, states, taken = _run(tmp_path, {}, batch, config, None, shipped=_always(bad))
        assert taken == takers and (rows, states) == expected


def test_a_stop_ends_the_deciding_between_buckets(tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    assert _decider(tmp_path, ControllerConfig()).update(_cluster(), {}, stop) == 0


def test_the_switch_is_true_or_false_and_anything_else_is_refused() -> None:
    assert decided.decide_ahead_enabled(FakeSpark()) is True
    assert decided.decide_ahead_enabled(FakeSpark({decided.DECIDE_AHEAD_CONF: " FALSE "})) is False
    with pytest.raises(ValueError, match=r"spark\.livectl\.failover\.decideAhead: must be true or false, got 'off'"):
        decided.decide_ahead_enabled(FakeSpark({decided.DECIDE_AHEAD_CONF: "off"}))


def test_a_standby_decides_only_on_a_checkpoint_with_its_bucket_count_and_without_the_summaries(
    tmp_path: Path,
) -> None:
    from streaming.query.bucket_keys import CHECKPOINT_META
    from streaming.runtime.checkpoint_fs import MemoryCheckpointStore, child
    from streaming.settings import Settings

    store = MemoryCheckpointStore(f"memory:{tmp_path}/decider")
    settings = Settings(controller_id=7, unclean_leader_election_enable=True)
    assert decided.standby_decider(settings, store) is None  # a new checkpoint: its bucket count is not fixed
    store.write_text(child(store.root, CHECKPOINT_META), '{"num_buckets": 3}')
    d = decided.standby_decider(settings, store)
    assert d is not None and (d.num_buckets, d.controller_id, d.checkpoint_dir) == (3, 7, store.root)
    assert d.config == settings.controller_config() and d.config.unclean_leader_election_enable
    assert decided.standby_decider(replace(settings, metrics_port=9404), store) is None


def test_the_configs_are_read_before_each_update_and_a_change_decides_again(tmp_path: Path) -> None:
    configs = [ControllerConfig(), ControllerConfig(), ControllerConfig(unclean_leader_election_enable=True)]
    decider = decided.Decider(
        controller_id=CONTROLLER,
        checkpoint_dir=store_at(tmp_path).root,
        num_buckets=BUCKETS,
        config=ControllerConfig(),
        config_of=configs.pop,  # the last first: the changed configs, then twice the first ones
    )
    ahead = _cluster()
    assert decider.update(ahead, {}, threading.Event()) == BUCKETS
    assert {o.config.unclean_leader_election_enable for o in decider.outcomes().values()} == {True}
    assert decider.update(ahead, {}, threading.Event()) == BUCKETS  # the configs changed back: decided again
    assert decider.update(ahead, {}, threading.Event()) == 0
    assert {o.config for o in decider.outcomes().values()} == {ControllerConfig()}


def test_a_failover_the_step_leaves_out_keeps_no_outcome_and_is_not_decided_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.controller import event_loop

    def broken(c: object, e: object) -> None:
        raise RuntimeError("a bug in the failover")

    monkeypatch.setattr(event_loop, "HANDLERS", {**event_loop.HANDLERS, ev.ControllerFailover: broken})
    decider = _decider(tmp_path, ControllerConfig())
    assert decider.update(_cluster(), {}, threading.Event()) == BUCKETS
    assert decider.outcomes() == {}
    assert decider.update(_cluster(), {}, threading.Event()) == 0  # the same slices: not stepped again
