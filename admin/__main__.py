"""``python -m admin COMMAND ...``: the admin commands without the ``livectl`` entry point."""

from __future__ import annotations

import sys

from admin.cli import main

if __name__ == "__main__":
    sys.exit(main())
