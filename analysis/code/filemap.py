"""Map stack frames to files of a checkout: path suffixes, Java/Kotlin packages, Python modules, Go packages.

Pure: `FileIndex` is built from a list of repo-relative paths (`FileIndex.build` walks a checkout once).
A frame that maps to a repository file is in-app, whatever the event said.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from analysis.event import Frame

_SCHEMES = re.compile(r"^(?:webpack-internal:///|webpack:///?|file:///?|app:///?|async\s+)", re.IGNORECASE)
_LIBRARY_MARKERS = (
    "site-packages/",
    "dist-packages/",
    "node_modules/",
    "/usr/lib/",
    "/usr/local/lib/",
    "go/pkg/mod/",
    "/usr/local/go/src/",
    "/lib/python",
    "<frozen",
    "node:",
    "<anonymous>",
    "<string>",
    "internal/modules/",
    "java.base/",
)
_JVM_SOURCE = (".java", ".kt", ".kts", ".scala", ".groovy")
_TEST_PATH = re.compile(
    r"(^|/)(tests?|__tests__|spec|specs|testdata|src/test|src/it)/"
    r"|(^|/)test_[^/]*\.py$|_test\.(py|go)$|(^|/)conftest\.py$"
    r"|(Test|Tests|Spec|IT)\.(java|kt|scala|groovy)$|\.(test|spec)\.[jt]sx?$",
)
_GENERATED_PATH = re.compile(
    r"(^|/)(generated|gen|generated-sources|__generated__)/|\.pb\.go$|_pb2(_grpc)?\.pyi?$"
    r"|\.(generated|gen)\.\w+$|_generated\.\w+$|(^|/)zz_generated[^/]*\.go$|_string\.go$|\.min\.js$",
)


def is_test_path(path: str) -> bool:
    """Whether a repo-relative path is test code (never the culprit)."""
    return bool(_TEST_PATH.search(path))


def is_generated_path(path: str) -> bool:
    """Whether a repo-relative path is generated code (never the culprit)."""
    return bool(_GENERATED_PATH.search(path))


@dataclass(frozen=True, slots=True)
class FileMatch:
    """Where a frame's file is in the repository; `strength` counts matching trailing path parts."""

    path: str
    strength: int
    ambiguous: bool


def _clean(path: str) -> str:
    text = path.strip().replace("\\", "/")
    text = _SCHEMES.sub("", text)
    text = re.sub(r"[?#].*$", "", text)  # webpack query strings and hashes
    return re.sub(r":\d+(?::\d+)?$", "", text)  # a trailing :line:col some shapes leave on the name


def frame_paths(frame: Frame) -> list[tuple[str, ...]]:
    """Candidate path-part tuples for a frame, best evidence first; empty for library frames."""
    candidates: list[tuple[str, ...]] = []
    for raw in (frame.abs_path, frame.filename):
        text = _clean(raw)
        if not text:
            continue
        if any(marker in text for marker in _LIBRARY_MARKERS):
            return []
        parts = tuple(p for p in text.split("/") if p not in ("", ".", ".."))
        if parts and parts not in candidates:
            candidates.append(parts)
    basename = candidates[0][-1] if candidates else ""
    dotted = frame.module or frame.function
    if basename.endswith(_JVM_SOURCE):
        package = _jvm_package(dotted)
        if package and basename:
            candidates.insert(0, (*package, basename))
    elif basename.endswith(".go") or "/" in frame.function:
        # Parsers either keep the import path in `module` (function "(*S).Charge") or in the function.
        qualified = f"{frame.module}.{frame.function}" if frame.module else frame.function
        package_path = _go_package(qualified)
        if package_path and basename:
            candidates.insert(0, (*package_path, basename))
    elif frame.module and not basename.endswith((".js", ".ts", ".mjs", ".cjs", ".jsx", ".tsx")):
        module_parts = tuple(p for p in frame.module.split(".") if p)
        if module_parts and re.fullmatch(r"[\w.]+", frame.module):
            candidates.append((*module_parts[:-1], module_parts[-1] + ".py"))
    return candidates


def _jvm_package(dotted: str) -> tuple[str, ...]:
    """Leading lower-case parts of a JVM name: the package (`com.acme.Foo.bar` → com, acme)."""
    package: list[str] = []
    for part in dotted.split("."):
        if not part or not part[0].islower() or "$" in part or "(" in part:
            break
        package.append(part)
    # A dotted name with no class part (all lower case) ends with a method name, not a package.
    if len(package) == len(dotted.split(".")):
        package = package[:-2]
    return tuple(package)


