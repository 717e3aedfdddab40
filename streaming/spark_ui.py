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
  says ``livectl c1000 e5 batch 68: deciding``; once the batch's decisions are carried out, a job of one
  task says the controller's figures *after* the batch, short and most important first
  (:func:`batch_summary`: ``livectl c1000 e5 batch 68: offline 0, URP 3, reassigning 2`` then the rest).
  Jobs are listed newest first, so the top line of the Jobs tab is the controller's current state;
* **the figures as named accumulators** (:func:`publish_figures`): that job's one task adds each figure
  after the batch to a named JVM ``LongAccumulator`` (``livectl.OfflinePartitionsCount``, …), so its stage
  (named ``livectl figures after batch 68``) lists them in the Stages tab and in Spark's REST API
  (``/api/v1/applications/<id>/stages`` → ``accumulatorUpdates``), each stage its own batch's values.

Why a jar: PySpark's accumulators are unnamed in the UI, a named JVM accumulator shows in a stage only
when JVM code in that stage's tasks adds to it, and the accumulator behind ``observe("livectl", …)`` is
not listed (checked with Spark's status store, 4.3.0). So the task is a small Java class,
``livectl.spark.BatchFigures`` (source ``streaming/jvm/src``, shipped built as ``conf/jars/livectl-spark.jar``
by ``scripts/build-jar``). It must be on the driver's class path and reach the executors: ``livectl run``
adds it to ``spark.jars`` (:func:`streaming.session.spark_session`); under ``spark-submit`` it is
``--jars "$(livectl conf path jars/livectl-spark.jar)"``. Without it the figures job is the job of no
task of before (:func:`announce`: the Jobs tab line only) and the driver logs once how to add the jar.

The figures job is submitted asynchronously: the micro-batch does not wait for its task, only for the
submission, which costs what the job of no task did (measured with ``local[2]`` on a loaded machine, 40
each: submission median 19.5 ms, the job of no task 20.7 ms; the task then takes another ~30 ms, off the
batch's path). Its job id and stage are taken at submission, after the batch's own work, so it is still
listed above the batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("livectl.spark_ui")

#: the Java class whose one-task job adds the figures to named accumulators (``streaming/jvm/src``)
FIGURES_CLASS = "livectl.spark.BatchFigures"
#: what the accumulators' names start with (``livectl.OfflinePartitionsCount``)
ACCUMULATOR_PREFIX = "livectl."

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
    previous = spark_context.getLocalProperty("spark.job.description")
    spark_context.setJobDescription(description)
    try:
        # no partition, so no task (and no Python worker): Spark still lists the job with its description
        spark_context.emptyRDD().count()
    finally:
        spark_context.setLocalProperty("spark.job.description", previous)


def figures_lines(metrics: Mapping[str, int]) -> str:
    """``Name<TAB>value`` per figure, the batch summary's order first, then the rest by name: what
    ``BatchFigures.publish`` takes (one py4j call, whatever the number of figures)."""
    first = [k for _label, k in (*HEAD, *TAIL) if k in metrics]
    rest = sorted(k for k in metrics if k not in first)
    for k in (*first, *rest):
        if not k or not all(c.isalnum() or c in "_." for c in k):
            raise ValueError(f"figure name {k!r}: must be letters, digits, '_' or '.'")
    return "".join(f"{k}\t{int(metrics[k])}\n" for k in (*first, *rest))


_warned_no_jar: set[str] = set()


def _figures_class(spark_context: Any) -> Any | None:
    """``BatchFigures`` through py4j, or ``None`` when it is not on the driver's class path."""
    from py4j.java_gateway import JavaClass

    node = spark_context._jvm
    for part in FIGURES_CLASS.split("."):
        node = getattr(node, part)
    return node if isinstance(node, JavaClass) else None


def publish_figures(spark_context: Any, description: str, metrics: Mapping[str, int], batch_id: int) -> Any | None:
    """Say ``description`` in the Jobs tab and ``metrics`` as named accumulators in the Stages tab: a job
    of one task, submitted asynchronously (see the module docstring). Returns the job's future (Spark's
    ``JavaFutureAction``: ``get()`` waits for it), or ``None`` when the jar is missing and the description
    went out as a job of no task (:func:`announce`). The thread's description and call site are restored."""
    cls = _figures_class(spark_context)
    if cls is None:
        app = str(spark_context.applicationId)
        if app not in _warned_no_jar:
            _warned_no_jar.add(app)
            log.warning(
                "the Spark UI's Stages tab will not show the controller's figures: %s is not on the driver's "
                'class path (spark-submit --jars "$(livectl conf path jars/livectl-spark.jar)"; livectl run '
                "adds it itself)",
                FIGURES_CLASS,
            )
        announce(spark_context, description)
        return None
    lines = figures_lines(metrics)
    keys = ("spark.job.description", "callSite.short", "callSite.long")
    previous = {k: spark_context.getLocalProperty(k) for k in keys}
    site = f"livectl figures after batch {batch_id}"
    spark_context.setJobDescription(description)
    spark_context.setLocalProperty("callSite.short", site)
    spark_context.setLocalProperty("callSite.long", site)
    try:
        return cls.publishAsync(spark_context._jsc.sc(), lines)
    finally:
        for k, v in previous.items():
            spark_context.setLocalProperty(k, v)
