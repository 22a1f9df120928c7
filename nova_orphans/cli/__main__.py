"""``python -m nova_orphans.cli``."""

import sys

from nova_orphans.cli import main

sys.exit(main())
