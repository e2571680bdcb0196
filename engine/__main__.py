"""`python -m engine` is the `coop` CLI."""

import sys

from engine.cli import main

sys.exit(main())
