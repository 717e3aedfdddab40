"""The product reaches Spark only through PySpark's public API: no private name of PySpark (the py4j handles
``_jvm``, ``_jsc``, ``_jdf``, ``_jsparkSession``…, ``SparkContext._gateway``, ``_ensure_initialized``, any
``SparkContext._…`` or ``SparkSession._…``) and no py4j import, in any of livectl's packages. Names are found
in the syntax tree (attributes, ``getattr`` strings, imports), so docstrings that mention them do not count.
What replaced each former use: ``docs/decisions/2026-12-06-no-private-internals.md``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
PRODUCT = ("streaming", "sinks", "admin", "livectl", "simbrokers", "core", "channel")
#: PySpark's handles on JVM objects and its gateway's private entry points
PRIVATE = frozenset(
    {
        "_jvm",
        "_jsc",
        "_jdf",
        "_jsparkSession",
        "_jconf",
        "_jrdd",
        "_jreader",
        "_jwrite",
        "_jc",
        "_gateway",
        "_ensure_initialized",
        # a captured exception's JVM trace: str() carries it when spark.sql.pyspark.jvmStacktrace.enabled is set
        "_stackTrace",
    }
)
#: PySpark classes whose private members are off limits whatever their name
CLASSES = frozenset({"SparkContext", "SparkSession", "SparkConf", "DataFrame", "RDD"})


def private_uses(source: str, filename: str = "<source>") -> set[str]:
    """The private PySpark names and py4j imports ``source`` uses."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute):
            if node.attr in PRIVATE:
                found.add(node.attr)
            if isinstance(node.value, ast.Name) and node.value.id in CLASSES and node.attr.startswith("_"):
                found.add(f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in PRIVATE:
            found.add(node.value)  # getattr(context, "_gateway")
        elif isinstance(node, ast.Import | ast.ImportFrom) and "py4j" in _top_modules(node):
            found.add("import py4j")
    return found


def _top_modules(node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.ImportFrom):
        return {(node.module or "").split(".")[0]}
    return {alias.name.split(".")[0] for alias in node.names}


def _product_files() -> list[Path]:
    return [path for package in PRODUCT for path in sorted((REPO / package).rglob("*.py"))]


def _product_uses() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in _product_files():
        uses = private_uses(path.read_text(), str(path))
        if uses:
            out[str(path.relative_to(REPO))] = uses
    return out


def test_the_product_uses_no_private_pyspark_name() -> None:
    assert _product_uses() == {}
    # the walk saw the product: a wrong root or package list would pass the check above with nothing read
    assert len(_product_files()) > 100


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("spark.sparkContext._jvm.System.getenv('X')", {"_jvm"}),
        ("frame._jdf.queryExecution()", {"_jdf"}),
        ("spark._jsparkSession.sessionState()", {"_jsparkSession"}),
        ("gateway = getattr(sc, '_gateway', None)", {"_gateway"}),
        ("SparkContext._ensure_initialized()", {"SparkContext._ensure_initialized", "_ensure_initialized"}),
        ("SparkContext._active_spark_context", {"SparkContext._active_spark_context"}),
        ("from py4j.java_gateway import JavaClass", {"import py4j"}),
        ("import py4j.protocol", {"import py4j"}),
        ("spark.sparkContext.statusTracker().getActiveJobsIds()", set()),
        ("'''mentions sc._jvm in a docstring'''", set()),
        ("self._jobs = []", set()),
        ("getattr(exc, '_stackTrace', None)", {"_stackTrace"}),
    ],
)
def test_the_check_sees_private_names_and_only_them(line: str, found: set[str]) -> None:
    assert private_uses(line) == found
