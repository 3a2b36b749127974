"""Frame normalisation, one test per row of the table in docs/evaluation.md ("Frame normalisation").

Each row lists spellings of one frame that differ only in what the rule removes; all must get the row's
key (or no key at all: the frame does not count).
"""

from __future__ import annotations

import re
import time
from typing import NamedTuple

import pytest

from analysis.event import ErrorEvent, ExceptionInfo, Frame
from analysis.intake.frame_key import frame_key, without_brackets
from analysis.intake.signature import fingerprint_event
from analysis.intake.stacktrace import parse_trace
from tests.paths import PROJECT_ROOT


class Row(NamedTuple):
    platform: str
    rule: str
    frames: tuple[Frame, ...]
    key: str


def js(function: str, path: str, module: str = "") -> Frame:
    return Frame(function, path, path, module)


def jvm(module: str, function: str, filename: str = "X.java") -> Frame:
    return Frame(function, filename, "", module)


ROWS = [
    Row("JavaScript", "function names trimmed to their last segment", (
        js("aha", "http://localhost:5000/static/app.js"), js("Object.aha", "http://localhost:5000/static/app.js"),
        js("Foo.prototype.aha", "http://localhost:5000/static/app.js"),
        js("async Foo.aha", "http://localhost:5000/static/app.js"),
        js("Foo.aha [as handler]", "http://localhost:5000/static/app.js")), "static/app:aha"),
    Row("JavaScript", "anonymous frames keyed by module only", (
        js("<anonymous>", "/app/src/boot.js"), js("Object.<anonymous>", "/app/src/boot.js"),
        js("Anonymous function", "/app/src/boot.js"), js("test/<", "/app/src/boot.js"), js("?", "/app/src/boot.js"),
        js("", "/app/src/boot.js"), js("", "webpack:///./src/boot.js", module="src/boot")), "src/boot:<anonymous>"),
    Row("JavaScript", "native, eval and <anonymous> frames left out", (
        js("forEach", "[native code]"), js("Array.map", "<anonymous>"), js("run", "native"),
        js("x", "eval code"), js("eval", "/app/src/boot.js"), Frame("JSON.parse", "", "<anonymous>")), ""),
    Row("JavaScript", "URLs and file:// paths reduced to what names the source file", (
        js("load", "http://localhost:5000/static/js/app.js"), js("load", "https://cdn.acme.com/static/js/app.js"),
        js("load", "file:///Users/dev/shop/static/js/app.js"), js("load", "webpack:///./static/js/app.js"),
        js("load", "app:///static/js/app.js"), js("load", "/srv/shop/static/js/app.js")), "js/app:load"),
    Row("JavaScript", "query strings and cache-busting hashes dropped", (
        js("load", "https://cdn.acme.com/js/app.js?v=1714644843"), js("load", "https://cdn.acme.com/js/app.3f9a1c2b.js"),
        js("load", "https://cdn.acme.com/js/app-8f3e2a1b.js"), js("load", "https://cdn.acme.com/js/app-BxC3d4E5.js"),
        js("load", "https://cdn.acme.com/js/app.js#main")), "js/app:load"),
    Row("JavaScript", "a build hash before another suffix dropped too", (
        js("load", "https://cdn.acme.com/js/main.3f9a1c2b.chunk.js"),
        js("load", "https://cdn.acme.com/js/main.9e8d7c6b.chunk.js")), "js/main.chunk:load"),
    Row("JavaScript", "a release's build directory dropped", (
        js("listen", "/srv/releases/42/server.js"), js("listen", "/srv/releases/43/server.js"),
        js("listen", "/srv/releases/v2.0.1/server.js")), "releases/server:listen"),
    Row("JavaScript", "package versions dropped from script URLs", (
        js("render", "https://unpkg.com/react-dom@16.13.1/umd/react-dom.production.min.js"),
        js("render", "https://unpkg.com/react-dom@18.2.0/umd/react-dom.production.min.js")),
        "umd/react-dom.production.min:render"),
    Row("JavaScript", "anonymous frames of a script known only by its URL left out", (
        js("", "https://sentry.io/adopt/dont/shop.js", module="adopt/dont/shop.js"), js("", "https://foo.com/index.js"),
        js("", "blob:http://example.com/7f7aaadf-a006-4217-9ed5-5fbf8585c6c0")), ""),
    Row("JavaScript", "transpiler helpers and polyfills left out", (
        Frame("e.<anonymous>", module="@babel/runtime/helpers/asyncToGenerator"),
        Frame("listener", module="core-js/internals/task"), Frame("_.sent", module="tslib/tslib.es6"),
        js("invoke", "/app/node_modules/regenerator-runtime/runtime.js")), ""),
    Row("JVM", "CGLIB and Spring CGLIB proxies", (
        jvm("com.acme.OrderService", "placeOrder"),
        jvm("com.acme.OrderService$$EnhancerBySpringCGLIB$$7f3a21c4", "placeOrder", "<generated>"),
        jvm("com.acme.OrderService$$FastClassBySpringCGLIB$$1a2b3c", "placeOrder"),
        jvm("com.acme.OrderService$$EnhancerByCGLIB$$9d8e7f", "placeOrder"),
        jvm("com.acme.OrderService$$SpringCGLIB$$0", "placeOrder")), "com.acme.OrderService.placeOrder"),
    Row("JVM", "Guice enhancer and FastClass", (
        jvm("com.example.api.OutboundController$$EnhancerByGuice$$ae46b1bf$$FastClassByGuice$$caceacd2", "run"),
        jvm("com.example.api.OutboundController$$EnhancerByGuice$$12ab34cd", "run"),
        jvm("com.example.api.OutboundController", "run")), "com.example.api.OutboundController.run"),
    Row("JVM", "javassist and Hibernate javassist proxies", (
        Frame("fn", "EntriesResource_$$_javassist_seam_74.java"), Frame("fn", "EntriesResource_$$_javassist_12.java"),
        jvm("EntriesResource_$$_jvst1a2_3", "fn"), jvm("EntriesResource", "fn")), "EntriesResource.fn"),
    Row("JVM", "ByteBuddy, Mockito and Hibernate proxies", (
        jvm("com.acme.Order$ByteBuddy$AbC123", "getId"), jvm("com.acme.Order$ByteBuddy$Auxiliary$x9z", "getId"),
        jvm("com.acme.Order$MockitoMock$1337001", "getId"), jvm("com.acme.Order$HibernateProxy$AbCdEf12", "getId"),
        jvm("com.acme.Order", "getId")), "com.acme.Order.getId"),
    Row("JVM", "hidden lambda classes ($$Lambda$N/0x…) left out", (
        jvm("com.acme.Handler$$Lambda$12/0x0000000800c5b440", "apply"),
        jvm("com.acme.Handler$$Lambda/0x00007f", "apply"),
        jvm("com.acme.Handler$$Lambda$3", "apply")), ""),
    Row("JVM", "lambda bodies and anonymous classes lose their numbers", (
        jvm("com.acme.Handler", "lambda$handle$3"), jvm("com.acme.Handler", "lambda$handle$12")),
        "com.acme.Handler.lambda$handle$"),
    Row("JVM", "$ProxyN", (jvm("com.sun.proxy.$Proxy12", "save"), jvm("com.sun.proxy.$Proxy105", "save")),
        "com.sun.proxy.$Proxy.save"),
    Row("JVM", "generated reflection accessors", (
        jvm("jdk.internal.reflect.GeneratedMethodAccessor7", "invoke", "Unknown Source"),
        jvm("jdk.internal.reflect.GeneratedMethodAccessor312", "invoke")),
        "jdk.internal.reflect.GeneratedMethodAccessor.invoke"),
    Row("JVM", "generated serialization constructors", (
        jvm("sun.reflect.GeneratedSerializationConstructorAccessor1", "newInstance"),
        jvm("sun.reflect.GeneratedSerializationConstructorAccessor27", "newInstance")),
        "sun.reflect.GeneratedSerializationConstructorAccessor.newInstance"),
    Row("JVM", "Kotlin coroutine continuations and $suspendImpl", (
        jvm("com.acme.OrderRepo$load$1", "invokeSuspend", "OrderRepo.kt"),
        jvm("com.acme.OrderRepo$load$2", "invokeSuspend"),
        jvm("com.acme.OrderRepo", "load$suspendImpl"), jvm("com.acme.OrderRepo", "load$default"),
        jvm("com.acme.OrderRepo", "load", "OrderRepo.kt")), "com.acme.OrderRepo.load"),
    Row("JVM", "Kotlin lambdas", (jvm("com.acme.Main", "main$lambda-3"), jvm("com.acme.Main", "main$lambda$1")),
        "com.acme.Main.main$lambda"),
    Row("JVM", "Clojure fn classes", (jvm("sentry_example.core$_main$fn__1539", "invoke", "core.clj"),
                                      jvm("sentry_example.core$_main$fn__2044", "invoke")),
        "sentry_example.core$_main$fn__.invoke"),
    Row(".NET", "async state machines (<M>d__N.MoveNext)", (
        Frame("MoveNext", "OrderService.cs", "", "MyApp.OrderService+<PlaceOrderAsync>d__5"),
        Frame("MyApp.OrderService.<PlaceOrderAsync>d__12.MoveNext()"),
        Frame("PlaceOrderAsync", "OrderService.cs", "", "MyApp.OrderService")), "MyApp.OrderService.PlaceOrderAsync"),
    Row(".NET", "lambdas and local functions (<>c__DisplayClass, <M>b__N)", (
        Frame("<Main>b__0", "Program.cs", "", "MyApp.Program+<>c__DisplayClass0_0"),
        Frame("<Main>b__0_1", "Program.cs", "", "MyApp.Program+<>c"),
        Frame("MyApp.Program.<>c.<Main>b__3_0"), Frame("<Main>g__Local|3_0", "Program.cs", "", "MyApp.Program"),
        Frame("Main", "Program.cs", "", "MyApp.Program")), "MyApp.Program.Main"),
    Row("Python", "site-packages and virtualenv prefixes", (
        Frame("raise_for_status", "/usr/lib/python3/dist-packages/requests/models.py"),
        Frame("raise_for_status", "/app/.venv/lib/python3.11/site-packages/requests/models.py"),
        Frame("raise_for_status", "/opt/venv/lib64/python3.12/site-packages/requests/models.py")),
        "requests.models:raise_for_status"),
    Row("Python", "a package's __init__ is the package", (
        Frame("get", "/app/.venv/lib/python3.11/site-packages/requests/__init__.py"),
        Frame("get", "/usr/local/lib/python3.9/site-packages/requests/__init__.py")), "requests:get"),
    Row("Python", "zipapp prefixes", (
        Frame("checkout", "/opt/shop.pyz/shop/api.py"), Frame("checkout", "/srv/releases/42/shop/api.py")),
        "shop.api:checkout"),
    Row("Python", "a release's build directory dropped (a module at the release's root)", (
        Frame("checkout", "/srv/releases/42/cart.py"), Frame("checkout", "/srv/releases/20241206093000/cart.py"),
        Frame("checkout", "/srv/releases/d69b08cf2f5f/cart.py"), Frame("checkout", "/srv/releases/v1.4.2/cart.py"),
        Frame("checkout", "/srv/releases/v42/cart.py")),
        "releases.cart:checkout"),
    Row("Python", "qualified and plain function names agree", (
        Frame("PricingService.price", "/srv/app/shop/pricing.py"), Frame("price", "/srv/app/shop/pricing.py")),
        "shop.pricing:price"),
    Row("Python", "comprehensions and lambdas left out", (
        Frame("<listcomp>", "/srv/app/shop/pricing.py"), Frame("<genexpr>", "/srv/app/shop/pricing.py"),
        Frame("<lambda>", "/srv/app/shop/pricing.py")), ""),
    Row("Go", "module versions (@v1.2.3)", (
        Frame("Get", "/go/pkg/mod/github.com/acme/kit@v1.2.3/cache/get.go", "", "github.com/acme/kit@v1.2.3/cache"),
        Frame("Get", "/go/pkg/mod/github.com/acme/kit@v1.4.0/cache/get.go", "", "github.com/acme/kit@v1.4.0/cache")),
        "github.com/acme/kit/cache.Get"),
    Row("Go", "(*T) receivers", (
        Frame("(*Service).Close", "/build/billing/service.go", "", "github.com/acme/billing"),
        Frame("Service.Close", "/build/billing/service.go", "", "github.com/acme/billing")),
        "github.com/acme/billing.Service.Close"),
    Row("Go", "closures (.funcN)", (
        Frame("handler.func1", "/build/main.go", "", "main"), Frame("handler.func1.2", "/build/main.go", "", "main"),
        Frame("handler", "/build/main.go", "", "main")), "main.handler"),
    Row("Go", "generic instantiations", (
        Frame("Map[go.shape.int].Get", "/build/kv.go", "", "github.com/acme/kv"),
        Frame("Map[string].Get", "/build/kv.go", "", "github.com/acme/kv")), "github.com/acme/kv.Map[...].Get"),
    Row("Ruby", "ERB and template suffixes", (
        Frame("_app_views_orders_show_html_erb__3327135416823489_70123", "/app/app/views/orders/show.html.erb"),
        Frame("_app_views_orders_show_html_erb__1157_46980", "/srv/app/views/orders/show.html.erb")),
        "orders/show:_app_views_orders_show_html_erb"),
    Row("Ruby", "blocks, rescue and ensure", (
        Frame("block in process", "/app/app/jobs/sync.rb"),
        Frame("block (2 levels) in process", "/app/app/jobs/sync.rb"),
        Frame("rescue in process", "/app/app/jobs/sync.rb"), Frame("process", "/app/app/jobs/sync.rb")),
        "jobs/sync:process"),
    Row("Ruby", "gem paths", (
        Frame("save", "/usr/local/bundle/gems/activerecord-7.0.4/lib/active_record/base.rb"),
        Frame("save", "/home/u/.gem/ruby/3.2.0/gems/activerecord-7.1.0/lib/active_record/base.rb")),
        "active_record/base:save"),
]


