"""The stable key of a stack frame: where it ran and what ran, without what varies between builds.

A key is `location` and `function` joined the way the runtime names code (`com.acme.Foo.bar`,
`shop.api:checkout`, `src/orders:load`). Line numbers, addresses, build hashes, versions and the names
code generators and compilers make up never enter it, so one failure keeps one key across deploys,
hosts, JVM runs and browsers. A frame whose key is "" does not count at all (comprehensions, hidden
lambda classes, native and eval frames, polyfills). The rules per platform are the table in
`docs/evaluation.md` ("Frame normalisation"); each row has a test in tests/unit/analysis/intake.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from analysis.event import Frame

_JS_EXTENSIONS = frozenset({"js", "mjs", "cjs", "jsx", "ts", "tsx", "mts", "cts", "vue", "svelte"})
_PY_EXTENSIONS = frozenset({"py", "pyc", "pyw"})
_JVM_EXTENSIONS = frozenset({"java", "kt", "kts", "scala", "groovy", "clj", "cljc"})
_DOTNET_EXTENSIONS = frozenset({"cs", "vb", "fs"})
_RUBY_EXTENSIONS = frozenset({"rb", "erb", "haml", "slim", "rake", "builder"})
_URL_SCHEMES = ("webpack-internal:///", "webpack:///", "webpack://", "file://", "app:///", "http://", "https://")
# A directory a deploy names by its build, under a directory of releases (`releases/42`, `builds/3f9a1c2`,
# `releases/20241206093000`, `releases/v42`): a number, a date or timestamp, a version, a commit or a uuid. Only
# there: elsewhere a version or a date names code (`api/v1.1`, `routes/2024-01-01`, `adapters/mysql-8.0`).
_RELEASE_ROOTS = frozenset({"releases", "release", "builds", "build", "deploys", "deployments", "revisions"})
_BUILD_NAME = re.compile(r"(?:\d++(?:[._-]\d++)*+|v\d++(?:\.\d++)*+|(?=[a-f]{0,39}\d)[0-9a-f]{7,40}+"
                         r"|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})(?:[-+][\w.]++)?")

# ---------------------------------------------------------------- JavaScript
# Locations that name no source file: the frame is the engine's (`Array.map`, `new Promise`), or code
# built from a string. Browsers print some and not others, so they would split one error.
_JS_NO_SOURCE = frozenset({"[native code]", "native code", "native", "eval code", "<anonymous>", "eval"})
_JS_ANONYMOUS = frozenset({"", "?", "<anonymous>", "anonymous", "Anonymous function", "<anonymous function>",
                           "{anonymous}", "<unknown>"})  # fmt: skip
# Transpiler helpers and polyfills: present or not depending on the build target, never the failure.
_JS_POLYFILLS = ("core-js/", "core-js-pure/", "@babel/runtime/", "regenerator-runtime/", "tslib/", "/tslib.")
_JS_BUILD_HASH = re.compile(r"[.-](?=[0-9A-Za-z_]{8,}$)(?=[A-Za-z_]*\d)[0-9A-Za-z_]+$|[.-][0-9a-f]{6,}$")
_VERSION_IN_PATH = re.compile(r"@v?\d[\w.+-]*")

# ---------------------------------------------------------------- JVM
_JVM_RULES = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"/0x[0-9a-fA-F]+", ""),  # hidden classes: Foo$$Lambda$12/0x0000000800c5b440
        (r"\$\$(?:EnhancerBy|FastClassBy)\w*\$\$[0-9a-fA-F]+", ""),  # CGLIB, Spring CGLIB, Guice
        (r"\$\$SpringCGLIB\$\$\d+", ""),  # Spring 6
        (r"_\$\$_(?:javassist|jvst)\w*", ""),  # javassist, Hibernate's javassist proxies
        (r"\$(?:HibernateProxy|ByteBuddy|MockitoMock)(?:\$\w+)+", ""),
        (r"\$\$Lambda(?:\$\d+)?", "$$Lambda"),
        (r"\$Proxy\d+", "$Proxy"),
        (r"\bjdk\.proxy\d+", "jdk.proxy"),
        (r"(Generated(?:Serialization)?(?:Method|Constructor)Accessor)\d+", r"\1"),
        (r"\$lambda[-$]\d+", "$lambda"),  # Kotlin lambdas
        (r"\$(?:suspendImpl|default)\b", ""),  # Kotlin suspend bodies and default-argument bridges
        (r"__\d+", "__"),  # Clojure fn__1539, eval__12
        (r"\$eval\d+", "$eval"),  # Clojure
        (r"\$\d+", "$"),  # anonymous classes Foo$1, lambda$handle$3, access$000
    )
)
_KOTLIN_CONTINUATION = re.compile(r"\$([A-Za-z_]\w*)\$\d+$")  # Foo$bar$1.invokeSuspend is Foo.bar

# ---------------------------------------------------------------- .NET
_DOTNET_GENERATED = re.compile(r"\+<|\.<>c|>[bdgu]__")  # compiler-made names: Foo+<Run>d__3, <>c, <M>b__0
_DOTNET_ASYNC = re.compile(r"[+.]<(\w+)>d__\d+$")  # Foo+<PlaceOrderAsync>d__5.MoveNext
_DOTNET_CLOSURE = re.compile(r"[+.]<>c(?:__DisplayClass\d+(?:_\d+)?)?$")  # Foo+<>c__DisplayClass12_0
_DOTNET_LAMBDA = re.compile(r"^<(\w+)>[bgu]__\w+(?:\|\w+)?$")  # <Main>b__0_0, <Run>g__Local|3_0

# ---------------------------------------------------------------- Python, Go, Ruby
_PY_SYNTHETIC = frozenset({"<lambda>", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"})
_PY_PACKAGES = ("/site-packages/", "/dist-packages/")
_PY_PREFIX = re.compile(r"^.*?(?:\.pyz/|\.zip/|\.egg/|/lib/python\d[\d.]*/)")  # zipapps, eggs, the stdlib
_GO_RULES = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"@v\d[^/]*", ""),  # module versions in import paths
        (r"\(\*(\w+)\)", r"\1"),  # pointer receivers: (*Service).Close is Service.Close
        (r"\.func\d+(?:\.\d+)*", ""),  # closures: main.handler.func1.2
        (r"\.(?:gowrap|deferwrap)\d+", ""),
    )
)
_RUBY_GEM = re.compile(r"^.*/gems/[^/]+-\d[^/]*/(?:lib/)?")
_RUBY_BLOCK = re.compile(r"^(?:(?:block|rescue|ensure)(?: \(\d+ levels\))? in )+")
_RUBY_TEMPLATE = re.compile(r"__\d+_\d+$")  # ERB/Haml method names: _app_views_show_html_erb__3327_7012


def frame_key(frame: Frame) -> str:
    """The frame's stable key, or "" when the frame must not count."""
    parts = frame_parts(frame)
    if parts is None:
        return ""
    location, function, separator = parts
    if not location:
        return function
    return f"{location}{separator}{function}" if function else location


