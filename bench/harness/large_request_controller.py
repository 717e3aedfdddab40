"""The active controller of ``python -m bench failover`` when the bench-only large-request prototype is on.

Same as the product's entry point (``python -m streaming``: :class:`streaming.driver.app.ControllerApp` with
its own local SparkSession), except that the request sink's producer accepts messages over 1 MB
(:func:`bench.harness.large_request_sinks`). Arguments: ``--master M --set key=value ... --conf key=value ...``.
"""

from __future__ import annotations

import argparse
import logging
import signal
from typing import Any

from bench.harness import large_request_sinks, parse_confs
from streaming.driver.app import ControllerApp
from streaming.settings import Settings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("kafka", "kazoo", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    settings = Settings.load(overrides=args.overrides)
    app = ControllerApp(
        settings, master=args.master, wrap_sinks=large_request_sinks(), spark_conf=parse_confs(args.conf)
    )

    def on_signal(signum: int, _frame: Any) -> None:
        app.stop()

    signal.signal(signal.SIGTERM, on_signal)
    app.run()


if __name__ == "__main__":
    main()
