"""The service's code at the deployed commit: repository sync and worktrees, file tools jailed to the
checkout, git history and blame, the map from frames to files, the heuristic localiser (frames placed in
their code, the code read to decide the blame, clues for files no frame names, the suspect ranking), and
validation of what an analysis cites.

Submodules are listed rather than imported, so importing one of them loads only what it needs.
"""

__all__ = [
    "blame", "burst", "clue", "expression", "filemap", "gitlog", "linemap", "localiser", "mask", "repo", "shape",
    "site", "source", "suspects", "tools", "validate", "value",
]