def frame_parts(frame: Frame) -> tuple[str, str, str] | None:
    """(location, function, separator) of the key, or None for a frame that does not count."""
    platform = platform_of(frame)
    if platform == "jvm":
        return _jvm_parts(frame)
    if platform == "node":
        return _js_parts(frame)
    if platform == "python":
        return _python_parts(frame)
    if platform == "go":
        return _go_parts(frame)
    if platform == "dotnet":
        return _dotnet_parts(frame)
    if platform == "ruby":
        return _ruby_parts(frame)
    path = frame.abs_path or frame.filename
    return path_tail(path, frozenset()), frame.function, ":"


def platform_of(frame: Frame) -> str:
    """The runtime that ran the frame, from its file's extension, else the shape of its names."""
    path = frame.abs_path or frame.filename
    extension = path.partition("?")[0].rpartition(".")[2].lower() if "." in path else ""
    if extension in _PY_EXTENSIONS or path.startswith("<frozen"):
        return "python"
    if extension == "go":
        return "go"
    if extension in _JS_EXTENSIONS or path.startswith(("node:", "webpack", "blob:")) or path in _JS_NO_SOURCE:
        return "node"
    if extension in _JVM_EXTENSIONS:
        return "jvm"
    if extension in _DOTNET_EXTENSIONS or (
        not extension and (_DOTNET_GENERATED.search(frame.module) or _DOTNET_GENERATED.search(frame.function))
    ):
        return "dotnet"
    if extension in _RUBY_EXTENSIONS:
        return "ruby"
    if path.startswith(("http://", "https://")):
        return "node"  # a browser script without an extension (esm.run/d3@7)
    if frame.module and not extension:  # `<generated>`, `Unknown Source` or no file at all
        return "node" if "/" in frame.module else "jvm"
    return ""


