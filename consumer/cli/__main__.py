"""`python -m consumer.cli`: the same entry point as the `logagent` script."""

from consumer.cli import main

raise SystemExit(main())