@pytest.mark.parametrize("row", ROWS, ids=[f"{row.platform}: {row.rule}" for row in ROWS])
def test_each_rule_gives_every_spelling_one_key(row: Row) -> None:
    """Every spelling of the row's frame gets the row's key ("" = the frame does not count)."""
    assert [frame_key(frame) for frame in row.frames] == [row.key] * len(row.frames)


def test_every_rule_is_in_the_documented_table() -> None:
    """docs/evaluation.md lists each rule of this file under its platform."""
    text = (PROJECT_ROOT / "docs" / "evaluation.md").read_text()
    table = text[text.index("## Frame normalisation"):]
    missing = [f"{row.platform}: {row.rule}" for row in ROWS
               if not re.search(rf"^\| {re.escape(row.platform)} \| {re.escape(row.rule)} \|", table, re.MULTILINE)]
    assert not missing


@pytest.mark.parametrize("paths", [
    ("/srv/app/api/v1/users.py", "/srv/app/api/v2/users.py"), ("api/v1.1/handlers.py", "api/v2.0/handlers.py"),
    ("routes/2023-06-01/orders.ts", "routes/2024-01-01/orders.ts"),
    ("adapters/mysql-5.7/x.py", "adapters/mysql-8.0/x.py"),
    ("/srv/404-pages/render.js", "/srv/2-factor/render.js"), ("/app/decade1/x.py", "/app/facade12/x.py"),
])  # fmt: skip
def test_a_version_or_date_that_names_code_keeps_its_frames_apart(paths: tuple[str, str]) -> None:
    """API versions, dated routes, driver versions, names with digits: different code, so different keys.
    Only a build's directory under a directory of releases is left out (attacker review: these merged)."""
    first, second = (frame_key(Frame("create", path)) for path in paths)
    assert first != second


