"""``python -m streaming``: run the controller job."""

import sys

from streaming.driver.entry import main

sys.exit(main())
