"""Topics and partitions: creation (the CreateTopics API and partitions found in ``/brokers/topics``),
new partitions (CreatePartitions), topic configs, and a refused creation adopted (Kafka's
``onNewPartitionCreation``, ``processTopicChange``, ``processPartitionModifications`` and the admin
manager's checks). Deletion is :mod:`core.controller.topic_deletion`."""

from __future__ import annotations

import base64
import hashlib

from core import limits as lim
from core import partition_machine, replica_machine
from core.controller.controller_replicas import (
    read_topic_version,
    repair_controller_replicas,
    rewrite_topic_znode,
    send_again,
    topic_version,
    unwritten_repairs,
)
from core.controller.step_context import UNCLEAN_CONFIG, StepContext
from core.decisions import AdminStatus, ZkOp, ZkWrite
from core.election import ElectionStrategy
from core.events import AlterTopicConfig, CreatePartitions, CreateTopic, TopicCreationRefused
from core.kafka.configs import topic_configs_problem
from core.kafka.error_codes import KafkaError
from core.kafka.zkdata import encode_topic_config, encode_topic_znode, topic_config_path, topic_path
from core.model import LeaderAndIsr, PartitionReplica, ReplicaAssignment, TopicPartition
from core.placement import (
    BrokerRack,
    PlacementError,
    assign_replicas,
    stable_start_index,
    validate_manual_assignment,
)
from core.states import PartitionState, ReplicaState
from core.zk_path_events import ZkTopicChange


def on_new_partition_creation(c: StepContext, tps: list[TopicPartition]) -> None:
    replicas = c.ctx.replicas_for_partitions(tps)
    c.partition_states(tps, PartitionState.NEW)
    c.replica_states(replicas, ReplicaState.NEW)
    c.partition_states(tps, PartitionState.ONLINE, ElectionStrategy.OFFLINE)
    c.replica_states(replicas, ReplicaState.ONLINE)


def _placement_brokers(c: StepContext) -> list[BrokerRack]:
    return [BrokerRack(b.id, b.rack) for b in sorted(c.ctx.live_brokers.values(), key=lambda b: b.id)]


def create_topic(c: StepContext, cmd: CreateTopic) -> None:
    ctx = c.ctx
    if cmd.topic in ctx.topic_partitions:
        msg = f"Topic '{cmd.topic}' already exists."
        if cmd.topic in ctx.topics_to_be_deleted:
            msg = f"Topic '{cmd.topic}' is marked for deletion."
        c.admin(cmd, AdminStatus.ERROR, KafkaError.TOPIC_ALREADY_EXISTS.name, msg)
        return
    configs = dict(cmd.configs)
    bad = invalid_config(configs)
    if bad is not None:
        c.admin(cmd, AdminStatus.ERROR, KafkaError.INVALID_CONFIG.name, bad)
        return
    if cmd.replica_assignment:
        # Kafka's CreateTopics does not check that the brokers named are registered (ZkAdminManager:
        # "unlike in add-partitions case"); a partition none of whose brokers is up stays New
        problem = validate_manual_assignment(cmd.replica_assignment, None, len(cmd.replica_assignment[0]))
        if problem is not None:
            c.admin(cmd, AdminStatus.ERROR, KafkaError.INVALID_REPLICA_ASSIGNMENT.name, problem)
            return
        placed = dict(enumerate(cmd.replica_assignment))
    else:
        brokers = _placement_brokers(c)
        free = sum(1 for b in brokers if b.id not in c.cordoned)
        try:
            placed = assign_replicas(
                brokers,
                cmd.partitions,
                cmd.replication_factor,
                start_index=stable_start_index(cmd.topic, free),
                cordoned=c.cordoned,
            )
        except PlacementError as e:
            c.admin(cmd, AdminStatus.ERROR, e.error, str(e))
            return
    topic_id = topic_id_for(cmd.topic, cmd.request_id)
    too_big = topic_znode_problem(cmd.topic, {p: ReplicaAssignment(tuple(r)) for p, r in placed.items()}, topic_id)
    if too_big is not None:
        c.admin(cmd, AdminStatus.ERROR, KafkaError.INVALID_PARTITIONS.name, too_big)
        return
    ctx.topic_ids[cmd.topic] = topic_id
    ctx.topic_configs[cmd.topic] = configs
    if UNCLEAN_CONFIG in configs:
        ctx.unclean_leader_election[cmd.topic] = configs[UNCLEAN_CONFIG] == "true"
    tps = [TopicPartition(cmd.topic, p) for p in sorted(placed)]
    for tp in tps:
        ctx.set_assignment(tp, ReplicaAssignment(tuple(placed[tp.partition])))
    c.fx.zk.append(
        # Kafka writes topic configs with setOrCreate: a config left by an earlier topic is overwritten
        ZkWrite(ZkOp.UPSERT, topic_config_path(cmd.topic), encode_topic_config(configs), make_parents=True)
    )
    c.fx.zk.append(
        ZkWrite(
            ZkOp.CREATE,
            topic_path(cmd.topic),
            encode_topic_znode({tp.partition: ctx.assignment(tp) for tp in tps}, topic_id),
            make_parents=True,
        )
    )
    on_new_partition_creation(c, tps)
    c.admin(
        cmd,
        AdminStatus.OK,
        details={"topic_id": topic_id, "partitions": {str(p): list(r) for p, r in sorted(placed.items())}},
    )


