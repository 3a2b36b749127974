"""Understanding one error, in three parts that never import the service or the memory.

`intake` turns message bytes into a redacted `ErrorEvent` and its signature; `code` reads the service's
repository at the deployed commit (sync, jailed file tools, history, the heuristic localiser, citation
checks); `agent` runs the bounded LLM investigation. The shared models sit at this level: `event` (what
intake produces), `report` (what code and agent answer) and `errors`; `cache` is the byte-bounded memo
table every cache of intake uses.
"""

__all__ = ["agent", "cache", "code", "errors", "event", "intake", "report"]
