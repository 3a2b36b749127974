"""Synthetic but realistic stack traces in Java, Python, Node.js and Go, for the benchmark workload.

A `Failure` is one bug: a language, an exception, a message template with variable ids, and the frames
of the code path that raises it. `render_trace` turns it into the text a runtime prints, with what
really varies between occurrences varied: ids in the message, proxy and accessor numbers per JVM,
goroutine ids and argument addresses per panic, line numbers per deployed commit.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Language = Literal["java", "python", "node", "go", "message"]

DOMAINS = ("orders", "billing", "inventory", "auth", "shipping", "catalog", "search", "payments", "users")
_ROLES = ("Service", "Repository", "Controller", "Client", "Mapper", "Validator", "Handler", "Job")
_VERBS = ("capture", "place", "refund", "load", "save", "resolve", "validate", "sync", "render", "apply")
_NOUNS = ("Order", "Invoice", "Cart", "Token", "Shipment", "Item", "Account", "Quota", "Price", "Session")

_JAVA_ERRORS = (
    ("java.lang.NullPointerException", 'Cannot invoke "{cls}.getId()" because "{var}" is null'),
    ("java.lang.IllegalStateException", "{noun} {id} is not in state PAID"),
    ("java.lang.IllegalArgumentException", "Invalid {noun_l} id: {id}"),
    ("org.springframework.dao.DataIntegrityViolationException", "duplicate key value violates unique "
     'constraint "{noun_l}_pkey" Detail: Key (id)=({id}) already exists.'),
    ("java.util.concurrent.TimeoutException", "Timed out after {ms} ms waiting for {noun_l}-{id}"),
    ("java.lang.ArrayIndexOutOfBoundsException", "Index {small} out of bounds for length {small}"),
)
_JAVA_CAUSES = (
    ("org.postgresql.util.PSQLException", "ERROR: deadlock detected Detail: Process {id} waits for lock"),
    ("java.net.SocketTimeoutException", "Read timed out"),
    ("java.net.ConnectException", "Connection refused: {ip}:5432"),
)
_JAVA_FRAMEWORK = (
    "org.springframework.web.servlet.FrameworkServlet.processRequest(FrameworkServlet.java:1014)",
    "org.springframework.web.servlet.DispatcherServlet.doDispatch(DispatcherServlet.java:1089)",
    "org.springframework.web.servlet.DispatcherServlet.doService(DispatcherServlet.java:979)",
    "jakarta.servlet.http.HttpServlet.service(HttpServlet.java:590)",
    "org.apache.catalina.core.ApplicationFilterChain.internalDoFilter(ApplicationFilterChain.java:206)",
    "org.apache.catalina.core.ApplicationFilterChain.doFilter(ApplicationFilterChain.java:150)",
    "org.springframework.web.filter.OncePerRequestFilter.doFilter(OncePerRequestFilter.java:116)",
    "org.springframework.aop.framework.ReflectiveMethodInvocation.proceed(ReflectiveMethodInvocation.java:184)",
    "org.springframework.transaction.interceptor.TransactionInterceptor.invoke(TransactionInterceptor.java:119)",
    "org.apache.catalina.core.StandardWrapperValve.invoke(StandardWrapperValve.java:167)",
    "org.apache.coyote.http11.Http11Processor.service(Http11Processor.java:391)",
    "org.apache.tomcat.util.threads.ThreadPoolExecutor$Worker.run(ThreadPoolExecutor.java:659)",
)
_PY_ERRORS = (
    ("KeyError", "'{noun_l}_{id}'"),
    ("AttributeError", "'NoneType' object has no attribute '{verb}'"),
    ("ValueError", "invalid literal for int() with base 10: '{id}x'"),
    ("sqlalchemy.exc.IntegrityError", '(psycopg2.errors.UniqueViolation) duplicate key value violates '
     'unique constraint "{noun_l}_pkey" DETAIL: Key (id)=({id}) already exists.'),
    ("TimeoutError", "timed out after {ms} ms calling {ip}"),
)
_PY_FRAMEWORK = (
    ('/usr/local/lib/python3.11/site-packages/django/core/handlers/exception.py', 55, "inner",
     "response = get_response(request)"),
    ('/usr/local/lib/python3.11/site-packages/django/core/handlers/base.py', 197, "_get_response",
     "response = wrapped_callback(request, *callback_args, **callback_kwargs)"),
    ('/usr/local/lib/python3.11/site-packages/django/views/decorators/csrf.py', 65, "_view_wrapper",
     "return view_func(request, *args, **kwargs)"),
    ('/usr/local/lib/python3.11/site-packages/rest_framework/views.py', 506, "dispatch",
     "response = handler(request, *args, **kwargs)"),
    ('/usr/local/lib/python3.11/site-packages/django/utils/deprecation.py', 134, "__call__",
     "response = response or self.get_response(request)"),
)
_NODE_ERRORS = (
    ("TypeError", "Cannot read properties of undefined (reading '{verb}')"),
    ("Error", "connect ECONNREFUSED {ip}:6379"),
    ("RangeError", "Invalid array length {id}"),
    ("SyntaxError", "Unexpected token < in JSON at position {small}"),
)
_NODE_FRAMEWORK = (
    "Layer.handle [as handle_request] (/app/node_modules/express/lib/router/layer.js:95:5)",
    "next (/app/node_modules/express/lib/router/route.js:149:13)",
    "Route.dispatch (/app/node_modules/express/lib/router/route.js:119:3)",
    "/app/node_modules/express/lib/router/index.js:284:15",
    "Function.process_params (/app/node_modules/express/lib/router/index.js:346:12)",
    "process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
)
_GO_PANICS = (
    "runtime error: invalid memory address or nil pointer dereference",
    "runtime error: index out of range [{small}] with length {small}",
    "assignment to entry in nil map",
)
_GO_FRAMEWORK = (
    ("net/http.HandlerFunc.ServeHTTP", "/usr/local/go/src/net/http/server.go", 2136),
    ("github.com/go-chi/chi/v5.(*Mux).routeHTTP", "/go/pkg/mod/github.com/go-chi/chi/v5@v5.0.12/mux.go", 444),
    ("github.com/go-chi/chi/v5/middleware.Recoverer.func1",
     "/go/pkg/mod/github.com/go-chi/chi/v5@v5.0.12/middleware/recoverer.go", 45),
    ("github.com/go-chi/chi/v5/middleware.RequestID.func1",
     "/go/pkg/mod/github.com/go-chi/chi/v5@v5.0.12/middleware/request_id.go", 76),
    ("net/http.serverHandler.ServeHTTP", "/usr/local/go/src/net/http/server.go", 3137),
)
_MESSAGES = (
    "connection to {ip}:5432 refused after {small} retries (request {hex})",
    "upstream {noun_l}-api returned 503 for {noun_l} {id} in {ms} ms",
    "failed to {verb} {noun_l} {id}: context deadline exceeded",
    "rate limit exceeded for tenant t-{small} on /v1/{noun_l}s/{id}",
)


@dataclass(frozen=True, slots=True)
class Failure:
    """One bug: what is raised and from which code path. `frames` are outermost first."""

    language: Language
    exc_type: str
    template: str
    frames: tuple[tuple[str, str, int], ...]  # (function, file, line)
    cause: tuple[str, str] | None
    names: dict[str, str]


def make_failure(rng: random.Random, language: Language, depth: int, domain: str) -> Failure:
    """A new failure in `language`, in the code of `domain`, whose trace has about `depth` frames."""
    noun = rng.choice(_NOUNS)
    names = {"noun": noun, "noun_l": noun.lower(), "cls": noun, "var": noun.lower(),
             "verb": rng.choice(_VERBS)}
    app_depth = rng.randint(3, 9)
    app = [_app_frame(rng, language, domain) for _ in range(app_depth)]
    cause = None
    if language == "java":
        exc_type, template = rng.choice(_JAVA_ERRORS)
        if rng.random() < 0.4:
            cause = rng.choice(_JAVA_CAUSES)
        pool = [(f, "", 0) for f in _JAVA_FRAMEWORK]
    elif language == "python":
        exc_type, template = rng.choice(_PY_ERRORS)
        pool = [(fn, path, line) for path, line, fn, _ in _PY_FRAMEWORK]
    elif language == "node":
        exc_type, template = rng.choice(_NODE_ERRORS)
        pool = [(f, "", 0) for f in _NODE_FRAMEWORK]
    elif language == "go":
        exc_type, template = "panic", rng.choice(_GO_PANICS)
        pool = list(_GO_FRAMEWORK)
    else:
        exc_type, template = "", rng.choice(_MESSAGES)
        return Failure(language, exc_type, template, (), None, names)
    outer = [rng.choice(pool) for _ in range(max(0, depth - app_depth))]
    return Failure(language, exc_type, template, tuple(outer + app), cause, names)


def _app_frame(rng: random.Random, language: Language, domain: str) -> tuple[str, str, int]:
    cls = rng.choice(_NOUNS) + rng.choice(_ROLES)
    method = rng.choice(_VERBS) + rng.choice(_NOUNS)
    line = rng.randint(20, 600)
    if language == "java":
        if rng.random() < 0.2:
            method = f"lambda${method}${rng.randint(0, 9)}"
        return (f"com.acme.{domain}.{cls}.{method}", f"{cls}.java", line)
    if language == "python":
        return (method.lower(), f"/app/{domain}/{cls.lower()}.py", line)
    if language == "node":
        return (f"{cls}.{method}", f"/app/src/{domain}/{cls[0].lower()}{cls[1:]}.js", line)
    return (f"github.com/acme/{domain}/internal/{domain}.(*{cls}).{method[0].upper()}{method[1:]}",
            f"/build/internal/{domain}/{cls.lower()}.go", line)


_DRAWS: dict[str, Callable[[random.Random], str]] = {
    "id": lambda r: str(1000 + r.getrandbits(26)),
    "small": lambda r: str(r.getrandbits(6)),
    "ms": lambda r: str(100 + r.getrandbits(15)),
    "hex": lambda r: f"{r.getrandbits(48):012x}",
    "ip": lambda r: f"10.{r.getrandbits(8)}.{r.getrandbits(8)}.{1 + r.getrandbits(7)}",
}


def fill(template: str, names: dict[str, str], rng: random.Random) -> str:
    """The template with this occurrence's variable parts (ids, addresses, durations) drawn afresh."""
    values = dict(names)
    for key, draw in _DRAWS.items():
        if "{" + key + "}" in template:
            values[key] = draw(rng)
    return template.format(**values)


