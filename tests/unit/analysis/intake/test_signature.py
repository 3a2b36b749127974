"""Fingerprints group one failure whatever varies between its events, and whatever shape carried it."""

from __future__ import annotations

from typing import Any

import orjson

from analysis.event import ErrorEvent, ExceptionInfo, Frame
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.signature import (
    Signature,
    describe,
    fingerprint_event,
    is_in_app,
    mask_message,
    normalise_frame,
)
from analysis.intake.stacktrace import parse_trace
from tests.paths import TRACES

TRACES = TRACES
CONFIG = DecodeConfig()


def trace(name: str) -> str:
    return (TRACES / name).read_text()


def text_signature(name: str) -> Signature:
    event = ErrorEvent(server_id="svc", timestamp=0.0, message="boom", exceptions=parse_trace(trace(name)))
    return fingerprint_event(event)


def decoded_signature(document: dict[str, Any]) -> Signature:
    (event,) = decode_message(orjson.dumps(document), CONFIG, received_at=0.0)
    return fingerprint_event(event)


def ecs(text: str) -> dict[str, Any]:
    return {"@timestamp": "2024-05-02T10:14:03.551Z", "service": {"name": "svc"}, "message": "failed",
            "error": {"stack_trace": text}}  # fmt: skip


def logstash(text: str) -> dict[str, Any]:
    return {"@timestamp": "2024-05-02T10:14:03.551Z", "logger_name": "svc.Main", "level": "ERROR",
            "message": "failed", "stack_trace": text, "app_name": "svc"}  # fmt: skip


def otel(text: str) -> dict[str, Any]:
    attributes = [{"key": "exception.stacktrace", "value": {"stringValue": text}}]
    record = {"timeUnixNano": "1714644843551000000", "severityText": "ERROR", "attributes": attributes,
              "body": {"stringValue": "failed"}}  # fmt: skip
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]}
    return {"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": [record]}]}]}


def native(exception: dict[str, Any]) -> dict[str, Any]:
    return {"server_id": "svc", "timestamp": 1714644843.551, "message": "failed", "exception": exception}


def sentry_frames(rows: list[tuple[str, str, str, int, bool | None]], **extra: str) -> list[dict[str, Any]]:
    """Frames as an SDK sends them, caller first: (filename, module, function, lineno, in_app)."""
    frames = []
    for filename, module, function, lineno, in_app in rows:
        frame: dict[str, Any] = {"filename": filename, "function": function, "lineno": lineno}
        if module:
            frame["module"] = module
        if in_app is not None:
            frame["in_app"] = in_app
        frames.append(frame | extra)
    return frames


JAVA_NATIVE = native({
    "type": "java.lang.IllegalStateException",
    "value": "Reservation 7781 already released",
    "stacktrace": sentry_frames([
        ("Thread.java", "java.lang.Thread", "run", 1583, False),
        ("ReservationController.java", "com.acme.inventory.api.ReservationController", "delete", 52, True),
        ("CglibAopProxy.java", "org.springframework.aop.framework.CglibAopProxy$DynamicAdvisedInterceptor",
         "intercept", 713, False),
        ("<generated>", "com.acme.inventory.ReservationService$$SpringCGLIB$$0", "cancel", 0, True),
        ("ReservationService.java", "com.acme.inventory.ReservationService", "cancel", 120, True),
        ("Reservation.java", "com.acme.inventory.Reservation", "release", 64, True),
    ]),
})  # fmt: skip

