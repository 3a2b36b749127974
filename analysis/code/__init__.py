"""The service's code at the deployed commit: repository sync and worktrees, file tools jailed to the
checkout, git history and blame, the map from frames to files, the heuristic localiser with its suspect
ranking, and validation of what an analysis cites.

Submodules are listed rather than imported, so importing one of them loads only what it needs.
"""

__all__ = ["filemap", "gitlog", "localiser", "repo", "suspects", "tools", "validate"]
