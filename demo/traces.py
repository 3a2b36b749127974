"""Real stack traces of the sample services: Python ones from running the code, Java and Go from the source.

Variable parts (ids, coupon codes, addresses) are `@@NAME@@` tokens that `SampleTrace.render` fills per
event, so one captured trace yields thousands of distinct but equally real-looking events.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

APP_ROOT = "/app"
"""Where the services run in their containers: trace paths are rewritten from the build dir to this."""
_SITE_PACKAGES = "/usr/local/lib/python3.11/site-packages"
_TOKEN = re.compile(r"@@([A-Z0-9_]+)@@")


@dataclass(frozen=True, slots=True)
class SampleFrame:
    """One frame as the service's runtime reports it."""

    function: str
    filename: str
    abs_path: str = ""
    module: str = ""
    lineno: int | None = None
    in_app: bool | None = None


@dataclass(frozen=True, slots=True)
class SampleException:
    """One exception of a chain; frames innermost first (frames[0] raised it)."""

    type: str
    value: str
    frames: tuple[SampleFrame, ...]


@dataclass(frozen=True, slots=True)
class SampleTrace:
    """A failure as one commit of a service produces it: the printed trace and the structured chain.

    `chain` is outermost first, root cause last; `culprit_line` is the faulting line of the root cause.
    """

    bug: str
    commit: str
    text: str
    chain: tuple[SampleException, ...]
    culprit_line: int

    def render(self, values: Mapping[str, str]) -> SampleTrace:
        """This trace with every `@@NAME@@` token replaced by `values[NAME]`."""
        def fill(text: str) -> str:
            return _TOKEN.sub(lambda m: values.get(m.group(1), m.group(0)), text)

        chain = tuple(replace(exc, value=fill(exc.value)) for exc in self.chain)
        return replace(self, text=fill(self.text), chain=chain)

    @property
    def root(self) -> SampleException:
        """The root cause."""
        return self.chain[-1]


def line_of(root: Path, path: str, marker: str) -> int:
    """The 1-based line of `path` (relative to `root`) that contains `marker`; the trace points there."""
    for number, line in enumerate((root / path).read_text(encoding="utf-8").splitlines(), start=1):
        if marker in line:
            return number
    raise ValueError(f"{marker!r} not found in {path}")


# --- Python: run the code -------------------------------------------------------------------------------

# Stands in for the web framework, so traces start in site-packages like a real service's do.
_PY_FRAMEWORK = '''"""A tiny request dispatcher: the framework frames of the sample traces."""


def handle_request(handler, payload):
    return _invoke(handler, payload)


def _invoke(handler, payload):
    return handler(payload)
'''

_PY_DRIVER = '''
import json, sys, traceback
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from microweb import app
import importlib

def type_name(exc):
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else cls.__module__ + "." + cls.__qualname__

def chain(exc):
    out = []
    while exc is not None:
        frames = [[f.filename, f.name, f.lineno] for f in traceback.extract_tb(exc.__traceback__)]
        out.append({"type": type_name(exc), "value": str(exc), "frames": frames})
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return out

result = {}
for key, (target, payload) in json.loads(sys.argv[3]).items():
    module, _, function = target.rpartition(".")
    handler = getattr(importlib.import_module(module), function, None)
    if handler is None:
        continue
    try:
        app.handle_request(handler, payload)
    except Exception as exc:
        result[key] = {"text": "".join(traceback.format_exception(exc)), "chain": chain(exc)}
print(json.dumps(result))
'''