PYTHON_NATIVE = native({
    "type": "PricingError",
    "value": "cannot price order 4711",
    "stacktrace": [
        {"filename": "flask/app.py", "abs_path": "/usr/lib/python3/dist-packages/flask/app.py",
         "module": "flask.app", "function": "full_dispatch_request", "lineno": 1484},
        {"filename": "flask/app.py", "abs_path": "/usr/lib/python3/dist-packages/flask/app.py",
         "module": "flask.app", "function": "dispatch_request", "lineno": 1469},
        {"filename": "shop/api/checkout.py", "abs_path": "/home/app/shop/api/checkout.py",
         "module": "shop.api.checkout", "function": "checkout", "lineno": 41},
        {"filename": "shop/pricing/service.py", "abs_path": "/home/app/shop/pricing/service.py",
         "module": "shop.pricing.service", "function": "PricingService.price_order", "lineno": 23},
        {"filename": "shop/pricing/service.py", "abs_path": "/home/app/shop/pricing/service.py",
         "module": "shop.pricing.service", "function": "<listcomp>", "lineno": 23},
        {"filename": "shop/pricing/rules.py", "abs_path": "/home/app/shop/pricing/rules.py",
         "module": "shop.pricing.rules", "function": "apply_discount", "lineno": 90},
    ],
    "chained": [{
        "type": "ZeroDivisionError",
        "value": "division by zero",
        "stacktrace": [{"filename": "shop/pricing/rules.py", "abs_path": "/home/app/shop/pricing/rules.py",
                        "module": "shop.pricing.rules", "function": "apply_discount", "lineno": 88}],
    }],
})  # fmt: skip

NODE_NATIVE = native({
    "type": "Error",
    "value": "failed to load order 1",
    "stacktrace": sentry_frames([
        ("/app/node_modules/express-async-handler/index.js", "", "<anonymous>", 3, None),
        ("/app/src/orders/controller.js", "", "OrderController.show", 18, None),
        ("/app/src/orders/service.js", "", "OrderService.load", 42, None),
    ]),
    "chained": [{
        "type": "TypeError",
        "value": "Cannot read properties of undefined (reading 'lineItems')",
        "stacktrace": sentry_frames([
            ("/app/src/orders/controller.js", "", "OrderController.show", 18, None),
            ("node:internal/process/task_queues", "", "process.processTicksAndRejections", 95, None),
            ("/app/src/orders/service.js", "", "OrderService.load", 39, None),
            ("/app/src/orders/pricing.js", "", "totalOf", 7, None),
        ]),
    }],
})  # fmt: skip

GO_NATIVE = native({
    "type": "runtime.Error",
    "value": "invalid memory address or nil pointer dereference",
    "stacktrace": sentry_frames([
        ("/usr/local/go/src/net/http/server.go", "net/http", "(*conn).serve", 2009, None),
        ("/build/internal/billing/service.go", "github.com/acme/ledger/internal/billing", "(*Service).Close", 150,
         None),
        ("/build/internal/billing/service.go", "github.com/acme/ledger/internal/billing", "(*Service).Close.func1",
         141, None),
        ("/build/internal/billing/invoice.go", "github.com/acme/ledger/internal/billing", "(*Invoicer).Total", 88,
         None),
    ]),
})  # fmt: skip


class TestSameFailureSameFingerprint:
    def test_java_variant_ids_lines_proxies_lambdas(self) -> None:
        """Other ids, line numbers, CGLIB hashes, $Proxy/accessor numbers, lambda and anonymous indexes."""
        assert text_signature("java_checkout.txt") == text_signature("java_checkout_variant.txt")

    def test_python_variant_ids_lines_and_deploy_paths(self) -> None:
        """Other ids, line numbers, install root and Python version of the site-packages path."""
        assert text_signature("python_pricing.txt") == text_signature("python_pricing_variant.txt")

    def test_node_variant_ids_lines_and_columns(self) -> None:
        """Other UUIDs, lines, columns and deploy directory."""
        assert text_signature("node_orders.txt") == text_signature("node_orders_variant.txt")

    def test_go_variant_addresses_offsets_and_closure_numbers(self) -> None:
        """Other goroutine ids, argument addresses, +0x offsets, lines and `.funcN` closure numbers."""
        assert text_signature("go_panic.txt") == text_signature("go_panic_variant.txt")

    def test_message_variants_share_the_message_fingerprint(self) -> None:
        """Without a trace, numbers, UUIDs, IPs, emails, paths, quotes and timestamps do not split a group."""
        first = ErrorEvent(
            server_id="s",
            timestamp=0,
            message=(
                "Payment 4411 for bob@example.com failed at 2024-05-02T10:14:03Z from 10.0.0.12: "
                "token 'a1b2' rejected, see /var/log/pay/88.log, request 6a1f0c2e-9b7d-4c31-8e0a-55d2c4f1b9aa"
            ),
        )
        second = ErrorEvent(
            server_id="s",
            timestamp=0,
            message=(
                "Payment 97 for carol.ng@corp.example.org failed at 2025-01-30T23:59:59Z from 192.168.7.1: "
                "token 'zz' rejected, see /srv/logs/x.log, request 0c7d2b41-1e2f-4a5b-9c8d-7e6f5a4b3c2d"
            ),
        )
        assert fingerprint_event(first) == fingerprint_event(second)
        assert fingerprint_event(first).basis == "message"


