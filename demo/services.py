"""The demo's sample services: real git repositories with real commits and real bugs, and their traces.

`build_sample_repos` writes a Python, a Java and a Go service, commit by commit; at each deployed commit
it captures the traces its bugs produce (the Python code is executed; Java and Go traces are built from
the faulting lines of the committed source). `demo.stream.generate_stream` turns them into a Kafka input stream.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import git

from demo import sources
from demo.sources import CommitSpec
from demo.traces import (
    GoFrame,
    JavaException,
    JavaFrame,
    SampleTrace,
    cglib_proxy,
    go_panic,
    java_trace,
    line_of,
    run_python_scenarios,
    spring_mvc_frames,
)

__all__ = ["SampleBug", "SampleService", "build_sample_repos"]

Language = Literal["python", "java", "go"]
_AUTHOR = git.Actor("Sample Developer", "dev@example.com")
_FIRST_COMMIT_TIME = 1_714_557_600  # 2024-05-01T10:00:00Z; fixed dates make the shas reproducible


@dataclass(frozen=True, slots=True)
class SampleBug:
    """A real bug of a sample service: where it faults and what the service logs when it does."""

    key: str
    exception_type: str
    culprit_path: str
    culprit_function: str
    log_message: str
    """Log line template; `@@NAME@@` tokens are filled per event."""
    logger: str


@dataclass(frozen=True, slots=True)
class SampleService:
    """One sample service: its repository, its deployed commits (oldest first) and its bugs' traces."""

    server_id: str
    language: Language
    repo: Path
    commits: tuple[str, ...]
    deployed: tuple[str, ...]
    bugs: tuple[SampleBug, ...]
    traces: Mapping[tuple[str, str], SampleTrace] = field(default_factory=dict)
    """(bug key, deployed commit) -> the trace that commit produces; absent when the commit lacks the bug."""

    def bug(self, key: str) -> SampleBug:
        """The bug named `key`."""
        return next(bug for bug in self.bugs if bug.key == key)

    def trace(self, bug: str, commit: str) -> SampleTrace | None:
        """The trace of `bug` at `commit`, or None when that commit does not have the bug."""
        return self.traces.get((bug, commit))


# --- orders-service (Python) ---------------------------------------------------------------------------

_ORDERS_BUGS = (
    SampleBug("unknown-coupon", "KeyError", "orders/pricing.py", "apply_coupon",
              "Failed to create order @@ORDER@@ for customer @@CUSTOMER@@", "orders.api"),
    SampleBug("empty-receipt", "ZeroDivisionError", "orders/pricing.py", "average_item_price",
              "Receipt rendering failed for order @@ORDER@@", "orders.api"),
    SampleBug("refund-missing-order", "AttributeError", "orders/api.py", "refund",
              "Refund of order @@ORDER@@ failed (request @@REQUEST@@)", "orders.api"),
)
_ORDERS_SCENARIOS: dict[str, tuple[str, dict[str, object]]] = {
    "unknown-coupon": ("orders.api.create_order", {
        "order_id": "@@ORDER@@", "items": [{"unit_price": "19.90", "quantity": 2}], "coupon": "@@COUPON@@"}),
    "empty-receipt": ("orders.api.receipt", {"order_id": "@@ORDER@@", "items": []}),
    "refund-missing-order": ("orders.api.refund", {"order_id": "@@ORDER@@"}),
}


def _orders_traces(root: Path, commit: str) -> dict[str, SampleTrace]:
    culprits = {bug.key: bug.culprit_path for bug in _ORDERS_BUGS}
    return run_python_scenarios(root, commit, _ORDERS_SCENARIOS, culprits)


# --- checkout-service (Java) ---------------------------------------------------------------------------

