"""``python -m edge.monitor``: the same as ``vsense-edge monitor``."""

import sys

from edge.monitor.cli import main

sys.exit(main())