def create_partitions(c: StepContext, cmd: CreatePartitions) -> None:
    ctx = c.ctx
    if cmd.topic not in ctx.topic_partitions:
        c.admin(
            cmd, AdminStatus.ERROR, KafkaError.UNKNOWN_TOPIC_OR_PARTITION.name, f"Topic '{cmd.topic}' does not exist."
        )
        return
    if cmd.topic in ctx.topics_to_be_deleted:
        c.admin(cmd, AdminStatus.ERROR, KafkaError.INVALID_TOPIC_EXCEPTION.name, "The topic is queued for deletion.")
        return
    existing = ctx.partitions_for_topic(cmd.topic)
    if any(tp in ctx.partitions_being_reassigned for tp in existing):
        # Kafka refuses too (ReassignmentInProgressException): while a partition is being reassigned its
        # replica list is target + origin, which is not the topic's replication factor
        c.admin(
            cmd,
            AdminStatus.ERROR,
            KafkaError.REASSIGNMENT_IN_PROGRESS.name,
            f"A partition reassignment is in progress for the topic '{cmd.topic}'.",
        )
        return
    n_existing = len(existing)
    to_add = cmd.total_count - n_existing
    if to_add <= 0:
        c.admin(
            cmd,
            AdminStatus.ERROR,
            KafkaError.INVALID_PARTITIONS.name,
            f"Topic currently has {n_existing} partitions, {cmd.total_count} would not be an increase.",
        )
        return
    first = ctx.replicas(existing[0]) if existing else ()
    rf = len(first)
    if cmd.replica_assignment:
        problem: str | None = None
        if len(cmd.replica_assignment) != to_add:
            problem = (
                f"Increasing the number of partitions by {to_add} but {len(cmd.replica_assignment)} "
                "assignments provided."
            )
        else:
            problem = validate_manual_assignment(cmd.replica_assignment, set(ctx.live_brokers), rf)
        if problem is not None:
            c.admin(cmd, AdminStatus.ERROR, KafkaError.INVALID_REPLICA_ASSIGNMENT.name, problem)
            return
        placed = {n_existing + i: tuple(r) for i, r in enumerate(cmd.replica_assignment)}
    else:
        brokers = _placement_brokers(c)
        ids = [b.id for b in brokers if b.id not in c.cordoned]
        start = next((i for i, b in enumerate(ids) if first and b >= first[0]), 0)
        try:
            placed = assign_replicas(
                brokers, to_add, rf, start_index=start, start_partition_id=n_existing, cordoned=c.cordoned
            )
        except PlacementError as e:
            c.admin(cmd, AdminStatus.ERROR, e.error, str(e))
            return
    grown = {tp.partition: ctx.assignment(tp) for tp in existing}
    grown.update((p, ReplicaAssignment(tuple(r))) for p, r in placed.items())
    too_big = topic_znode_problem(cmd.topic, grown, ctx.topic_ids.get(cmd.topic))
    if too_big is not None:
        c.admin(cmd, AdminStatus.ERROR, KafkaError.INVALID_PARTITIONS.name, too_big)
        return
    tps = [TopicPartition(cmd.topic, p) for p in sorted(placed)]
    for tp in tps:
        ctx.set_assignment(tp, ReplicaAssignment(placed[tp.partition]))
    c.write_topic_znode(cmd.topic)
    on_new_partition_creation(c, tps)
    c.admin(cmd, AdminStatus.OK, details={"partitions": {str(p): list(r) for p, r in sorted(placed.items())}})