def run_python_scenarios(
    root: Path, commit: str, scenarios: Mapping[str, tuple[str, dict[str, object]]],
    culprits: Mapping[str, str],
) -> dict[str, SampleTrace]:
    """Run each scenario (`bug -> ("pkg.module.function", payload)`) against the working tree at `root`.

    Returns the real traceback of every scenario that raised; a scenario that does not fail (or whose
    function does not exist) at this commit is absent. Paths are rewritten to the container's.
    """
    with tempfile.TemporaryDirectory(prefix="logagent-sample-") as tmp:
        site = Path(tmp) / "site-packages"
        (site / "microweb").mkdir(parents=True)
        (site / "microweb" / "__init__.py").write_text("", encoding="utf-8")
        (site / "microweb" / "app.py").write_text(_PY_FRAMEWORK, encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, "-I", "-B", "-c", _PY_DRIVER, str(root), str(site), json.dumps(scenarios)],
            capture_output=True, text=True, timeout=60, check=False, cwd=tmp,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"sample scenarios failed to run: {proc.stderr.strip()[-500:]}")
        raw: dict[str, dict[str, object]] = json.loads(proc.stdout)
        paths = {str(root.resolve()): APP_ROOT, str(root): APP_ROOT, str(site.resolve()): _SITE_PACKAGES,
                 str(site): _SITE_PACKAGES}
    traces = {}
    for bug, captured in raw.items():
        chain = tuple(_python_exception(exc, paths) for exc in captured["chain"])  # type: ignore[attr-defined]
        text = _python_text(str(captured["text"]), paths)
        frame = chain[-1].frames[0]
        if frame.abs_path != f"{APP_ROOT}/{culprits[bug]}" or frame.lineno is None:
            raise RuntimeError(f"scenario {bug} failed outside {culprits[bug]}: {frame}")
        traces[bug] = SampleTrace(bug, commit, text, chain, frame.lineno)
    return traces


def _rewrite(path: str, paths: Mapping[str, str]) -> str:
    for local, remote in sorted(paths.items(), key=lambda kv: -len(kv[0])):
        if path.startswith(local + "/"):
            return remote + path[len(local):]
    return path


def _python_exception(exc: Mapping[str, object], paths: Mapping[str, str]) -> SampleException:
    frames = []
    for filename, function, lineno in exc["frames"]:  # type: ignore[attr-defined]
        if filename.startswith("<"):
            continue  # the driver's own `-c` code, not part of any service
        abs_path = _rewrite(filename, paths)
        in_app = abs_path.startswith(APP_ROOT + "/")
        base = APP_ROOT if in_app else _SITE_PACKAGES
        module = abs_path[len(base) + 1:].removesuffix(".py").replace("/", ".")
        frames.append(SampleFrame(function, abs_path[len(base) + 1:], abs_path, module, lineno, in_app))
    return SampleException(str(exc["type"]), str(exc["value"]), tuple(reversed(frames)))


def _python_text(text: str, paths: Mapping[str, str]) -> str:
    lines = [line for line in text.splitlines() if not line.startswith('  File "<')]
    out = "\n".join(lines)
    for local, remote in sorted(paths.items(), key=lambda kv: -len(kv[0])):
        out = out.replace(local + "/", remote + "/")
    return out


# --- Java: build the trace from the source lines ----------------------------------------------------------

@dataclass(frozen=True, slots=True)
class JavaFrame:
    """`at [jmod/]cls.method(file:line)`; `line` None prints `<generated>` or `Unknown Source`."""

    cls: str
    method: str
    file: str | None
    line: int | None = None
    jmod: str = ""

    def text(self) -> str:
        """The frame as `Throwable.printStackTrace` prints it."""
        prefix = f"{self.jmod}/" if self.jmod else ""
        if self.file is None:
            where = "Unknown Source"
        elif self.line is None:
            where = self.file
        else:
            where = f"{self.file}:{self.line}"
        return f"\tat {prefix}{self.cls}.{self.method}({where})"

    def sample(self) -> SampleFrame:
        """The structured frame a native-shape logger would send (in-app left to the decoder's rules)."""
        return SampleFrame(self.method, self.file or "", "", self.cls, self.line)


@dataclass(frozen=True, slots=True)
class JavaException:
    """One throwable of a Java chain (outermost first), frames innermost first."""

    type: str
    value: str
    frames: tuple[JavaFrame, ...]


def java_trace(bug: str, commit: str, chain: tuple[JavaException, ...], culprit_line: int) -> SampleTrace:
    """The printed trace (`Caused by:`, `... N more`) and structured chain of a Java failure."""
    lines: list[str] = []
    enclosing: tuple[JavaFrame, ...] = ()
    for index, exc in enumerate(chain):
        header = f"{exc.type}: {exc.value}" if exc.value else exc.type
        lines.append(header if index == 0 else f"Caused by: {header}")
        common = _common_tail(exc.frames, enclosing)
        lines.extend(frame.text() for frame in exc.frames[: len(exc.frames) - common])
        if common:
            lines.append(f"\t... {common} more")
        enclosing = exc.frames
    samples = tuple(
        SampleException(exc.type, exc.value, tuple(f.sample() for f in exc.frames)) for exc in chain
    )
    return SampleTrace(bug, commit, "\n".join(lines), samples, culprit_line)