def path_tail(path: str, extensions: frozenset[str], keep: int = 2) -> str:
    """The last `keep` path components without extension: deploy roots differ, the tail does not. A build's
    directory under a directory of releases (`releases/42`) is left out: a module at the release's root
    keeps one key across deploys."""
    parts = [part for part in path.replace("\\", "/").split("/") if part and part != "."]
    if not parts:
        return ""
    stem, dot, extension = parts[-1].rpartition(".")
    if dot and extension.lower() in extensions:
        parts[-1] = stem
    if len(parts) > 1 and parts[-1] == "__init__":
        parts.pop()
    tail = [parts.pop()]
    while parts and len(tail) < keep:  # from the file up, reading only the directories the key keeps
        name = parts.pop()
        if not (parts and parts[-1].lower() in _RELEASE_ROOTS and _BUILD_NAME.fullmatch(name)):
            tail.append(name)
    return "/".join(reversed(tail))


def _jvm_parts(frame: Frame) -> tuple[str, str, str] | None:
    module = frame.module
    if not module:  # a frame known by its file only: the class is the file's stem
        module = path_tail(frame.abs_path or frame.filename, _JVM_EXTENSIONS, keep=1)
    if "$$Lambda" in module:  # hidden lambda classes: shown or not depending on the JVM
        return None
    function = frame.function
    if function == "invokeSuspend" and (continuation := _KOTLIN_CONTINUATION.search(module)):
        module, function = module[: continuation.start()], continuation.group(1)
    name = f"{module}.{function}"
    for pattern, replacement in _JVM_RULES:
        name = pattern.sub(replacement, name)
    location, _, function = name.rpartition(".")
    return location, function, "."


def _js_parts(frame: Frame) -> tuple[str, str, str] | None:
    function = js_function(frame.function)
    path = frame.abs_path or frame.filename
    if path in _JS_NO_SOURCE or frame.function.strip() == "eval" or path.startswith("eval at "):
        return None
    module = frame.module
    if module and path.endswith((module, module + ".js")) and "/" in module:
        module = ""  # a "module" that is just the script URL's path names nothing more than the URL
    if any(marker in path or marker in module for marker in _JS_POLYFILLS):
        return None
    if module:
        location = _js_location(path) if path and not path.startswith(("http://", "https://")) else ""
        location = location or _VERSION_IN_PATH.sub("", module)
    elif function or not path.startswith(("http://", "https://")):
        location = _js_location(path)
    else:  # an anonymous function in a script known only by its URL: nothing stable names it
        return None
    if not location and not function:
        return None
    return location, function or "<anonymous>", ":"


def js_function(function: str) -> str:
    """A JS function name as every engine agrees on it: its last segment, or "" when anonymous."""
    name = function.strip()
    for prefix in ("async ", "new "):
        name = name.removeprefix(prefix)
    alias = name.find(" [as ")
    if alias >= 0:
        name = name[:alias]
    if name in _JS_ANONYMOUS or name.endswith("/<") or "/<" in name:
        return ""  # Firefox prints anonymous functions as `outer/<`
    last = name.rpartition(".")[2]
    return "" if last in _JS_ANONYMOUS else last


