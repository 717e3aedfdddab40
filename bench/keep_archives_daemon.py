"""``bench/worker_start.py``'s ``livectl-archives`` variant: livectl's worker daemon with Spark's own archives
left on ``sys.path`` (as before :func:`streaming.worker_daemon.drop_shipped_archives`). Spark starts it as
``python -m bench.keep_archives_daemon`` from the repository's root."""

from streaming import worker_daemon

if __name__ == "__main__":
    worker_daemon.main(drop_archives=False)