def render_frames(failure: Failure, shift: int, jvm: int) -> str:
    """The frame lines of a trace (everything after the header), for one commit and one process.

    `shift` moves in-app line numbers the way a deploy does; `jvm` seeds what differs per process
    (proxy classes, generated accessors, goroutine argument addresses).
    """
    lang = failure.language
    lines: list[str] = []
    for i, (function, file, line) in enumerate(reversed(failure.frames)):  # innermost first
        in_app = bool(file) and ("acme" in function or file.startswith(("/app/", "/build/")))
        line = line + shift if in_app else line
        if lang == "java":
            if not file:
                lines.append(f"\tat {function}")
            else:
                lines.append(f"\tat {function}({file}:{line})")
                if i % 3 == 1:
                    lines.append(f"\tat jdk.proxy2.$Proxy{100 + jvm % 97}.{function.rsplit('.', 1)[1]}"
                                 "(Unknown Source)")
                    lines.append(f"\tat jdk.internal.reflect.GeneratedMethodAccessor{jvm % 500}.invoke"
                                 "(Unknown Source)")
        elif lang == "python":
            lines.append(f'  File "{file}", line {line}, in {function}\n    result = {function}(request)')
        elif lang == "node":
            column = (line * 7) % 60 + 5
            lines.append(f"    at {function} ({file}:{line}:{column})" if file else f"    at {function}")
        else:
            args = f"0xc{jvm:04x}{i:05x}0, {{0x{line:x}a1f2, 0x10}}"
            lines.append(f"{function}({args})\n\t{file}:{line} +0x{i * 37 + 29:x}")
    if lang == "python":
        lines.reverse()  # Python prints outermost first
    return "\n".join(lines)


def render_trace(failure: Failure, header: str, frames: str, cause: str, goroutine: int = 1) -> str:
    """The whole text trace as the runtime prints it, header (type and message) included."""
    lang = failure.language
    if lang == "java":
        text = f"{failure.exc_type}: {header}\n{frames}"
        if cause:
            more = len(failure.frames) - 2
            text += (f"\nCaused by: {cause}\n\tat org.postgresql.core.v3.QueryExecutorImpl."
                     f"receiveErrorResponse(QueryExecutorImpl.java:2713)\n\t... {more} more")
        return text
    if lang == "python":
        return f"Traceback (most recent call last):\n{frames}\n{failure.exc_type}: {header}"
    if lang == "node":
        return f"{failure.exc_type}: {header}\n{frames}"
    return f"panic: {header}\n\ngoroutine {goroutine} [running]:\n{frames}"
