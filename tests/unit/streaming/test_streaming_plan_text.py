"""A plan's text from ``DataFrame.explain`` (:func:`streaming.runtime.plan_text.explain_text`): what the calling
thread prints is captured, what other threads print meanwhile still reaches stdout."""

from __future__ import annotations

import sys
import threading

import pytest

from streaming.runtime.plan_text import explain_text

pytestmark = pytest.mark.unit


class _Frame:
    """Prints its plan as PySpark's ``DataFrame.explain`` does; while it explains, another thread prints."""

    def __init__(self) -> None:
        self.modes: list[str] = []

    def explain(self, mode: str) -> None:
        self.modes.append(mode)
        other = threading.Thread(target=print, args=("another thread's line",))
        other.start()
        other.join()
        print(f"== Physical Plan ==\nFound 2 WholeStageCodegen subtrees ({mode})")


def test_the_plan_is_captured_and_other_threads_still_print(capsys: pytest.CaptureFixture[str]) -> None:
    stdout = sys.stdout
    frame = _Frame()
    text = explain_text(frame, "codegen")
    assert frame.modes == ["codegen"]
    assert text == "== Physical Plan ==\nFound 2 WholeStageCodegen subtrees (codegen)\n"
    assert capsys.readouterr().out == "another thread's line\n"
    assert sys.stdout is stdout


def test_stdout_is_restored_when_explain_fails() -> None:
    class Failing:
        def explain(self, mode: str) -> None:
            raise RuntimeError(f"cannot explain {mode}")

    stdout = sys.stdout
    with pytest.raises(RuntimeError, match="cannot explain simple"):
        explain_text(Failing())
    assert sys.stdout is stdout
