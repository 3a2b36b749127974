"""Build each bug case as a real git repository and run it to capture the trace it really produces."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from evals.bugs import BugCase

_IDENTITY = ("-c", "user.name=Eval", "-c", "user.email=eval@example.com", "-c", "commit.gpgsign=false")
_RUN_TIMEOUT_S = 60


class CaseError(RuntimeError):
    """A case could not be built or did not fail the way it must."""


@dataclass(frozen=True)
class BuiltCase:
    """A case's repository at its buggy commit, the captured trace, and the truth as path and line."""

    case: BugCase
    repo: Path
    commit: str
    trace: str
    culprit_line: int

    def event_json(self) -> bytes:
        """The error as a service would log it (ECS with the raw trace), at the deployed commit."""
        first = self.trace.strip().splitlines()
        header = first[-1] if self.case.language == "python" else first[0]
        exc_type, _, message = header.partition(": ")
        return orjson.dumps({
            "@timestamp": "2024-06-01T12:00:00.000Z", "log.level": "error", "ecs.version": "1.6.0",
            "service.name": self.case.name, "service.version": self.commit,
            "message": f"request failed: {message}"[:200], "error.type": exc_type.strip(),
            "error.message": message, "error.stack_trace": self.trace,
        })


def available(language: str) -> bool:
    """Whether this machine can run `language`'s cases (node, or javac and java, on PATH)."""
    if language == "python":
        return True
    if language == "node":
        return shutil.which("node") is not None
    return shutil.which("javac") is not None and shutil.which("java") is not None


def _git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", *_IDENTITY, *args], cwd=repo, capture_output=True, text=True, check=True)
    return result.stdout.strip()


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def build(case: BugCase, workdir: Path) -> BuiltCase:
    """Commit the healthy code, then the bug; run the buggy program and keep the trace it prints."""
    repo = workdir / case.name
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _write(repo, case.files)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "Initial version")
    _write(repo, case.bug)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"Refactor {', '.join(sorted(case.bug))}")
    commit = _git(repo, "rev-parse", "HEAD")
    trace = _run(case, repo, workdir)
    lines = (repo / case.culprit_path).read_text().splitlines()
    line = next((i for i, text in enumerate(lines, 1) if case.culprit_snippet in text), None)
    if line is None:
        raise CaseError(f"{case.name}: culprit snippet not found in {case.culprit_path}")
    return BuiltCase(case, repo, commit, trace, line)


def _run(case: BugCase, repo: Path, workdir: Path) -> str:
    if case.language == "python":
        argv = [sys.executable, "-m", "app"]
    elif case.language == "node":
        argv = ["node", "src/main.js"]
    else:
        classes = workdir / f"{case.name}-classes"  # outside the repository, like a build directory
        sources = [str(p) for p in sorted((repo / "src").rglob("*.java"))]
        subprocess.run(["javac", "-g", "-d", str(classes), *sources], check=True, capture_output=True,
                       timeout=_RUN_TIMEOUT_S)
        argv = ["java", "-cp", str(classes), "com.acme.Main", *case.argv]
    started = time.monotonic()
    result = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=_RUN_TIMEOUT_S, check=False)
    if result.returncode == 0:
        raise CaseError(f"{case.name}: the buggy program did not fail")
    trace = result.stderr.strip()
    if case.language == "python":
        trace = trace[trace.index("Traceback (most recent call last):"):]
    if not trace or time.monotonic() - started > _RUN_TIMEOUT_S:
        raise CaseError(f"{case.name}: no trace captured")
    return trace
