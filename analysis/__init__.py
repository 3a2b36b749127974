"""Understanding one error, in three parts that never import the service or the memory.

`intake` turns message bytes into a redacted `ErrorEvent` and its signature; `code` reads the service's
repository at the deployed commit (sync, jailed file tools, history, the heuristic localiser, citation
checks); `agent` runs the bounded LLM investigation. The shared models sit at this level: `event` (what
intake produces), `report` (what code and agent answer) and `errors`.
"""

__all__ = ["agent", "code", "errors", "event", "intake", "report"]