def alter_topic_config(c: StepContext, cmd: AlterTopicConfig) -> None:
    ctx = c.ctx
    if cmd.topic not in ctx.topic_partitions:
        c.admin(
            cmd, AdminStatus.ERROR, KafkaError.UNKNOWN_TOPIC_OR_PARTITION.name, f"Topic '{cmd.topic}' does not exist."
        )
        return
    configs = dict(ctx.topic_configs.get(cmd.topic, {}))
    configs.update(cmd.configs)
    for name in cmd.delete_configs:
        configs.pop(name, None)
    bad = invalid_config(configs)
    if bad is not None:
        c.admin(cmd, AdminStatus.ERROR, KafkaError.INVALID_CONFIG.name, bad)
        return
    ctx.topic_configs[cmd.topic] = configs
    c.fx.zk.append(ZkWrite(ZkOp.UPSERT, topic_config_path(cmd.topic), encode_topic_config(configs), make_parents=True))
    if UNCLEAN_CONFIG not in configs:
        ctx.unclean_leader_election.pop(cmd.topic, None)
    if UNCLEAN_CONFIG in configs:
        enabled = configs[UNCLEAN_CONFIG].strip().lower() == "true"
        ctx.unclean_leader_election[cmd.topic] = enabled
        if enabled:
            c.trigger_online_partition_state_change(cmd.topic)
    c.admin(cmd, AdminStatus.OK)


def zk_topic_change(c: StepContext, ev: ZkTopicChange) -> None:
    """Kafka's ``processTopicChange`` / ``processPartitionModifications``: partitions of the znode the
    controller does not know are created (``onNewPartitionCreation``; a partition none of whose
    replicas is live stays New until one is). For a topic queued for deletion they are not created
    and the znode is restored to the controller's assignment.

    Unlike Kafka: a new partition whose replicas name this controller's id while no broker of that id is
    registered is repaired first (:mod:`core.controller.controller_replicas`): a broker that created the topic
    itself placed a replica on the controller livectl advertises among the live brokers, where it would never
    come online. The znode is rewritten at the version read (``ev.zk_version``), or at the one this controller
    knows when that is later (its own rewrite since: :func:`core.controller.controller_replicas.read_topic_version`).
    When ZooKeeper refuses that compare-and-set (someone wrote the znode in between), the driver reads the
    znode again and publishes it as a new topic change (:mod:`streaming.query.refresh`): a partition this
    controller knows whose replicas there still name its id, where its own assignment holds the replacement,
    is a repair that did not reach ZooKeeper (``unwritten_repairs``; not from a reading older than the
    version the controller knows). The znode is then written again at the version now read, and the
    topic's LeaderAndIsr and UpdateMetadata, withheld with the refused write, are sent again."""
    if not c.read_under_this_epoch(ev.controller_epoch):
        return
    ctx = c.ctx
    new = [(TopicPartition(ev.topic, p), reps) for p, reps in ev.partitions]
    new = [(tp, reps) for tp, reps in new if tp not in ctx.partition_assignments]
    older = read_topic_version(c, ev)
    unwritten = [] if older else unwritten_repairs(c, ev)
    if not new and not unwritten:
        return
    if ev.topic in ctx.topics_to_be_deleted:
        if new:
            c.write_topic_znode(ev.topic)
        return
    if new and ev.topic not in ctx.topic_partitions:
        ctx.topic_partitions.setdefault(ev.topic, set())
        if ev.topic_id:
            ctx.topic_ids[ev.topic] = ev.topic_id
        configs = dict(ev.configs)
        ctx.topic_configs[ev.topic] = configs
        if configs.get(UNCLEAN_CONFIG) in ("true", "false"):
            ctx.unclean_leader_election[ev.topic] = configs[UNCLEAN_CONFIG] == "true"
        read_topic_version(c, ev)
    tps = sorted(tp for tp, _ in new)
    repaired = repair_controller_replicas(c, dict(new))
    for tp, reps in new:
        ctx.set_assignment(tp, ReplicaAssignment(repaired.get(tp, tuple(reps))))
    if repaired or unwritten:
        # at the version known: a write in between (an operator's, a broker's) refuses it, and it is read again
        rewrite_topic_znode(c, ev.topic, topic_version(c, ev))
    on_new_partition_creation(c, tps)
    if unwritten:
        send_again(c, ev.topic, set(tps), set(unwritten))