def _go_package(function: str) -> tuple[str, ...]:
    """Import path of a Go function name (`github.com/acme/svc/internal/pay.(*S).Charge` → its parts)."""
    if "/" not in function:
        head = function.split(".", 1)[0]
        return (head,) if head and head != "main" else ()
    directory, _, last = function.rpartition("/")
    package = last.split(".", 1)[0]
    return tuple(p for p in directory.split("/") if p) + ((package,) if package else ())


def _regular_inside(entry: os.DirEntry[str], top: Path) -> bool:
    """Whether a symlink leads to a regular file inside `top` (not out of it, not into .git, no loop)."""
    try:
        real = Path(entry.path).resolve(strict=True)
        return real.is_relative_to(top) and ".git" not in real.relative_to(top).parts and real.is_file()
    except (OSError, RuntimeError):  # dangling, unreadable, a loop
        return False


def _suffix_len(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


class FileIndex:
    """Repo files by basename, for mapping frames to files; build once per checkout."""

    def __init__(self, paths: Iterable[str]) -> None:
        self._by_name: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        for path in paths:
            parts = tuple(path.split("/"))
            self._by_name[parts[-1]].append(parts)
        for entries in self._by_name.values():
            entries.sort()

    @classmethod
    def build(cls, root: Path, skip_dirs: Iterable[str], max_files: int = 200_000,
              visible: Callable[[str], bool] | None = None) -> FileIndex:
        """Index every regular file under `root` except skipped (vendored, build) directories and `.git`
        (and those `visible` does not show: a working tree's untracked ones, `jail.tracked_only`).

        A symlink counts when it leads to a regular file inside `root`: one leading outside (to
        /etc/passwd), a loop, a FIFO, socket or device is never a suspect. Symlinked directories are not
        walked.
        """
        skip = set(skip_dirs) | {".git"}
        top = root.resolve()
        paths: list[str] = []
        pending = [(top, "")]
        while pending and len(paths) < max_files:
            directory, prefix = pending.pop()
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError:  # unreadable: nothing of it to index
                continue
            for entry in entries:
                if visible is not None and not visible(prefix + entry.name):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in skip:
                        pending.append((Path(entry.path), f"{prefix}{entry.name}/"))
                elif entry.is_file(follow_symlinks=False) or (entry.is_symlink() and _regular_inside(entry, top)):
                    paths.append(prefix + entry.name)
        return cls(paths[:max_files])

    def paths_ending(self, tail: tuple[str, ...]) -> list[str]:
        """Repository paths whose last parts are `tail` (`("app", "rates.py")` → app/rates.py, src/app/rates.py)."""
        if not tail:
            return []
        return ["/".join(parts) for parts in self._by_name.get(tail[-1], []) if parts[-len(tail) :] == tail]

    def __contains__(self, path: str) -> bool:
        parts = tuple(path.split("/"))
        return parts in self._by_name.get(parts[-1], [])

    def locate(self, frame: Frame) -> FileMatch | None:
        """The repository file a frame ran in, or None (library code, or a file this commit lacks).

        A match must cover the whole frame path, the whole repo path, or at least two trailing parts,
        so `/usr/lib/x/util.py` does not land on some `util.py` of the repository.
        """
        best: FileMatch | None = None
        candidates = frame_paths(frame)
        basename = candidates[0][-1] if candidates else ""
        jvm = basename.endswith(_JVM_SOURCE) and len(candidates[0]) > 1
        if jvm:
            # A JVM frame names its package: a file of the same name elsewhere is another class.
            candidates = [c for c in candidates if len(c) > 1]
        for parts in candidates:
            scored: list[tuple[int, bool, int, tuple[str, ...]]] = []
            for repo_parts in self._by_name.get(parts[-1], []):
                n = _suffix_len(parts, repo_parts)
                if (n >= 2 or n == len(parts) or n == len(repo_parts)) and not (jvm and len(parts) > 2 and n < 2):
                    path = "/".join(repo_parts)
                    demoted = is_test_path(path) or is_generated_path(path)
                    scored.append((n, not demoted, -len(repo_parts), repo_parts))
            if not scored:
                continue
            scored.sort(reverse=True)
            top = scored[0]
            ambiguous = len(scored) > 1 and scored[1][0] == top[0]
            match = FileMatch("/".join(top[3]), top[0], ambiguous)
            if best is None or (match.strength, not match.ambiguous) > (best.strength, not best.ambiguous):
                best = match
        return best
