"""What the Spark UI says about the controller: application name, job descriptions, role changes.

What Spark allows (4.3): the application name (``spark.app.name``) is read once, when the SparkContext
starts, and the UI and the history server show that name for the life of the application; a job's
description (``SparkContext.setJobDescription``) is read when the job starts and never changes after.
So:

* **the application name** says the controller id and the role the process had when Spark started
  (:func:`app_name`: ``livectl c1000 active`` or ``livectl c1001 standby``). A standby starts Spark
  before it waits for the lease, so a standby that later takes over keeps its ``standby`` name; the Jobs
  tab says the change (next point) and the name says so in words: ``standby at start``;
* **role changes** are zero-task jobs whose descriptions say them (:func:`announce`): ``livectl c1001
  standby: waiting for the controller lease (held by c1000)``, then ``livectl c1001 e6 active: elected``.
  A job over no partitions runs no task and no stage, yet Spark lists it in the Jobs tab (and its status
  store and REST API) with its description: the cheapest way to put a line in the UI;
* **each micro-batch** gets two descriptions. The batch's own job (the one that runs the buckets' step)
  says ``livectl c1000 e5 batch 68: deciding``; once the batch's decisions are carried out, a zero-task
  job says the controller's figures *after* the batch, short and most important first
  (:func:`batch_summary`: ``livectl c1000 e5 batch 68: offline 0, URP 3, reassigning 2`` then the rest).
  Jobs are listed newest first, so the top line of the Jobs tab is the controller's current state.

Named accumulators (the Stages tab) are not used: PySpark's accumulators are unnamed in the UI, a named
JVM accumulator is only updated by JVM code running in the tasks, and the accumulator behind
``observe("livectl", …)`` is not listed (checked with Spark's status store, 4.3.0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the short head of a batch summary: (label, metric), most important first
HEAD = (
    ("offline", "OfflinePartitionsCount"),
    ("URP", "UnderReplicatedPartitions"),
    ("reassigning", "ReassigningPartitions"),
)
#: the tail: (label, metric)
TAIL = (
    ("imbalanced", "PreferredReplicaImbalanceCount"),
    ("topics", "GlobalTopicCount"),
    ("partitions", "GlobalPartitionCount"),
    ("topics to delete", "TopicsToDeleteCount"),
    ("replicas to delete", "ReplicasToDeleteCount"),
)


def app_name(query_name: str, controller_id: int, standby: bool) -> str:
    """The application name: controller id and the role at Spark's start (see the module docstring)."""
    role = "standby at start" if standby else "active"
    prefix = "livectl" if query_name == "livectl" else f"livectl {query_name}"
    return f"{prefix} c{controller_id} {role}"


def batch_head(controller_id: int, epoch: int, batch_id: int) -> str:
    return f"livectl c{controller_id} e{epoch} batch {batch_id}"


def batch_summary(controller_id: int, epoch: int, batch_id: int, metrics: Mapping[str, int]) -> str:
    """``livectl c1000 e5 batch 68: offline 0, URP 3, reassigning 2; imbalanced 0, topics 4, …`` — the
    figures after the batch; a figure the metrics lack is left out."""
    head = ", ".join(f"{label} {metrics[k]}" for label, k in HEAD if k in metrics)
    tail = ", ".join(f"{label} {metrics[k]}" for label, k in TAIL if k in metrics)
    text = f"{batch_head(controller_id, epoch, batch_id)}: {head}"
    return f"{text}; {tail}" if tail else text


def announce(spark_context: Any, description: str) -> None:
    """Put ``description`` in the Jobs tab as a job of no task (see the module docstring), then restore the
    thread's description."""
    jsc = spark_context._jsc
    previous = jsc.getLocalProperty("spark.job.description")
    jsc.setLocalProperty("spark.job.description", description)
    try:
        jsc.emptyRDD().count()
    finally:
        jsc.setLocalProperty("spark.job.description", previous)


def job_descriptions(spark_context: Any, limit: int = 50) -> list[str]:
    """The descriptions of the newest ``limit`` jobs, newest first, from Spark's status store (what the
    Jobs tab and ``/api/v1/applications/<id>/jobs`` show; kept even when the UI is disabled)."""
    jobs = spark_context._jsc.sc().statusStore().jobsList(None)
    out: list[tuple[int, str]] = []
    for i in range(int(jobs.size())):
        job = jobs.apply(i)
        desc = job.description()
        out.append((int(job.jobId()), str(desc.get()) if desc.isDefined() else ""))
    out.sort(reverse=True)
    return [d for _id, d in out[:limit]]