def topic_creation_refused(c: StepContext, ev: TopicCreationRefused) -> None:
    """Take the topic someone else created in place of this controller's refused creation (see
    :class:`core.events.TopicCreationRefused`). Only while the bucket still holds its own creation
    (same topic id): a topic deleted or created again since is left as it is."""
    ctx = c.ctx
    if ctx.topic_ids.get(ev.topic) != ev.refused_topic_id:
        return
    ctx.remove_topic(ev.topic)
    ctx.topic_configs.pop(ev.topic, None)
    ctx.unclean_leader_election.pop(ev.topic, None)
    z = ev.znode
    if z is None:
        return
    adding, removing = dict(z.adding_replicas), dict(z.removing_replicas)
    ctx.topic_partitions.setdefault(ev.topic, set())
    if z.topic_id:
        ctx.topic_ids[ev.topic] = z.topic_id
    if ev.configs:
        ctx.topic_configs[ev.topic] = dict(ev.configs)
        if UNCLEAN_CONFIG in ctx.topic_configs[ev.topic]:
            ctx.unclean_leader_election[ev.topic] = ctx.topic_configs[ev.topic][UNCLEAN_CONFIG] == "true"
    tps = []
    for p, reps in z.partitions:
        tp = TopicPartition(ev.topic, p)
        ra = ReplicaAssignment(tuple(reps), tuple(adding.get(p, ())), tuple(removing.get(p, ())))
        ctx.set_assignment(tp, ra)
        tps.append(tp)
    states = dict(ev.states)
    fresh = [tp for tp in tps if tp.partition not in states]
    for tp in tps:
        st = states.get(tp.partition)
        if st is None:
            continue
        lai = LeaderAndIsr(st.leader, st.isr, st.leader_epoch, st.zk_version, st.leader_recovery_state)
        ctx.put_leadership(tp, lai, st.controller_epoch)
    adopted = [tp for tp in tps if tp.partition in states]
    # the adopted partitions start as a new controller starts the partitions it reads from ZooKeeper;
    # those without a state znode are created as Kafka's onNewPartitionCreation does
    partition_machine.initialize_partition_state(ctx, adopted)
    on_new_partition_creation(c, fresh)
    replica_machine.startup(ctx, c.fx, [PartitionReplica.of(tp, r) for tp in adopted for r in ctx.replicas(tp)])
    c.trigger_online_partition_state_change(ev.topic)
    c.send_update_metadata(ctx.live_brokers.keys(), adopted)


def invalid_config(configs: dict[str, str]) -> str | None:
    """Kafka's ``LogConfig.validate``: unknown names, bad values (``INVALID_CONFIG``)."""
    return topic_configs_problem(configs)


def topic_znode_problem(topic: str, assignment: dict[int, ReplicaAssignment], topic_id: str | None) -> str | None:
    """Why ``/brokers/topics/<topic>`` with ``assignment`` cannot be written (ZooKeeper refuses data over
    its ``jute.maxbuffer``, and the controller could then never record the topic), or ``None``."""
    size = len(encode_topic_znode(assignment, topic_id).encode())
    if size <= lim.MAX_ZNODE_BYTES:
        return None
    return (
        f"The znode of topic '{topic}' would be {size} bytes, over the {lim.MAX_ZNODE_BYTES} bytes one znode may "
        f"hold (ZooKeeper's jute.maxbuffer is {lim.JUTE_MAXBUFFER} bytes)."
    )


def topic_id_for(topic: str, request_id: str) -> str:
    """The topic id a ``create_topic`` command gives its topic (the shell matches a refused creation to
    it): a deterministic Kafka-style topic id (base64url of 16 bytes, no padding)."""
    digest = hashlib.sha256(f"livectl-topic-id\0{topic}\0{request_id}".encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")
