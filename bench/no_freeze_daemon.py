"""livectl's worker daemon with pyspark's own collection after each task (as before
:class:`streaming.worker_daemon.TaskEndCollector`): the baseline of an A/B run, e.g.
``bench/broker_failure.py --conf spark.python.daemon.module=bench.no_freeze_daemon``. Spark starts it as
``python -m bench.no_freeze_daemon`` from the repository's root."""

from streaming import worker_daemon

if __name__ == "__main__":
    worker_daemon.main(freeze_after_tasks=False)