def _js_location(path: str) -> str:
    """What names a script's source file: no scheme, host, query, build hash or package version."""
    if not path or path.startswith(("blob:", "data:")):
        return ""
    if path.startswith(("http://", "https://")):
        path = path.partition("//")[2].partition("/")[2]  # the host is where it was served, not what
    else:
        for scheme in _URL_SCHEMES:
            if path.startswith(scheme):
                path = path[len(scheme) :]
                break
    path = path.partition("?")[0].partition("#")[0]
    if "@" in path:
        path = _VERSION_IN_PATH.sub("", path)
    tail = path_tail(path, _JS_EXTENSIONS)
    stem, slash, name = tail.rpartition("/")
    for _ in range(3):  # main.3f9a1c2b.chunk: the hash may sit before another suffix
        base, dot, last = name.rpartition(".")
        if dot and last in ("min", "chunk", "bundle", "prod", "production", "development"):
            cleaned = _JS_BUILD_HASH.sub("", base)
            name = f"{cleaned}.{last}" if cleaned != base else name
        cleaned = _JS_BUILD_HASH.sub("", name)
        if cleaned == name or not cleaned:
            break
        name = cleaned
    return f"{stem}{slash}{name}"


def _python_parts(frame: Frame) -> tuple[str, str, str] | None:
    function = frame.function.rpartition(".")[2]  # qualname (Foo.bar) and co_name (bar) agree
    if function in _PY_SYNTHETIC:
        return None
    path = (frame.abs_path or frame.filename).replace("\\", "/")
    if path.startswith("<"):
        return path, function, ":"
    for marker in _PY_PACKAGES:  # an installed package: its import path, whatever the venv's prefix
        cut = path.rfind(marker)
        if cut >= 0:
            path = path[cut + len(marker) :]
            break
    else:
        path = _PY_PREFIX.sub("", path)
    if not path and frame.module:
        return ".".join(frame.module.split(".")[-2:]), function, ":"
    return path_tail(path, _PY_EXTENSIONS).replace("/", "."), function, ":"


def _go_parts(frame: Frame) -> tuple[str, str, str]:
    name = f"{frame.module}.{frame.function}" if frame.module else frame.function
    for pattern, replacement in _GO_RULES:
        name = pattern.sub(replacement, name)
    name = without_brackets(name)
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot < 0:
        return "", name, "."
    return name[:dot], name[dot + 1 :], "."


def without_brackets(name: str) -> str:
    """`name` with each outermost `[...]` (Go generic instantiations) shortened to `[...]`, in one pass."""
    if "[" not in name:
        return name
    out: list[str] = []
    depth = 0
    for char in name:
        if char == "[":
            if depth == 0:
                out.append("[...]")
            depth += 1
        elif char == "]" and depth:
            depth -= 1
        elif depth == 0:
            out.append(char)
    return "".join(out)


def _dotnet_parts(frame: Frame) -> tuple[str, str, str]:
    module, function = frame.module, frame.function.removesuffix("()")
    if not module and "." in function:  # `Namespace.Type.Method` as one name
        module, _, function = function.rpartition(".")
    if function == "MoveNext" and (state_machine := _DOTNET_ASYNC.search(module)):
        module, function = module[: state_machine.start()], state_machine.group(1)
    if closure := _DOTNET_CLOSURE.search(module):
        module = module[: closure.start()]
    if lambda_ := _DOTNET_LAMBDA.match(function):
        function = lambda_.group(1)
    return module.replace("+", "."), function, "."


def _ruby_parts(frame: Frame) -> tuple[str, str, str]:
    path = _RUBY_GEM.sub("", (frame.abs_path or frame.filename).replace("\\", "/"))
    function = _RUBY_TEMPLATE.sub("", _RUBY_BLOCK.sub("", frame.function.strip()))
    location = path_tail(path, _RUBY_EXTENSIONS)
    if location.endswith(".html"):  # show.html.erb: the template's own name
        location = location[: -len(".html")]
    return location, function, ":"


