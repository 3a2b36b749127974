"""`logagent demo`: an embedded tansu broker, sample services built as real git repositories with real
bugs, the traffic they produce in all four input shapes, and a run of the real service over it.

The service never imports this package; the CLI loads it only for the `demo` subcommand.
"""

__all__ = ["broker", "run", "services", "sources", "stream", "traces"]
