"""What the file tools return and how they are bounded: results, limits, output caps and the JSON schemas
the model is given. The tools themselves are in `analysis.code.tools`, the jail in `analysis.code.jail`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field

__all__ = ["FileExcerpt", "GrepMatch", "Status", "ToolLimits", "ToolResult", "cap", "ok", "tool_specs"]

Status = Literal["ok", "no_data", "error"]
T = TypeVar("T")

_DEFAULT_EXTENSIONS = (
    "java",
    "kt",
    "scala",
    "py",
    "ts",
    "tsx",
    "js",
    "go",
    "rb",
    "cs",
    "xml",
    "yml",
    "yaml",
    "properties",
    "toml",
    "json",
)
_DEFAULT_SKIP_DIRS = (
    "node_modules",
    "vendor",
    "target",
    "build",
    "dist",
    ".venv",
    "venv",
    "__pycache__",
    ".gradle",
    ".idea",
    ".git",
    ".mypy_cache",
    ".pytest_cache",
    ".tox",
    "bower_components",
    "out",
    ".next",
    "coverage",
)
@dataclass(frozen=True, slots=True)
class ToolResult(Generic[T]):
    """What a tool call returns: `output` is the capped text for the model, `data` the structured result."""

    status: Status
    output: str
    data: T | None = None


@dataclass(frozen=True, slots=True)
class GrepMatch:
    """One matching line."""

    path: str
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class FileExcerpt:
    """Lines `start_line`..`end_line` (1-based, inclusive) of a file of `total_lines` lines."""

    path: str
    start_line: int
    end_line: int
    total_lines: int
    lines: tuple[str, ...]


class ToolLimits(BaseModel):
    """Caps that keep tool output small and tool time bounded."""

    max_file_chars: int = 20_000
    max_file_bytes: int = Field(2_000_000, description="Larger files are refused (minified bundles, dumps).")
    max_grep_files: int = Field(200, description="Files with matches listed at most.")
    max_grep_lines: int = Field(100, description="Matching lines listed at most.")
    max_scan_files: int = Field(20_000, description="Files grep looks at before giving up.")
    max_output_chars: int = 8_000
    max_line_chars: int = 300
    max_list_entries: int = 500
    max_log_entries: int = 10
    regex_timeout_s: float = Field(1.0, description="Time budget of one grep call across all files.")
    git_timeout_s: float = 10.0
    extensions: tuple[str, ...] = _DEFAULT_EXTENSIONS
    skip_dirs: tuple[str, ...] = _DEFAULT_SKIP_DIRS


def ok(output: str, data: T, limit: int) -> ToolResult[T]:
    return ToolResult("ok", cap(output, limit), data)


def cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    cut = cut if cut > 0 else limit
    return text[:cut] + f"\n[output truncated at {cut} of {len(text)} characters]"


def tool_specs() -> list[dict[str, Any]]:
    """Name, description and JSON-schema parameters of each tool, in the order of `as_callables`."""

    def obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": required}

    path = {"type": "string", "description": "Path relative to the repository root, e.g. 'src/app.py'."}
    line = {"type": "integer", "minimum": 1}
    return [
        {
            "name": "grep_files",
            "description": "Search source and config files for a regular expression; returns sorted "
            "'path:line: text' lines (each line searched on its own; lines over 65,536 characters are not).",
            "parameters": obj(
                {
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "path": {**path, "description": "Directory or file to search (default: all)."},
                    "file_extension": {
                        "type": "string",
                        "description": "Only files ending with this extension, e.g. 'py'.",
                    },
                },
                ["pattern"],
            ),
        },
        {
            "name": "read_file",
            "description": "Read a file's numbered lines, optionally only start_line..end_line.",
            "parameters": obj({"path": path, "start_line": line, "end_line": line}, ["path"]),
        },
        {
            "name": "list_directory",
            "description": "List a directory of the repository (directories end with '/').",
            "parameters": obj({"path": {**path, "description": "Directory (default: repository root)."}}, []),
        },
        {
            "name": "git_log",
            "description": "Recent commits that touched a file or directory: sha, date, author, summary.",
            "parameters": obj({"path": path}, ["path"]),
        },
        {
            "name": "blame",
            "description": "The commit that last changed each line of start_line..end_line of a file.",
            "parameters": obj(
                {"path": path, "start_line": line, "end_line": line}, ["path", "start_line", "end_line"]
            ),
        },
    ]
