"""Kafka-style ``state.change.logger`` lines for a micro-batch's decisions (the levels: see
:mod:`streaming.monitoring.audit_log`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import orjson

from core.codec.dry_run_details import DRY_RUN_DECISIONS
from core.kafka.requests import RequestApi
from streaming.monitoring.audit_rows import AuditBatch
from streaming.monitoring.request_digest import RequestDigest, digest_requests, per_broker

#: Kafka's state-change logger name
STATE_CHANGE_LOGGER = "state.change.logger"
state_change_log = logging.getLogger(STATE_CHANGE_LOGGER)


def log_state_changes(
    batch: AuditBatch,
    controller_id: int,
    epoch: int,
    logger: logging.Logger | None = None,
    digests: Sequence[RequestDigest] | None = None,
) -> None:
    """Kafka-style ``state.change.logger`` lines for the batch (see the module docstring for the levels)."""
    lg = logger or state_change_log
    prefix = f"[Controller id={controller_id} epoch={epoch}] "
    debug = lg.isEnabledFor(logging.DEBUG)
    refused = {f.index: f for f in batch.zk_refused}
    for i, w in enumerate(batch.zk_writes):
        f = refused.get(i)
        if f is not None:
            lg.error(
                "%sZooKeeper refused %s %s (expected version %d) in micro-batch %d: %s",
                prefix,
                w.op.value,
                w.path,
                w.expected_version,
                batch.batch_id,
                f.error,
            )
        elif debug:
            lg.debug("%sWrote %s %s in micro-batch %d: %s", prefix, w.op.value, w.path, batch.batch_id, w.data)
    if lg.isEnabledFor(logging.INFO):
        digests = digests if digests is not None else digest_requests(batch.requests)
        for (api, broker), (partitions, leaders) in per_broker(digests).items():
            if api is RequestApi.LEADER_AND_ISR:
                lg.info(
                    "%sSending LeaderAndIsr request to broker %d with %d become-leader and %d become-follower "
                    "partitions (micro-batch %d)",
                    prefix,
                    broker,
                    leaders,
                    partitions - leaders,
                    batch.batch_id,
                )
            elif api in (RequestApi.UPDATE_METADATA, RequestApi.STOP_REPLICA):
                lg.info(
                    "%sSending %s request to broker %d for %d partitions (micro-batch %d)",
                    prefix,
                    api.value,
                    broker,
                    partitions,
                    batch.batch_id,
                )
            else:
                lg.info("%sSending %s to broker %d (micro-batch %d)", prefix, api.value, broker, batch.batch_id)
        if debug:
            for d in digests:
                r = d.request
                for topic, partition, state in d.parsed():
                    if partition is not None:
                        lg.debug(
                            "%sSending %s request %s to broker%s %s for partition %s-%d",
                            prefix,
                            r.api.value,
                            orjson.dumps(state).decode(),
                            "s" if r.shared else "",
                            ",".join(map(str, r.recipients())),
                            topic,
                            partition,
                        )
    for a in batch.admin_results:
        lg.info(
            "%sAdmin request %s (%s): %s%s%s",
            prefix,
            a.request_id,
            f"{a.command}, dry run: nothing applied" if DRY_RUN_DECISIONS in a.details else a.command,
            a.status.value,
            f" {a.error}" if a.error else "",
            f": {a.message}" if a.message else "",
        )
    for fail in batch.failures:
        lg.error(
            "%sController %d epoch %d failed to change state for %s from %s to %s: %s",
            prefix,
            controller_id,
            epoch,
            fail.item,
            fail.from_state,
            fail.to_state,
            fail.reason,
        )
