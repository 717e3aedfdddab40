"""A failover outcome decided ahead, as the hand-off ships it and a bucket takes it.

:mod:`streaming.query.decided` computes each bucket's :class:`Outcome` in a standby's driver (it runs the
bucket's step, :mod:`streaming.query.stateful`); this module is what both sides share: the outcome's file,
which outcomes match the reference the hand-off publishes (:func:`matching`), where the executors find a
shipped one (:func:`shipped_outcome`) and when a bucket's step may use it instead of deciding (:func:`take`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from core import controller
from core.controller.metrics import BUCKET_GAUGES
from streaming.query import failover
from streaming.query.request_ids import KIND_CLAIM
from streaming.query.routing import KIND_FAILOVER_REF, KIND_TICK

log = logging.getLogger("livectl.app")

#: the version of an outcome's file (:meth:`Outcome.to_bytes`)
DECIDED_FORMAT = 1


def text_digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Outcome:
    """One bucket's outcome of a failover batch of exactly its reference and a tick: the reference's folder
    and epoch, the digest of the slice's text, the configs, then the bucket's output columns (as
    :func:`streaming.query.stateful.output_frame` made them, packed payloads included) and its new stored state."""

    folder: str
    bucket: int
    controller_id: int
    controller_epoch: int
    digest: str
    config: controller.ControllerConfig
    columns: dict[str, list[Any]]
    state: tuple[int, int, bytes]

    def to_bytes(self) -> bytes:
        # pickle of plain values (str, int, bytes, lists, the frozen config): written by this driver for its own
        # executors, as Spark pickles the step's closure; its format is checked before anything is used
        return pickle.dumps((DECIDED_FORMAT, self), protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def from_bytes(data: bytes) -> Outcome | None:
        fmt, outcome = pickle.loads(data)
        return outcome if fmt == DECIDED_FORMAT and isinstance(outcome, Outcome) else None

    def frame(self) -> pd.DataFrame:
        """The bucket's output frame (the step's own dtypes)."""
        out = pd.DataFrame(self.columns)
        for c in BUCKET_GAUGES:  # the step's metric columns (streaming.query.stateful.METRIC_COLUMNS)
            out[c] = out[c].astype("int64")
        return out


def decided_name(folder: str, bucket: int) -> str:
    """The name an outcome is shipped under (``SparkContext.addFile``): the slice's, marked."""
    return failover.shipped_name(folder, bucket).replace("livectl-failover-", "livectl-decided-", 1)


def matching(
    outcomes: Mapping[int, Outcome],
    ref: Mapping[str, Any],
    written: Mapping[str, str],
    config: controller.ControllerConfig,
) -> dict[int, Outcome]:
    """The outcomes that apply to the reference the hand-off is about to publish: each bucket's whose slice
    the hand-off wrote (``written``: text by URI) with the very text it was computed from, for that
    reference's folder, epoch and controller, under the configs the query runs with."""
    folder = str(ref["path"])
    if ref.get("resumes"):  # the records that waited for the reference are in the batch too
        return {}
    found: dict[int, Outcome] = {}
    for b, outcome in sorted(outcomes.items()):
        text = written.get(failover.bucket_file(folder, b))
        if (
            text is not None
            and outcome.folder == folder
            and outcome.controller_epoch == int(ref["controller_epoch"])
            and outcome.controller_id == int(ref["controller_id"])
            and outcome.config == config
            and outcome.digest == text_digest(text)
        ):
            found[b] = outcome
    return found


#: how a bucket finds an outcome shipped for (folder, bucket): its bytes, or ``None``
DecidedFiles = Callable[[str, int], "bytes | None"]


def shipped_outcome(folder: str, bucket: int) -> bytes | None:
    """The executors' copy of a shipped outcome (:func:`streaming.query.failover.shipped_copy`), or ``None``."""
    local = failover.shipped_copy(decided_name(folder, bucket))
    if local is None:
        return None
    with open(local, "rb") as f:
        return f.read()


def take(
    bucket: int,
    frame: pd.DataFrame,
    current: controller.ControllerState,
    *,
    checkpoint_dir: str | None,
    snapshots: failover.SnapshotFiles,
    config: controller.ControllerConfig | None,
    files: DecidedFiles,
) -> Outcome | None:
    """The outcome decided ahead for this bucket's batch, when it applies: the batch is one failover
    reference (usable by the bucket, :func:`streaming.query.failover.unusable_reason`) and ticks, the reference is
    the outcome's, the slice the step would load is the very text decided from, the configs are its, and the
    stored state (``current``, its context's head at least) holds no admin bookkeeping. ``None``: run the
    step."""
    kinds = frame["kind"]
    refs = frame["payload"][kinds == KIND_FAILOVER_REF]
    if config is None or len(refs) != 1 or not (kinds == KIND_TICK).any():
        return None
    # claims (the request ids of admin commands that went to other buckets) change nothing here
    if not ((kinds == KIND_FAILOVER_REF) | (kinds == KIND_TICK) | (kinds == KIND_CLAIM)).all():
        return None
    c = current
    if c.pending_reassignments or c.pending_deletions or c.zk_reassignments or c.interrupted_reassignments:
        return None
    ref = json.loads(refs.iloc[0])
    if ref.get("resumes"):
        return None
    folder = str(ref.get("path", ""))
    if failover.unusable_reason(ref, bucket, current.context.epoch, checkpoint_dir, snapshots) is not None:
        return None
    data = files(folder, bucket)
    if data is None:
        return None
    started = time.monotonic()
    try:
        outcome = Outcome.from_bytes(data)
    except Exception as e:  # a damaged copy: the step decides
        log.warning("bucket %d: the failover outcome decided ahead could not be read: %r", bucket, e)
        return None
    if (
        outcome is None
        or outcome.folder != folder
        or outcome.bucket != bucket
        or outcome.controller_epoch != int(ref.get("controller_epoch", -1))
        or outcome.controller_id != int(ref.get("controller_id", -1))
        or outcome.config != config
    ):
        return None
    text = snapshots.read(folder, bucket)  # ~20 ms at 50k partitions: the hand-off compared it too
    if text is None or text_digest(text) != outcome.digest:
        return None
    log.debug("bucket %d: failover outcome decided ahead, read in %.3f s", bucket, time.monotonic() - started)
    return outcome