def _common_tail(frames: tuple[JavaFrame, ...], enclosing: tuple[JavaFrame, ...]) -> int:
    count = 0
    while count < min(len(frames), len(enclosing)) and frames[-1 - count] == enclosing[-1 - count]:
        count += 1
    return count


def spring_mvc_frames(commit: str) -> tuple[JavaFrame, ...]:
    """What Spring MVC and Tomcat put below a controller; the accessor number changes with each deploy."""
    accessor = int(commit[:2], 16) % 90 + 10
    return (
        JavaFrame(f"jdk.internal.reflect.GeneratedMethodAccessor{accessor}", "invoke", None),
        JavaFrame("jdk.internal.reflect.DelegatingMethodAccessorImpl", "invoke",
                  "DelegatingMethodAccessorImpl.java", 43, "java.base"),
        JavaFrame("java.lang.reflect.Method", "invoke", "Method.java", 568, "java.base"),
        JavaFrame("org.springframework.web.method.support.InvocableHandlerMethod", "doInvoke",
                  "InvocableHandlerMethod.java", 205),
        JavaFrame("org.springframework.web.method.support.InvocableHandlerMethod", "invokeForRequest",
                  "InvocableHandlerMethod.java", 150),
        JavaFrame("org.springframework.web.servlet.mvc.method.annotation.ServletInvocableHandlerMethod",
                  "invokeAndHandle", "ServletInvocableHandlerMethod.java", 118),
        JavaFrame("org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerAdapter",
                  "invokeHandlerMethod", "RequestMappingHandlerAdapter.java", 884),
        JavaFrame("org.springframework.web.servlet.DispatcherServlet", "doDispatch",
                  "DispatcherServlet.java", 1081),
        JavaFrame("org.springframework.web.servlet.FrameworkServlet", "processRequest",
                  "FrameworkServlet.java", 1011),
        JavaFrame("jakarta.servlet.http.HttpServlet", "service", "HttpServlet.java", 590),
        JavaFrame("org.apache.catalina.core.ApplicationFilterChain", "internalDoFilter",
                  "ApplicationFilterChain.java", 205),
        JavaFrame("org.apache.tomcat.util.threads.TaskThread$WrappingRunnable", "run", "TaskThread.java", 61),
        JavaFrame("java.lang.Thread", "run", "Thread.java", 833, "java.base"),
    )


def cglib_proxy(cls: str, method: str, commit: str) -> JavaFrame:
    """The frame Spring's CGLIB proxy adds; its class suffix changes with each deploy."""
    return JavaFrame(f"{cls}$$EnhancerBySpringCGLIB$${commit[2:10]}", method, "<generated>")


# --- Go: build the panic from the source lines ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class GoFrame:
    """One goroutine frame: `function(args)` and `\\tpath:line +0xoff`."""

    function: str
    args: str
    path: str
    line: int
    offset: str

    def text(self) -> str:
        """The two lines the Go runtime prints for this frame."""
        return f"{self.function}({self.args})\n\t{self.path}:{self.line} +{self.offset}"


def go_panic(bug: str, exc_type: str, commit: str, value: str, frames: tuple[GoFrame, ...], culprit_line: int,
             module_path: str) -> SampleTrace:
    """A Go panic with its goroutine trace; `@@GOROUTINE@@` and the `@@ADDR…@@` tokens vary per event."""
    text = f"panic: {value}\n\ngoroutine @@GOROUTINE@@ [running]:\n" + "\n".join(f.text() for f in frames)
    sample_frames = tuple(
        SampleFrame(f.function, f.path.rsplit("/", 1)[-1], f.path, f.function.rsplit(".", 1)[0], f.line,
                    f.function.startswith(module_path))
        for f in frames
    )
    return SampleTrace(bug, commit, text, (SampleException(exc_type, value, sample_frames),), culprit_line)
