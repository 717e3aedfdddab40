"""``spark-submit streaming/main.py ...``: the controller job under spark-submit."""

import sys

from streaming.driver.entry import main

if __name__ == "__main__":
    sys.exit(main())