_JAVA = "src/main/java/com/acme/checkout"
_PKG = "com.acme.checkout"
_CHECKOUT_BUGS = (
    SampleBug("customer-npe", "java.lang.NullPointerException", f"{_JAVA}/service/CheckoutService.java",
              "placeOrder", "Checkout failed for cart @@CART@@ (customer @@CUSTOMER@@)",
              f"{_PKG}.web.CheckoutController"),
    SampleBug("coupon-required", "java.lang.NullPointerException", f"{_JAVA}/service/CouponService.java",
              "apply", "Checkout failed for cart @@CART@@ (customer @@CUSTOMER@@)",
              f"{_PKG}.web.CheckoutController"),
    SampleBug("bad-quantity", "java.lang.NumberFormatException", f"{_JAVA}/web/QuantityParser.java", "parse",
              "Quantity update rejected for cart @@CART@@ line @@LINE@@", f"{_PKG}.web.CheckoutController"),
)


def _app_frame(root: Path, path: str, cls: str, method: str, marker: str) -> JavaFrame:
    line = line_of(root, f"{_JAVA}/{path}", marker)
    return JavaFrame(f"{_PKG}.{cls}", method, path.rsplit("/", 1)[-1], line)


def _checkout_traces(root: Path, commit: str) -> dict[str, SampleTrace]:
    mvc = spring_mvc_frames(commit)
    checkout = (
        cglib_proxy(f"{_PKG}.service.CheckoutService", "placeOrder", commit),
        _app_frame(root, "web/CheckoutController.java", "web.CheckoutController", "checkout",
                   "checkoutService.placeOrder("),
        *mvc,
    )
    deref = _app_frame(root, "service/CheckoutService.java", "service.CheckoutService", "placeOrder",
                       "customer.getAddress().getCountry()")
    npe = JavaException("java.lang.NullPointerException",
                        f'Cannot invoke "{_PKG}.model.Customer.getAddress()" because "customer" is null',
                        (deref, *checkout))
    require = _app_frame(root, "service/CouponService.java", "service.CouponService", "apply",
                         "Objects.requireNonNull(cart.getCouponCode()")
    apply_call = _app_frame(root, "service/CheckoutService.java", "service.CheckoutService", "placeOrder",
                            "coupons.apply(cart")
    coupon = JavaException("java.lang.NullPointerException", "couponCode", (
        JavaFrame("java.util.Objects", "requireNonNull", "Objects.java", 233, "java.base"),
        require, apply_call, *checkout))
    update = (_app_frame(root, "web/CheckoutController.java", "web.CheckoutController", "updateQuantity",
                         "quantityParser.parse("), *mvc)
    parse = _app_frame(root, "web/QuantityParser.java", "web.QuantityParser", "parse", "Integer.parseInt(raw")
    rethrow = _app_frame(root, "web/QuantityParser.java", "web.QuantityParser", "parse",
                         "throw new IllegalArgumentException")
    quantity = (
        JavaException("java.lang.IllegalArgumentException", "Invalid quantity for line @@LINE@@",
                      (rethrow, *update)),
        JavaException("java.lang.NumberFormatException", 'For input string: "@@QTY@@"', (
            JavaFrame("java.lang.NumberFormatException", "forInputString", "NumberFormatException.java", 67,
                      "java.base"),
            JavaFrame("java.lang.Integer", "parseInt", "Integer.java", 668, "java.base"),
            JavaFrame("java.lang.Integer", "parseInt", "Integer.java", 786, "java.base"),
            parse, *update)),
    )
    return {
        "customer-npe": java_trace("customer-npe", commit, (npe,), _line(deref)),
        "coupon-required": java_trace("coupon-required", commit, (coupon,), _line(require)),
        "bad-quantity": java_trace("bad-quantity", commit, quantity, _line(parse)),
    }


def _line(frame: JavaFrame) -> int:
    assert frame.line is not None  # in-app frames are always located by line_of
    return frame.line


# --- payments-service (Go) -----------------------------------------------------------------------------

_GO_MODULE = "github.com/acme/payments"
_PAYMENTS_BUGS = (
    SampleBug("settle-out-of-range", "runtime.Error", "internal/ledger/ledger.go", "(*Ledger).Settle",
              "panic recovered while settling batch @@BATCH@@", "payments/api"),
)