class TestAllPlatforms:
    def test_recursion_is_collapsed(self) -> None:
        """A recursion 3 or 300 deep is one failure: repeated frames count once."""
        def event(depth: int) -> ErrorEvent:
            frames = (Frame("throwError", "App.java", "", "com.example.App"),
                      *[Frame("recurFunc", "App.java", "", "com.example.App", line) for line in (27,) * depth],
                      Frame("main", "App.java", "", "com.example.App"))  # fmt: skip
            return ErrorEvent("s", 0, "m", exceptions=(ExceptionInfo("java.lang.StackOverflowError", "", frames),))
        shallow, deep = fingerprint_event(event(3)), fingerprint_event(event(300))
        assert shallow.fingerprint == deep.fingerprint
        assert shallow.frames == ("com.example.App.throwError", "com.example.App.recurFunc", "com.example.App.main")

    def test_engine_frames_of_a_v8_text_trace_do_not_count(self) -> None:
        """`at JSON.parse (<anonymous>)`, `at Array.map (native)` are left out; the service's frame keys it."""
        text = ("TypeError: Cannot read properties of undefined (reading 'x')\n"
                "    at JSON.parse (<anonymous>)\n    at Array.map (native)\n    at new Promise (<anonymous>)\n"
                "    at OrderService.load (/app/src/orders/service.js:39:11)")
        signature = fingerprint_event(ErrorEvent("s", 0, "m", exceptions=parse_trace(text)))
        assert signature.frames == ("orders/service:load",)

    def test_go_goroutine_ids_and_addresses_do_not_count(self) -> None:
        """The same panic in goroutine 7 and 812, at other addresses and offsets, is one fingerprint."""
        def panic(goroutine: int, address: str) -> str:
            return (f"panic: runtime error: invalid memory address or nil pointer dereference\n\n"
                    f"goroutine {goroutine} [running]:\n"
                    f"github.com/acme/billing.(*Service).Close(0x{address})\n"
                    f"\t/build/billing/service.go:141 +0x{address[-3:]}\n"
                    "main.main()\n\t/build/main.go:12 +0x25\n")
        prints = {fingerprint_event(ErrorEvent("s", 0, "m", exceptions=parse_trace(panic(g, a)))).fingerprint
                  for g, a in ((7, "c000012340"), (812, "c0000a9f10"))}
        assert len(prints) == 1

    def test_generic_brackets_are_removed_in_linear_time(self) -> None:
        """A hostile run of `[` costs one pass, not one pass per bracket."""
        hostile = "pkg.F" + "[" * 200_000
        started = time.perf_counter()
        assert without_brackets(hostile) == "pkg.F[...]"
        assert without_brackets("Map[K, List[V]].Get") == "Map[...].Get"
        assert time.perf_counter() - started < 1.0
