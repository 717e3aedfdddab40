"""Decoders of the broker events (topic ``livectl.broker-events``): registrations appearing, changing
in place and vanishing, AlterPartition, LeaderAndIsr / StopReplica responses, ControlledShutdown, log-dir failures.
Ids, epochs and codes are held to the wire's ranges; what Kafka's controller would answer is answered by
the core."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from core import jsonform as jf
from core import limits as lim
from core.codec.values import (
    TOPIC_ID_REGEX,
    read_broker_id,
    read_endpoints,
    read_error_code,
    read_partition_id,
    topic_field,
)
from core.errors import FormatError
from core.events import (
    AlterPartition,
    AlterPartitionRequest,
    BrokerFailure,
    BrokerModification,
    BrokerStartup,
    ControlledShutdown,
    Event,
    IsrProposal,
    LeaderAndIsrResponse,
    LogDirFailure,
    PartitionError,
    StopReplicaResponse,
)


def _partition_errors(o: Mapping[str, Any]) -> tuple[PartitionError, ...]:
    out = []
    for i, e in enumerate(jf.obj_list(o, "partitions", max_items=lim.MAX_LIST_ITEMS)):
        pre = f"partitions[{i}]."
        out.append(PartitionError(topic_field(e, "topic", pre), read_partition_id(e, pre), read_error_code(e, pre)))
    return tuple(out)


def _broker_startup(o: Mapping[str, Any]) -> Event:
    return BrokerStartup(
        read_broker_id(o),
        jf.integer(o, "broker_epoch", minimum=0),
        jf.opt_string(o, "rack", max_length=lim.MAX_NAME_LENGTH),
        read_endpoints(o),
    )


def _broker_modification(o: Mapping[str, Any]) -> Event:
    return BrokerModification(
        read_broker_id(o),
        jf.integer(o, "broker_epoch", minimum=0),
        jf.opt_string(o, "rack", max_length=lim.MAX_NAME_LENGTH),
        read_endpoints(o),
    )


def _broker_failure(o: Mapping[str, Any]) -> Event:
    return BrokerFailure(read_broker_id(o), jf.opt_integer(o, "broker_epoch", -1, minimum=-1))


def _alter_partition(o: Mapping[str, Any]) -> Event:
    broker_id = read_broker_id(o)
    broker_epoch = jf.integer(o, "broker_epoch", minimum=lim.INT64_MIN, maximum=lim.INT64_MAX)
    return _isr_proposal(o).sent_by(broker_id, broker_epoch)


def _alter_partition_request(o: Mapping[str, Any]) -> Event:
    broker_id = read_broker_id(o)
    broker_epoch = jf.integer(o, "broker_epoch", minimum=lim.INT64_MIN, maximum=lim.INT64_MAX)
    items = jf.obj_list(o, "partitions", max_items=lim.MAX_LIST_ITEMS)
    return AlterPartitionRequest(
        broker_id, broker_epoch, tuple(_isr_proposal(e, f"partitions[{i}].") for i, e in enumerate(items))
    )


def _isr_proposal(o: Mapping[str, Any], pre: str = "") -> IsrProposal:
    topic = topic_field(o, "topic", pre)
    partition = read_partition_id(o, pre)
    return IsrProposal(
        topic,
        partition,
        # the wire's ranges only (int32 epochs and ids, int8 recovery state): whatever Kafka's controller
        # would answer is answered by the core, with Kafka's error codes, not refused as malformed
        jf.integer(o, "leader_epoch", pre, minimum=lim.INT32_MIN, maximum=lim.INT32_MAX),
        jf.integer(o, "partition_epoch", pre, minimum=lim.INT32_MIN, maximum=lim.INT32_MAX),
        jf.int_list(
            o,
            "new_isr",
            pre,
            minimum=lim.INT32_MIN,
            maximum=lim.INT32_MAX,
            what=f"partition {topic}-{partition}",
            max_items=lim.MAX_REPLICATION_FACTOR,
        ),
        jf.opt_integer(o, "leader_recovery_state", 0, pre, minimum=lim.INT8_MIN, maximum=lim.INT8_MAX),
        jf.opt_integer(o, "correlation_id", -1, pre, minimum=-1, maximum=lim.INT32_MAX),
        _topic_id(o, pre),
    )


def _topic_id(o: Mapping[str, Any], pre: str = "") -> str | None:
    """Kafka's ``Uuid`` in its base64 text form (22 characters, URL-safe alphabet), or None."""
    v = jf.opt_string(o, "topic_id", pre, max_length=lim.MAX_NAME_LENGTH)
    if v is not None and not TOPIC_ID_REGEX.fullmatch(v):
        raise FormatError(pre + "topic_id", f"must be a Kafka topic id (22 base64url characters), got {lim.show(v)}")
    return v


def _lisr_response(o: Mapping[str, Any]) -> Event:
    return LeaderAndIsrResponse(read_broker_id(o), _partition_errors(o), read_error_code(o))


def _stop_replica_response(o: Mapping[str, Any]) -> Event:
    return StopReplicaResponse(read_broker_id(o), _partition_errors(o), read_error_code(o))


def _controlled_shutdown(o: Mapping[str, Any]) -> Event:
    return ControlledShutdown(read_broker_id(o), jf.integer(o, "broker_epoch", minimum=-1))


def _log_dir_failure(o: Mapping[str, Any]) -> Event:
    return LogDirFailure(read_broker_id(o))


DECODERS: Mapping[str, Callable[[Mapping[str, Any]], Event]] = MappingProxyType(
    {
        BrokerStartup.TYPE: _broker_startup,
        BrokerModification.TYPE: _broker_modification,
        BrokerFailure.TYPE: _broker_failure,
        AlterPartition.TYPE: _alter_partition,
        AlterPartitionRequest.TYPE: _alter_partition_request,
        LeaderAndIsrResponse.TYPE: _lisr_response,
        StopReplicaResponse.TYPE: _stop_replica_response,
        ControlledShutdown.TYPE: _controlled_shutdown,
        LogDirFailure.TYPE: _log_dir_failure,
    }
)