class TestDifferentFailureDifferentFingerprint:
    def test_each_language_other_failure_site(self) -> None:
        """A different in-app function at the failure site gives a different fingerprint, per language."""
        for language in ("java_checkout", "python_pricing", "node_orders", "go_panic"):
            same = text_signature(f"{language}.txt")
            other = text_signature(f"{language}_other_site.txt")
            assert same.fingerprint != other.fingerprint, language

    def test_other_exception_type_at_the_same_site(self) -> None:
        """The root-cause type is part of the signature."""
        chain = parse_trace(trace("java_inventory.txt"))
        renamed = (ExceptionInfo("java.util.NoSuchElementException", "", chain[0].frames),)
        base = ErrorEvent(server_id="s", timestamp=0, message="m", exceptions=chain)
        other = ErrorEvent(server_id="s", timestamp=0, message="m", exceptions=renamed)
        assert fingerprint_event(base).fingerprint != fingerprint_event(other).fingerprint

    def test_other_message_words(self) -> None:
        """Without a trace, messages that differ in their fixed words are different failures."""
        first = ErrorEvent(server_id="s", timestamp=0, message="Payment 4411 declined")
        second = ErrorEvent(server_id="s", timestamp=0, message="Payment 4411 timed out")
        assert fingerprint_event(first).fingerprint != fingerprint_event(second).fingerprint


class TestSameFingerprintWhicheverShape:
    def test_java_text_in_every_shape_and_structured_native_frames(self) -> None:
        """The Java failure as ECS, logstash and OTLP text and as native structured frames: one fingerprint."""
        text = trace("java_inventory.txt")
        signatures = {decoded_signature(shape(text)) for shape in (ecs, logstash, otel)}
        signatures.add(decoded_signature(JAVA_NATIVE))
        assert len(signatures) == 1
        (signature,) = signatures
        assert signature.frames == (
            "com.acme.inventory.Reservation.release",
            "com.acme.inventory.ReservationService.cancel",
            "com.acme.inventory.api.ReservationController.delete",
        )

    def test_java_native_without_in_app_flags(self) -> None:
        """Native frames that do not say in_app fall back to the same heuristics as text frames."""
        unflagged = orjson.loads(orjson.dumps(JAVA_NATIVE))
        for frame in unflagged["exception"]["stacktrace"]:
            frame.pop("in_app")
        assert decoded_signature(unflagged) == decoded_signature(ecs(trace("java_inventory.txt")))

    def test_python_chain_text_and_structured(self) -> None:
        """Python: paths, qualnames and comprehension frames normalise alike from text and from an SDK."""
        text = trace("python_pricing.txt")
        assert decoded_signature(PYTHON_NATIVE) == decoded_signature(ecs(text)) == decoded_signature(otel(text))

    def test_node_chain_text_and_structured(self) -> None:
        """Node: `async`, alias and anonymous function spellings normalise alike."""
        text = trace("node_orders.txt")
        assert decoded_signature(NODE_NATIVE) == decoded_signature(logstash(text))

    def test_go_panic_text_and_structured(self) -> None:
        """Go: package path + receiver + method, closures folded into their function."""
        text = trace("go_panic.txt")
        assert decoded_signature(GO_NATIVE) == decoded_signature(ecs(text))


