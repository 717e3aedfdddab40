"""The controller query's source options, and its preparation ahead of the query's start (the source loaded in a
background thread, then the warm-up), with a fake session: no Spark."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from streaming.query.pipeline import PreparedSource, SourceAhead, SourceStart, StartTimes, source_options
from streaming.settings import Settings
from streaming.source.kafka_source import KafkaDataSource
from streaming.source.options import SOURCE_NAME, SourceOptions

pytestmark = pytest.mark.unit


def _settings(*overrides: str) -> Settings:
    return Settings().with_overrides(
        ["bootstrap_servers=b:9", "admin_topic=adm", "broker_events_topic=ev", "max_records_per_batch=77", *overrides]
    )


def test_source_options_of_a_new_checkpoint_and_behind_the_failover_barrier() -> None:
    s = _settings(
        "starting_offsets=latest",
        "kafka_security_protocol=SSL",
        "fail_on_data_loss=false",
        "sink_retry_timeout_ms=9000",
    )
    new = source_options(s)
    assert new == {
        "bootstrap_servers": "b:9",
        "topics": "adm,ev",
        "starting_offsets": "latest",
        "max_records_per_batch": "77",
        "fail_on_data_loss": "false",
        "unreachable_timeout_ms": "9000",
        "kafka.security.protocol": "SSL",
    }
    assert source_options(s, SourceStart()) == new
    barrier = source_options(s, SourceStart(starting_offsets='{"ev": {"0": 4}}', barrier_epoch=7, barrier_path="/c/f"))
    assert barrier == {
        **new,
        "starting_offsets": '{"ev": {"0": 4}}',
        "barrier_topic": "ev",
        "barrier_epoch": "7",
        "barrier_path": "/c/f",
    }
    # what the source makes of them
    parsed = SourceOptions.parse(barrier)
    assert (parsed.topics, parsed.barrier_topic, parsed.barrier_epoch, parsed.barrier_path) == (
        ("adm", "ev"),
        "ev",
        7,
        "/c/f",
    )
    assert parsed.starting_positions == (("ev", 0, 4),) and not parsed.fail_on_data_loss
    assert parsed.unreachable_timeout_ms == 9000
    assert dict(parsed.security) == {"security.protocol": "SSL"}


class _Reader:
    def __init__(self, session: _FakeSession, fmt: str) -> None:
        self.session, self.fmt, self.options = session, fmt, dict[str, str]()

    def option(self, name: str, value: str) -> _Reader:
        self.options[name] = value
        return self

    def load(self) -> Any:
        self.session.calls.append(("load", self.fmt, dict(self.options)))
        if self.session.fail_load:
            raise RuntimeError("no Python planner today\nsecond line")
        return ("frame", self.fmt)


class _FakeSession:
    """The calls the source's preparation makes on a SparkSession, recorded in order."""

    def __init__(self, *, fail_load: bool = False) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.registered, self.fail_load = False, fail_load
        session = self

        class _DataSource:
            def register(self, cls: type[KafkaDataSource]) -> None:
                session.calls.append(("register", cls.name()))
                session.registered = True

        class _ReadStream:
            def format(self, fmt: str) -> _Reader:
                return _Reader(session, fmt)

        self.dataSource = _DataSource()
        self.readStream = _ReadStream()


def test_the_source_is_registered_once_and_loaded_ahead_then_the_warmup_starts() -> None:
    spark = _FakeSession()
    s = _settings()
    beside = threading.Event()

    def then() -> None:
        spark.calls.append(("then",))

    ahead = SourceAhead(spark, s, then=then, beside=beside.set).start()
    prepared = ahead.result(timeout=10)
    ahead.thread.join(10)
    assert beside.wait(10)
    assert isinstance(prepared, PreparedSource)
    assert prepared.frame == ("frame", SOURCE_NAME) and prepared.options == source_options(s)
    assert "source registered" in prepared.phases and "source loaded" in prepared.phases
    # registered, loaded with the options, then the warm-up
    assert spark.calls == [
        ("register", SOURCE_NAME),
        ("load", SOURCE_NAME, source_options(s)),
        ("then",),
    ]


def test_a_source_that_cannot_be_prepared_leaves_the_query_to_load_its_own_and_still_warms() -> None:
    spark = _FakeSession(fail_load=True)
    warmed = threading.Event()
    ahead = SourceAhead(spark, _settings(), then=warmed.set).start()
    assert ahead.result(timeout=10) is None
    assert warmed.wait(10)
    assert [c[0] for c in spark.calls] == ["register", "load"]


def test_a_session_gets_the_source_registered_once() -> None:
    from streaming.query.pipeline import register_source

    spark, other = _FakeSession(), _FakeSession()
    register_source(spark)
    register_source(spark)  # a second registration would only make Spark warn that it replaced the first
    register_source(other)
    assert spark.calls == [("register", SOURCE_NAME)] and other.calls == [("register", SOURCE_NAME)]


def test_start_times_name_each_phase_in_order() -> None:
    times = StartTimes()
    times.lap("source registered")
    times.lap("plan built")
    assert [name for name, _ in times.phases] == ["source registered", "plan built"]
    assert all(seconds >= 0 for _, seconds in times.phases)
    assert str(times).startswith("source registered ") and ", plan built " in str(times)


class _Prepared:
    """A :class:`SourceAhead` as the rehearsal sees it: its prepared source, or ``None``."""

    def __init__(self, prepared: PreparedSource | None) -> None:
        self.prepared = prepared
        self.asked = threading.Event()

    def result(self, timeout: float = 120.0) -> PreparedSource | None:
        self.asked.set()
        return self.prepared


def test_no_plan_is_rehearsed_without_a_prepared_source(caplog: pytest.LogCaptureFixture) -> None:
    from streaming.query.pipeline import rehearse_in_background

    source = _Prepared(None)
    with caplog.at_level("INFO", logger="livectl.query"):
        rehearse_in_background(object(), _settings(), source).join(10)  # type: ignore[arg-type]
    assert source.asked.is_set()
    assert "rehearsed" not in caplog.text  # nothing built: loading a source would start planner processes


def test_a_rehearsal_that_fails_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    from streaming.query.pipeline import rehearse_in_background

    prepared = PreparedSource(source_options(_settings()), frame=None, seconds=0.0)
    with caplog.at_level("INFO", logger="livectl.query"):
        thread = rehearse_in_background(object(), _settings(), _Prepared(prepared))  # type: ignore[arg-type]
        thread.join(10)
    assert not thread.is_alive()
    assert "query plan not rehearsed: " in caplog.text
