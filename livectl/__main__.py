import sys

from livectl.cli import main

sys.exit(main())