class TestFrameNormalisation:
    def test_generated_suffixes_are_removed(self) -> None:
        """CGLIB, proxies, reflection accessors, lambdas and anonymous classes lose their variable parts."""
        cases = {
            (
                "com.acme.OrderService$$EnhancerBySpringCGLIB$$7f3a21c4",
                "placeOrder",
            ): "com.acme.OrderService.placeOrder",
            ("com.acme.OrderService$$FastClassBySpringCGLIB$$1a2b", "invoke"): "com.acme.OrderService.invoke",
            ("com.sun.proxy.$Proxy12", "save"): "com.sun.proxy.$Proxy.save",
            ("jdk.internal.reflect.GeneratedMethodAccessor7", "invoke"): (
                "jdk.internal.reflect.GeneratedMethodAccessor.invoke"
            ),
            ("com.acme.Handler", "lambda$handle$3"): "com.acme.Handler.lambda$handle$",
            ("com.acme.Handler", "lambda$0"): "com.acme.Handler.lambda$",
            ("com.acme.Handler$1", "run"): "com.acme.Handler$.run",
        }
        for (module, function), expected in cases.items():
            assert normalise_frame(Frame(function=function, module=module, filename="X.java")) == expected

    def test_python_node_and_go_keys(self) -> None:
        """Line numbers never enter a key; Python comprehensions and lambdas are dropped entirely."""
        assert normalise_frame(Frame("handle", "/srv/app/shop/api/views.py", lineno=3)) == "api.views:handle"
        assert normalise_frame(Frame("handle", "/x/pkg/__init__.py")) == "x.pkg:handle"
        assert normalise_frame(Frame("<lambda>", "/srv/app/shop/api/views.py")) == ""
        assert normalise_frame(Frame("Object.<anonymous>", "/app/src/boot.js")) == "src/boot:<anonymous>"
        assert normalise_frame(Frame("new Client [as connect]", "file:///app/lib/db.mjs")) == "lib/db:Client"
        assert normalise_frame(Frame("main.func1.2", "/app/main.go", module="main")) == "main.main"

    def test_in_app_flag_prefixes_and_heuristics(self) -> None:
        """in_app comes from the frame, else from configured prefixes, else from library heuristics."""
        own = Frame("run", "Job.java", module="com.acme.Job")
        assert is_in_app(own) and is_in_app(own, ["com.acme."])
        assert not is_in_app(own, ["org.partner."])
        assert not is_in_app(Frame("run", "Job.java", module="com.acme.Job", in_app=False))
        libraries = [
            Frame("run", "Thread.java", module="java.lang.Thread"),
            Frame("doFilter", "F.java", module="org.springframework.web.Filter"),
            Frame("get", "/srv/app/.venv/lib/python3.11/site-packages/requests/api.py"),
            Frame("x", "/app/node_modules/express/lib/router.js"),
            Frame("processTicksAndRejections", "node:internal/process/task_queues"),
            Frame("ServeHTTP", "/usr/local/go/src/net/http/server.go", module="net/http"),
            Frame("gopanic", "runtime/panic.go", module="runtime"),
        ]
        assert [is_in_app(frame) for frame in libraries] == [False] * len(libraries)
        assert is_in_app(Frame("handle", "/srv/app/shop/views.py"))
        assert is_in_app(Frame("handle", "/srv/app/shop/views.py"), ["shop."])
        assert is_in_app(Frame("Total", "/build/x.go", module="github.com/acme/ledger"), ["github.com/acme/"])

    def test_no_in_app_frame_uses_all_frames(self) -> None:
        """A trace made only of library frames is still fingerprinted by its (normalised) frames."""
        event = ErrorEvent(server_id="s", timestamp=0, message="m", exceptions=(
            ExceptionInfo("java.lang.NullPointerException", "", (
                Frame("put", "HashMap.java", module="java.util.HashMap", lineno=10),
                Frame("run", "Thread.java", module="java.lang.Thread", lineno=833),
            )),
        ))  # fmt: skip
        signature = fingerprint_event(event)
        assert signature.basis == "stacktrace"
        assert signature.frames == ("java.util.HashMap.put", "java.lang.Thread.run")

    def test_library_only_traces_are_told_apart_by_their_masked_message(self) -> None:
        """Runtime-only traces of two outages (refused vs timed out) get two fingerprints; the same outage
        at another address and port, in another shape, gets one."""
        def runtime_only(message: str) -> str:
            return (f"Error: {message}\n"
                    "    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)")
        refused = [runtime_only("connect ECONNREFUSED 10.0.3.7:6379"),
                   runtime_only("connect ECONNREFUSED 10.0.9.12:6380")]
        timed_out = runtime_only("connect ETIMEDOUT 10.0.3.7:443")
        signatures = [decoded_signature(ecs(refused[0])), decoded_signature(logstash(refused[1])),
                      decoded_signature(otel(refused[1]))]
        assert len({s.fingerprint for s in signatures}) == 1
        assert all(s.library_only and s.basis == "stacktrace" for s in signatures)
        assert decoded_signature(ecs(timed_out)).fingerprint != signatures[0].fingerprint

    def test_a_message_does_not_split_traces_with_in_app_frames(self) -> None:
        """Where the service's own frames key the failure, a different message keeps the fingerprint."""
        text = trace("java_inventory.txt")
        rest = text.partition("\n")[2]
        other = decoded_signature(ecs(f"java.lang.IllegalStateException: something else entirely\n{rest}"))
        signature = decoded_signature(ecs(text))
        assert not signature.library_only and other.fingerprint == signature.fingerprint


