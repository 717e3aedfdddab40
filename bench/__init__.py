"""livectl's benchmarks: one entry point, ``python -m bench NAME [args]`` (``python -m bench --list`` names
them), over one shared harness (:mod:`bench.harness`) that the end-to-end tests import too. What each
measures and the current figures: ``bench/README.md``. Not part of the product: the product never imports
it (an import-linter contract), and the wheel does not ship it."""
