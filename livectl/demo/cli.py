"""``livectl demo``: the command line, the log file and Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TextIO

from livectl.demo.report import DEFAULT_RUN_DIR, DemoOptions
from livectl.demo.runner import Demo


def _cmd_demo(args: argparse.Namespace) -> int:
    options = DemoOptions(
        brokers=args.brokers,
        run_dir=args.run_dir,
        keep_running=args.keep_running,
        buckets=args.buckets,
        master=args.master,
        step_timeout_s=args.step_timeout,
        verbose=not args.quiet,
    )
    if options.brokers < 4:
        print(f"livectl demo: --brokers must be at least 4, got {options.brokers}", file=sys.stderr)
        return 2
    run_dir = options.run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    # the controller's and the clients' logs go to a file: the terminal shows the timeline
    handler = logging.FileHandler(run_dir / "controller.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    # PySpark reports a query stopped in the middle of a batch with warnings: into the log, not the timeline
    logging.captureWarnings(True)
    for noisy in ("kafka", "kazoo", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    # the timeline writes to its own copy of the terminal, untouched while Spark's output is redirected
    out: TextIO = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
    stop, hard_stop = threading.Event(), threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        del frame
        if stop.is_set():
            hard_stop.set()
        stop.set()

    demo = Demo(options, out, stop=stop, hard_stop=hard_stop)
    original = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in original:
        signal.signal(s, on_signal)
    try:
        report = demo.run()
    finally:
        for s, h in original.items():
            signal.signal(s, h)
        out.flush()
    return report.exit_code


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``livectl demo`` to the top-level parser."""
    p = subparsers.add_parser(
        "demo",
        help="run the whole system locally and a scripted scenario, with a timeline of the controller's decisions",
        description=(
            "Start ZooKeeper, a Kafka-protocol broker, N simulated brokers and the controller (Spark local), run "
            "a scenario (create topics, hard-kill and restart a broker, reassign, preferred election, controlled "
            "shutdown, delete), print what the controller decided, then stop everything it started."
        ),
    )
    p.add_argument("--brokers", type=int, default=5, help="simulated brokers, ids 1..N (at least 4; default 5)")
    p.add_argument("--run-dir", type=Path, default=DEFAULT_RUN_DIR, help="run folder (default: %(default)s)")
    p.add_argument("--keep-running", action="store_true", help="leave the cluster up after the scenario until Ctrl-C")
    p.add_argument("--buckets", type=int, default=4, help="controller state buckets = shuffle partitions (default 4)")
    p.add_argument("--master", default="local[2]", help="Spark master (default: %(default)s)")
    p.add_argument("--step-timeout", type=float, default=90.0, help="seconds each step may take (default 90)")
    p.add_argument("--quiet", action="store_true", help="print only the steps, not every decision")
    p.set_defaults(func=_cmd_demo)