def _payments_traces(root: Path, commit: str) -> dict[str, SampleTrace]:
    settle = line_of(root, "internal/ledger/ledger.go", "batch[len(batch)]")
    frames = (
        GoFrame(f"{_GO_MODULE}/internal/ledger.(*Ledger).Settle", "0x@@ADDR1@@, {0x@@ADDR2@@, 0x@@N@@, 0x8}",
                "/app/internal/ledger/ledger.go", settle, "0x1d4"),
        GoFrame(f"{_GO_MODULE}/internal/api.(*Handler).settle",
                "0x@@ADDR3@@, {0x9a5e40, 0x@@ADDR1@@}, 0x@@ADDR2@@", "/app/internal/api/handler.go",
                line_of(root, "internal/api/handler.go", "h.Ledger.Settle(batch)"), "0x9b"),
        GoFrame("net/http.HandlerFunc.ServeHTTP", "0x0?, {0x9a5e40?, 0x@@ADDR1@@?}, 0x0?",
                "/usr/local/go/src/net/http/server.go", 2166, "0x29"),
        GoFrame("net/http.(*ServeMux).ServeHTTP", "0x0?, {0x9a5e40, 0x@@ADDR1@@}, 0x@@ADDR2@@",
                "/usr/local/go/src/net/http/server.go", 2683, "0x1ad"),
        GoFrame("net/http.serverHandler.ServeHTTP", "{0x0?}, {0x9a5e40?, 0x@@ADDR1@@?}, 0x6?",
                "/usr/local/go/src/net/http/server.go", 3137, "0x8e"),
        GoFrame("net/http.(*conn).serve", "0x@@ADDR3@@, {0x9a6a18, 0xc0001b4000}",
                "/usr/local/go/src/net/http/server.go", 2039, "0x5e8"),
    )
    value = "runtime error: index out of range [@@N@@] with length @@N@@"
    trace = go_panic("settle-out-of-range", "runtime.Error", commit, value, frames, settle, _GO_MODULE)
    return {"settle-out-of-range": trace}


# --- building the repositories -------------------------------------------------------------------------

_TraceCapture = Callable[[Path, str], dict[str, SampleTrace]]
_SERVICES: tuple[tuple[str, Language, list[CommitSpec], tuple[SampleBug, ...], _TraceCapture], ...] = (
    ("checkout-service", "java", sources.CHECKOUT_SERVICE, _CHECKOUT_BUGS, _checkout_traces),
    ("orders-service", "python", sources.ORDERS_SERVICE, _ORDERS_BUGS, _orders_traces),
    ("payments-service", "go", sources.PAYMENTS_SERVICE, _PAYMENTS_BUGS, _payments_traces),
)


def build_sample_repos(root: Path) -> dict[str, SampleService]:
    """Create the sample services' git repositories under `root` (one directory per server id).

    Commits are reproducible (fixed author and dates), so the same shas come out on every machine.
    """
    services = {}
    for server_id, language, commits, bugs, capture in _SERVICES:
        repo_dir = root / server_id
        shas, deployed, traces = _build_repo(repo_dir, commits, capture)
        services[server_id] = SampleService(server_id, language, repo_dir, shas, deployed, bugs, traces)
    return services


def _build_repo(
    repo_dir: Path, commits: list[CommitSpec], capture: _TraceCapture
) -> tuple[tuple[str, ...], tuple[str, ...], dict[tuple[str, str], SampleTrace]]:
    repo_dir.mkdir(parents=True, exist_ok=False)
    repo = git.Repo.init(repo_dir, initial_branch="main")
    shas: list[str] = []
    deployed: list[str] = []
    traces: dict[tuple[str, str], SampleTrace] = {}
    try:
        for index, spec in enumerate(commits):
            for path, text in spec.files.items():
                target = repo_dir / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            repo.index.add(sorted(spec.files))
            date = f"{_FIRST_COMMIT_TIME + index * 86_400} +0000"
            commit = repo.index.commit(spec.message, author=_AUTHOR, committer=_AUTHOR,
                                       author_date=date, commit_date=date)
            shas.append(commit.hexsha)
            if spec.deployed:
                deployed.append(commit.hexsha)
                # The working tree is exactly this commit now: capture what it does when it fails.
                for bug, trace in capture(repo_dir, commit.hexsha).items():
                    traces[(bug, commit.hexsha)] = trace
    finally:
        repo.close()
    return tuple(shas), tuple(deployed), traces
