"""``python -m streaming``: run the controller job."""

import sys

from streaming.entry import main

sys.exit(main())
