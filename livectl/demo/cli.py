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
from livectl.demo.runner import make_demo

KAFKA = "kafka"


def _brokers(text: str) -> int | str:
    """``--brokers``: a number of simulated brokers, or ``kafka``."""
    if text.strip().lower() == KAFKA:
        return KAFKA
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of simulated brokers or 'kafka', got {text!r}") from None


def _cmd_demo(args: argparse.Namespace) -> int:
    kafka = args.brokers == KAFKA
    options = DemoOptions(
        brokers=3 if kafka else args.brokers,
        kafka=kafka,
        produce_rate=args.produce_rate,
        run_dir=args.run_dir,
        keep_running=args.keep_running,
        buckets=args.buckets,
        master=args.master,
        step_timeout_s=args.step_timeout,
        verbose=not args.quiet,
    )
    if not kafka and options.brokers < 4:
        print(f"livectl demo: --brokers must be at least 4 or 'kafka', got {options.brokers}", file=sys.stderr)
        return 2
    if options.produce_rate <= 0:
        print(f"livectl demo: --produce-rate must be above 0, got {options.produce_rate:g}", file=sys.stderr)
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

    demo = make_demo(options, out, stop=stop, hard_stop=hard_stop)
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
            "Start ZooKeeper, a Kafka-protocol broker, N simulated brokers (or three real Kafka brokers and the "
            "controller channel) and the controller (Spark local), run "
            "a scenario (create topics, hard-kill and restart a broker, reassign, preferred election, controlled "
            "shutdown, delete), print what the controller decided, then stop everything it started."
        ),
    )
    p.add_argument(
        "--brokers",
        type=_brokers,
        default=5,
        metavar="N|kafka",
        help="simulated brokers, ids 1..N (at least 4; default 5), or 'kafka': three Apache Kafka 3.9 brokers "
        "(ZooKeeper mode, through livectl channel) with a producer and a consumer running through every step",
    )
    p.add_argument(
        "--produce-rate",
        type=float,
        default=20.0,
        help="with --brokers kafka: records per second the demo's producer writes (default 20)",
    )
    p.add_argument("--run-dir", type=Path, default=DEFAULT_RUN_DIR, help="run folder (default: %(default)s)")
    p.add_argument("--keep-running", action="store_true", help="leave the cluster up after the scenario until Ctrl-C")
    p.add_argument("--buckets", type=int, default=4, help="controller state buckets = shuffle partitions (default 4)")
    p.add_argument("--master", default="local[2]", help="Spark master (default: %(default)s)")
    p.add_argument("--step-timeout", type=float, default=90.0, help="seconds each step may take (default 90)")
    p.add_argument("--quiet", action="store_true", help="print only the steps, not every decision")
    p.set_defaults(func=_cmd_demo)