class TestCaches:
    def test_distinct_traces_past_the_cache_sizes_keep_their_fingerprints(self) -> None:
        """Once a stream of distinct traces has cycled the caches, a trace seen before is still
        fingerprinted as it was the first time."""
        def event(i: int) -> ErrorEvent:
            text = f"java.lang.IllegalStateException: boom\n\tat com.acme.S{i}.run(S{i}.java:{i})"
            return ErrorEvent(server_id="s", timestamp=0, message="m", exceptions=parse_trace(text))
        first = fingerprint_event(event(0)).fingerprint
        for i in range(1, 5000):
            fingerprint_event(event(i))
        assert fingerprint_event(event(0)).fingerprint == first
        assert fingerprint_event(event(1)).fingerprint != first


class TestMaskAndDescribe:
    def test_mask_message_replaces_each_variable_kind(self) -> None:
        """Numbers, hex, UUIDs, IPs, emails, paths, quoted strings and timestamps become `<*>`; a run of
        masked values is one `<*>`."""
        masked = mask_message(
            "order 42 at 0x7ffd 6a1f0c2e-9b7d-4c31-8e0a-55d2c4f1b9aa from 10.1.2.3 bob@x.io "
            "/etc/app.conf 'secret' 2024-05-02T10:14:03.551Z"
        )
        assert masked == "order <*> at <*> from <*>"

    def test_describe_is_the_cli_line(self) -> None:
        """`describe` gives exactly the keys of the `logagent fingerprint` output line."""
        line = describe(text_signature("java_inventory.txt"))
        assert set(line) == {"fingerprint", "basis", "exception_type", "frames"}
        assert line["basis"] == "stacktrace"
        assert line["exception_type"] == "java.lang.IllegalStateException"
        assert isinstance(line["frames"], list) and line["frames"][0] == "com.acme.inventory.Reservation.release"
        assert 16 <= len(line["fingerprint"]) <= 32 and int(line["fingerprint"], 16) >= 0
        assert orjson.loads(orjson.dumps(line)) == line