# ---------------------------------------------------------------- in-app

_LIBRARY_PATH_MARKERS = (
    "site-packages/", "dist-packages/", "/lib/python", "node_modules/", "node:internal", "/pkg/mod/",
    "/usr/lib/go/", "/usr/local/go/src/", "/vendor/", "<frozen ", "/gems/", "/rubygems/", "/ruby/lib/",
)  # fmt: skip
_LIBRARY_PATH_PREFIXES = ("node:", "internal/", "<frozen", "runtime/")
_JVM_LIBRARY_PREFIXES = (
    "java.", "javax.", "jakarta.", "jdk.", "sun.", "com.sun.", "kotlin.", "kotlinx.", "scala.", "groovy.",
    "org.springframework.", "org.apache.", "org.hibernate.", "org.eclipse.", "org.junit.", "org.slf4j.",
    "ch.qos.logback.", "io.netty.", "reactor.", "io.reactivex.", "com.fasterxml.", "com.google.",
    "io.micrometer.", "io.grpc.", "okhttp3.", "feign.", "org.postgresql.", "com.zaxxer.", "io.undertow.",
    "net.bytebuddy.", "org.aspectj.", "io.opentelemetry.", "org.jboss.", "com.mysql.", "akka.", "io.vertx.",
    "org.glassfish.", "org.mockito.", "android.", "androidx.", "dalvik.", "com.android.", "clojure.",
)  # fmt: skip
_DOTNET_LIBRARY_PREFIXES = ("System.", "Microsoft.", "Newtonsoft.", "Npgsql.", "Grpc.", "Polly.")
_GO_STDLIB = frozenset((
    "archive", "bufio", "builtin", "bytes", "cmp", "compress", "container", "context", "crypto", "database",
    "debug", "embed", "encoding", "errors", "expvar", "flag", "fmt", "go", "hash", "html", "image", "index",
    "internal", "io", "iter", "log", "maps", "math", "mime", "net", "os", "path", "plugin", "reflect",
    "regexp", "runtime", "slices", "sort", "strconv", "strings", "structs", "sync", "syscall", "testing",
    "text", "time", "unicode", "unique", "unsafe", "weak",
))  # fmt: skip


def is_in_app(frame: Frame, prefixes: Sequence[str] = ()) -> bool:
    """Whether `frame` is the service's own code: the frame's flag, else the prefixes, else heuristics."""
    if frame.in_app is not None:
        return frame.in_app
    if prefixes:
        return _matches_prefix(frame, prefixes)
    return not _looks_like_library(frame)


def _matches_prefix(frame: Frame, prefixes: Sequence[str]) -> bool:
    path = "/" + (frame.abs_path or frame.filename).replace("\\", "/").lstrip("/")
    for prefix in prefixes:
        if frame.module.startswith(prefix) or frame.function.startswith(prefix):
            return True
        as_path = prefix.replace(".", "/") if "/" not in prefix else prefix
        if len(path) > 1 and ("/" + as_path.lstrip("/")) in path:
            return True
    return False


def _looks_like_library(frame: Frame) -> bool:
    path = (frame.abs_path or frame.filename).replace("\\", "/")
    if path and (path.startswith(_LIBRARY_PATH_PREFIXES) or any(m in path for m in _LIBRARY_PATH_MARKERS)):
        return True
    platform = platform_of(frame)
    if platform == "go":
        if not frame.module:  # builtins such as panic()
            return True
        first = frame.module.partition("/")[0]
        return first in _GO_STDLIB or "@v" in path
    if platform == "dotnet":
        return (frame.module or frame.function).startswith(_DOTNET_LIBRARY_PREFIXES)
    if frame.module and platform in ("jvm", ""):
        return frame.module.startswith(_JVM_LIBRARY_PREFIXES)
    return not path and not frame.module
