"""One admin record per ``request_id`` in a micro-batch: the contract, and how a reused id is refused.

An admin command's ``request_id`` names that one command: its answers on ``livectl.admin-results`` are keyed
and merged by it (the parts of a command split over several buckets are one answer; a bucket's successive
answers to it in one micro-batch, ``in_progress`` then ``ok``, are one). So **request ids must be unique**.
Two records sharing one could not be answered apart: the answers of both would merge into one (issue 41: 228
admin records sharing 114 request ids got 119 results).

What livectl does about it, within one micro-batch: the first admin record of a ``request_id`` in stream
order (record time, then source partition, then offset: the order the buckets apply events in) is applied
and answered; **every later record of the batch with that ``request_id`` is refused**, applied nowhere, and
goes to ``livectl.rejected`` (expectation ``unique_request_id``, ``INVALID_REQUEST``) with a reason naming
``request_id`` and the record that holds it. It gets no admin result: that id's results are the first
record's. Across micro-batches livectl keeps no list of the ids it answered: reusing one is the sender's
error, and its answers cannot be told from the earlier command's.

How, across buckets: the first step (:func:`streaming.query.routing.prepare_frame`) gives each bucket one *claim*
row per admin command of the batch (:func:`claim_rows`: the request id and the buckets the command went to),
whichever buckets its events go to, so every bucket sees every record's claim and picks the same first
record per id (:func:`refuse_reused`); each bucket drops its events of the later records, and the lowest
bucket such a record went to reports it once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from core import events as ev
from core.kafka.error_codes import KafkaError as Errors

__all__ = ["EXPECTATION", "KIND_CLAIM", "NOT_ANSWERED", "claim_rows", "refuse_reused"]

#: the routed rows' kind of a claim (:data:`streaming.query.routing.ROUTED_SCHEMA`)
KIND_CLAIM = "claim"
#: the expectation name a refused record is reported under
EXPECTATION = "unique_request_id"
#: the key of a rejected row that must not be answered on ``livectl.admin-results`` (its id is another's)
NOT_ANSWERED = "not_answered"


def claim_rows(
    event: ev.Event,
    buckets: Sequence[int],
    num_buckets: int,
    *,
    position: tuple[int, str, int],
    record: str | None,
) -> list[tuple[int, int, str, int, int, str, str]]:
    """The claim rows of one admin record (none for any other event): one per bucket, each naming the request
    id and ``buckets`` (those the record's events went to), at the record's ``position`` (time, source,
    offset); the lowest of those buckets, which reports the record if it is refused, also gets the ``record``
    as received."""
    ts, src, offset = position
    if not isinstance(event, ev.AdminCommand):
        return []
    went = sorted(set(buckets))
    claim = {"request_id": event.request_id, "buckets": went}
    plain = json.dumps(claim, separators=(",", ":"))
    reporter = json.dumps({**claim, "record": record or ""}, separators=(",", ":"))
    return [(b, ts, src, offset, -1, KIND_CLAIM, reporter if b == went[0] else plain) for b in range(num_buckets)]


def refuse_reused(bucket: int, frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``bucket``'s routed rows without the claims and without the events of records whose ``request_id`` an
    earlier admin record of the batch holds (see the module docstring), and the ``rejected`` rows' payloads
    this bucket reports for those records (the format of :func:`streaming.query.routing.rejected_row`)."""
    is_claim = frame["kind"] == KIND_CLAIM
    if not is_claim.any():
        return frame, []
    claims = frame[is_claim].sort_values(["ts", "src", "offset"], kind="stable")
    first: dict[str, tuple[str, int]] = {}
    refused: dict[tuple[str, int], tuple[str, dict[str, Any]]] = {}
    for payload, src, offset in zip(claims["payload"], claims["src"], claims["offset"], strict=True):
        claim = json.loads(payload)
        rid = str(claim["request_id"])
        origin = (str(src), int(offset))
        holder = first.setdefault(rid, origin)
        if holder != origin:
            refused[origin] = (rid, claim)
    rest = frame[~is_claim]
    if not refused:
        return rest, []
    # a refused record's rows here are its events (its claims are gone, and rejected records have no claim)
    keep = [(str(s), int(o)) not in refused for s, o in zip(rest["src"], rest["offset"], strict=True)]
    rejected: list[str] = []
    for (src, offset), (rid, claim) in sorted(refused.items()):
        if bucket != min(claim["buckets"]):
            continue
        topic, _, partition = src.rpartition("/")
        h_src, h_offset = first[rid]
        rejected.append(
            json.dumps(
                {
                    "source_topic": topic or src,
                    "source_partition": int(partition) if partition.isdigit() else -1,
                    "source_offset": offset,
                    "payload": claim.get("record", ""),
                    "expectations": [EXPECTATION],
                    "reasons": [
                        f"request_id {rid!r} is already used by the admin record at {h_src} offset {h_offset} in "
                        "this micro-batch: request ids must be unique; this record was not applied and gets no "
                        "admin result (that request_id's results are the earlier record's)"
                    ],
                    "error": Errors.INVALID_REQUEST.name,
                    NOT_ANSWERED: True,
                }
            )
        )
    return rest[keep], rejected
