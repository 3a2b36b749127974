"""Real git repositories with real commits for tests: a builder, and mini services with real bugs.

Each `*_service(path)` returns a `Service`: a repository whose last commit introduced a bug, plus the
line numbers of marked lines. Python, Node and Java services can be run for real (`run_python`,
`run_node`, `run_java`) from a deployed copy, giving the real trace as an `ErrorEvent`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from analysis.event import Cluster, ErrorEvent, ExceptionInfo, Frame

_GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git in `cwd` with no user/system config; returns stdout, raises on failure."""
    full_env = {**os.environ, **_GIT_ENV, **(env or {})}
    proc = subprocess.run(["git", *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


class GitRepo:
    """A working repository on branch `main` where tests write files and make commits."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "-b", "main")
        self._tick = 1_700_000_000

    def write(self, files: dict[str, str | bytes]) -> None:
        """Write (or overwrite) files relative to the repository root."""
        for rel, content in files.items():
            target = self.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8")

    def commit(self, message: str, files: dict[str, str | bytes] | None = None,
               author: str = "Dev One <dev1@example.com>") -> str:
        """Write `files`, commit everything with a fixed, increasing date; returns the full sha."""
        if files:
            self.write(files)
        self._tick += 3600
        name, email = author.rsplit(" <", 1)
        date = f"{self._tick} +0000"
        email = email.rstrip(">")
        env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
               "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": date}
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "--allow-empty", "-m", message, env=env)
        return self.head()

    def head(self) -> str:
        """Full sha of HEAD."""
        return git(self.path, "rev-parse", "HEAD")


def line_of(text: str, marker: str) -> int:
    """1-based number of the only line of `text` containing `marker`."""
    hits = [i for i, line in enumerate(text.splitlines(), 1) if marker in line]
    if len(hits) != 1:
        raise AssertionError(f"marker {marker!r} found on lines {hits}")
    return hits[0]


@dataclass
class Service:
    """A mini service in a real repository; `commits` by name, `files` as at the last commit."""

    repo: GitRepo
    commits: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.repo.path

    def line(self, rel: str, marker: str) -> int:
        """Line number of `marker` in file `rel` at the last commit."""
        return line_of(self.files[rel], marker)

    def commit(self, name: str, message: str, files: dict[str, str],
               author: str = "Dev One <dev1@example.com>") -> str:
        """Commit `files` as commit `name`; returns its sha."""
        self.files.update(files)
        self.commits[name] = self.repo.commit(message, dict(files), author)
        return self.commits[name]


def _dedent(text: str) -> str:
    lines = text.strip("\n").splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines) + "\n"


def cluster_of(event: ErrorEvent, fingerprint: str = "fp-test") -> Cluster:
    """A one-event burst around `event`."""
    return Cluster(server_id=event.server_id, tenant=event.tenant, fingerprint=fingerprint,
                   exception_type=event.exception_type, first_seen=event.timestamp, last_seen=event.timestamp,
                   count=1, commits=(event.commit,) if event.commit else (), samples=(event,))


def deploy_copy(src: Path, dest: Path, subdir: str = "") -> Path:
    """Copy the repository's files (no .git), or only `subdir`, to `dest`, like a container image build."""
    shutil.copytree(src / subdir if subdir else src, dest, ignore=shutil.ignore_patterns(".git"))
    return dest


# --- Python ------------------------------------------------------------------------------------------

PY_SERVICE = {
    "src/orders/__init__.py": "",
    "src/orders/repository.py": _dedent('''
        """Customer lookups."""

        _CUSTOMERS = {"c1": {"name": "Ada"}, "c2": {"name": "Grace"}}


        class Customer:
            def __init__(self, name):
                self.name = name


        def find_customer(customer_id):
            record = _CUSTOMERS.get(customer_id)
            if record is None:
                return None
            return Customer(record["name"])
        '''),
    "src/orders/validation.py": _dedent('''
        def require_positive(value, name):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")  # MARK:raise-positive
            return value
        '''),
    "src/orders/api.py": _dedent('''
        from orders.service import place_order


        class OrderRejected(Exception):
            pass


        def handle(request):
            try:
                return place_order(request["customer"], request["qty"])  # MARK:handle-call
            except ValueError as exc:
                raise OrderRejected(f"bad order: {exc}") from exc
        '''),
    "tests/test_service.py": _dedent('''
        from orders.service import quote


        class FakePricing:
            def price_for(self, customer_id):
                raise KeyError(customer_id)  # MARK:fake-raise


        def test_quote_unknown_price():
            quote("c1", FakePricing())  # MARK:test-call
        '''),
    "README.md": "Orders service.\n",
}

PY_SERVICE_V1 = _dedent('''
    from orders.repository import find_customer
    from orders.validation import require_positive


    def place_order(customer_id, qty_text):
        qty = int(qty_text)  # MARK:int
        require_positive(qty, "qty")  # MARK:require
        customer = find_customer(customer_id)
        if customer is None:
            raise LookupError(f"unknown customer {customer_id}")
        return {"customer": customer.name, "qty": qty}


    def quote(customer_id, pricing):
        return pricing.price_for(customer_id)  # MARK:price-call
    ''')

PY_SERVICE_V2 = PY_SERVICE_V1.replace(
    '''    if customer is None:
        raise LookupError(f"unknown customer {customer_id}")
    return {"customer": customer.name, "qty": qty}''',
    '''    return {"customer": customer.name.upper(), "qty": qty}  # MARK:deref''',
)


def python_service(path: Path) -> Service:
    """Orders service; commit `bug` drops the unknown-customer check (AttributeError on None)."""
    service = Service(GitRepo(path))
    service.commit("initial", "Add orders service", {**PY_SERVICE, "src/orders/service.py": PY_SERVICE_V1})
    service.commit("bug", "Simplify order placement", {"src/orders/service.py": PY_SERVICE_V2},
                   author="Dev Two <dev2@example.com>")
    return service


_PY_RUNNER = _dedent('''
    import importlib, json, sys, traceback
    sys.path.insert(0, sys.argv[1])
    module, function, args = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    try:
        getattr(importlib.import_module(module), function)(*args)
    except BaseException as exc:
        chain = []
        while exc is not None:
            frames = [{"filename": f.filename, "function": f.name, "lineno": f.lineno}
                      for f in reversed(traceback.extract_tb(exc.__traceback__))]
            chain.append({"type": type(exc).__name__, "value": str(exc), "frames": frames})
            exc = exc.__cause__ or exc.__context__
        print(json.dumps({"chain": chain, "raw": traceback.format_exc()}))
    ''')


def run_python(deploy_dir: Path, module: str, function: str, *args: object, commit: str | None = None,
               server: str = "orders") -> ErrorEvent:
    """Run `module.function(*args)` from `deploy_dir` in a real interpreter; its traceback as an event."""
    runner = deploy_dir.parent / "_runner.py"
    runner.write_text(_PY_RUNNER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only the deployed code is importable
    proc = subprocess.run([sys.executable, str(runner), str(deploy_dir), module, function, json.dumps(args)],
                          capture_output=True, text=True, check=True, timeout=60, cwd=deploy_dir, env=env)
    data = json.loads(proc.stdout)
    # The runner walks from the caught exception down its causes: outermost first, root cause last.
    chain = tuple(ExceptionInfo(e["type"], e["value"], tuple(Frame(**f) for f in e["frames"]))
                  for e in data["chain"])
    return ErrorEvent(server_id=server, timestamp=1_700_000_000.0, message=chain[-1].value, commit=commit,
                      exceptions=chain, raw_trace=data["raw"])


# --- Node.js -----------------------------------------------------------------------------------------

NODE_SERVICE = {
    "package.json": '{"name": "orders", "version": "1.0.0", "main": "src/orders.js"}\n',
    "src/customers.js": _dedent("""
        'use strict';
        const CUSTOMERS = new Map([['c1', { name: 'Ada' }]]);

        function findCustomer(id) {
          return CUSTOMERS.get(id);
        }

        module.exports = { findCustomer };
        """),
    "src/util/validate.js": _dedent("""
        'use strict';
        function requireField(obj, field) {
          if (obj[field] === undefined || obj[field] === '') {
            throw new Error(`${field} is required`); // MARK:require-throw
          }
          return obj[field];
        }

        module.exports = { requireField };
        """),
    "src/orders.js": _dedent("""
        'use strict';
        const { findCustomer } = require('./customers');
        const { requireField } = require('./util/validate');

        function placeOrder(body) {
          requireField(body, 'customerId'); // MARK:require
          const items = JSON.parse(body.items); // MARK:parse
          const customer = findCustomer(body.customerId);
          return { name: customer.name.toUpperCase(), items }; // MARK:deref
        }

        module.exports = { placeOrder };
        """),
    "test/orders.test.js": _dedent("""
        'use strict';
        const { placeOrder } = require('../src/orders');
        placeOrder({ customerId: 'c1', items: '[]' });
        """),
}


def node_service(path: Path) -> Service:
    """Orders service in Node; the last commit is where the code came in."""
    service = Service(GitRepo(path))
    service.commit("initial", "Add orders service", NODE_SERVICE)
    return service


_NODE_FRAME = re.compile(r"^\s*at (?:(?P<fn>.+?) \()?(?P<file>[^()]+?)(?::(?P<line>\d+):\d+)?\)?$")


def run_node(entry: Path, body: dict[str, object], commit: str | None = None,
             server: str = "orders-js") -> ErrorEvent:
    """Call `placeOrder(body)` from `entry` in real Node; the V8 stack as an event (parsed minimally)."""
    script = ("const m = require(process.argv[1]);"
              "try { m.placeOrder(JSON.parse(process.argv[2])); }"
              "catch (e) { console.log(JSON.stringify("
              "{name: e.name, message: e.message, stack: e.stack})); }")
    node = shutil.which("node")
    assert node, "node is required for the Node localiser tests"
    proc = subprocess.run([node, "-e", script, str(entry), json.dumps(body)], capture_output=True, text=True,
                          check=True, timeout=60)
    data = json.loads(proc.stdout)
    frames = []
    for row in data["stack"].splitlines()[1:]:
        match = _NODE_FRAME.match(row)
        if match:
            frames.append(Frame(function=match["fn"] or "<anonymous>", filename=match["file"],
                                lineno=int(match["line"]) if match["line"] else None))
    exc = ExceptionInfo(data["name"], data["message"], tuple(frames))
    return ErrorEvent(server_id=server, timestamp=1_700_000_000.0, message=data["message"], commit=commit,
                      exceptions=(exc,), raw_trace=data["stack"])


# --- Java --------------------------------------------------------------------------------------------

_JAVA = "src/main/java/com/acme/"
JAVA_SERVICE = {
    _JAVA + "orders/Main.java": _dedent("""
        package com.acme.orders;

        public final class Main {
            public static void main(String[] args) {
                OrderService service = new OrderService(new CustomerRepository(), new AuditLog());
                if (args[1].equals("greet")) {
                    System.out.println(service.greet(args[0]));
                }
                System.out.println(service.place(args[0], args[1])); // MARK:main-call
            }
        }
        """),
    _JAVA + "orders/OrderService.java": _dedent("""
        package com.acme.orders;

        import com.acme.util.Validate;

        public class OrderService {
            private final AuditLog audit;
            private final CustomerRepository customers;

            public OrderService(CustomerRepository customers, AuditLog audit) {
                this.customers = customers;
                this.audit = audit;
            }

            public String greet(String customerId) {
                String entry = audit.find(customerId);
                Customer customer = customers.find(customerId);
                return "Hello " + customer.name() + " " + entry; // MARK:local-deref
            }

            public String place(String customerId, String quantity) {
                Validate.notBlank(customerId, "customerId"); // MARK:validate
                int qty = Integer.parseInt(quantity); // MARK:parse
                String name = customers.find(customerId).name(); // MARK:deref
                return name.toUpperCase() + " x" + qty;
            }
        }
        """),
    _JAVA + "orders/CustomerRepository.java": _dedent("""
        package com.acme.orders;

        import java.util.Map;

        public class CustomerRepository {
            private final Map<String, Customer> byId = Map.of("c1", new Customer("Ada"));

            public Customer find(String id) { // MARK:find
                return byId.get(id);
            }
        }
        """),
    _JAVA + "orders/AuditLog.java": _dedent("""
        package com.acme.orders;

        public class AuditLog {
            public String find(String id) {
                return "seen " + id;
            }
        }
        """),
    _JAVA + "orders/Customer.java": "package com.acme.orders;\n\npublic record Customer(String name) {}\n",
    _JAVA + "util/Validate.java": _dedent("""
        package com.acme.util;

        public final class Validate {
            private Validate() {}

            public static String notBlank(String value, String name) {
                if (value == null || value.isBlank()) {
                    throw new IllegalArgumentException(name + " must not be blank"); // MARK:throw
                }
                return value;
            }
        }
        """),
    "src/test/java/com/acme/orders/OrderServiceTest.java": _dedent("""
        package com.acme.orders;

        class OrderServiceTest {
            void placesOrder() {
                new OrderService(new CustomerRepository(), new AuditLog()).place("c1", "2");
            }
        }
        """),
}


def java_service(path: Path) -> Service:
    """Orders service in Java (Maven layout) with a Validate helper."""
    service = Service(GitRepo(path))
    service.commit("initial", "Add orders service", JAVA_SERVICE)
    return service


_JAVA_HEAD = re.compile(r"^(?:Exception in thread \"[^\"]*\" |Caused by: )(?P<type>[\w.$]+)"
                        r"(?:: (?P<msg>.*))?$")
_JAVA_AT = re.compile(r"^\s+at (?:[\w.]+/)?(?P<cls>[\w.$]+)\.(?P<fn>[\w$<>]+)"
                      r"\((?P<file>[^:)]*)(?::(?P<line>\d+))?\)$")


def compile_java(src_root: Path, out: Path) -> None:
    """Compile every main source file of the service into `out`."""
    javac = shutil.which("javac")
    assert javac, "javac is required for the Java localiser tests"
    sources = sorted(str(p) for p in (src_root / "src/main/java").rglob("*.java"))
    # With local variable names, as Maven and Gradle compile by default: helpful NPEs then name the local.
    subprocess.run([javac, "-g", "-d", str(out), *sources], check=True, capture_output=True, timeout=120)


def run_java(classes: Path, *args: str, commit: str | None = None, server: str = "orders-jvm") -> ErrorEvent:
    """Run the compiled Main with `args` in a real JVM; its uncaught-exception trace as an event."""
    java = shutil.which("java")
    assert java, "java is required for the Java localiser tests"
    proc = subprocess.run([java, "-cp", str(classes), "com.acme.orders.Main", *args], capture_output=True,
                          text=True, check=False, timeout=60)
    chain: list[ExceptionInfo] = []
    frames: list[Frame] = []
    for row in proc.stderr.splitlines():
        head, at = _JAVA_HEAD.match(row), _JAVA_AT.match(row)
        if head:
            if chain:
                chain[-1] = ExceptionInfo(chain[-1].type, chain[-1].value, tuple(frames))
            chain.append(ExceptionInfo(head["type"], head["msg"] or ""))
            frames = []
        elif at:
            frames.append(Frame(function=at["fn"], module=at["cls"], filename=at["file"],
                                lineno=int(at["line"]) if at["line"] else None))
    assert chain, f"no Java trace in: {proc.stderr[:500]}"
    chain[-1] = ExceptionInfo(chain[-1].type, chain[-1].value, tuple(frames))
    return ErrorEvent(server_id=server, timestamp=1_700_000_000.0, message=chain[-1].value, commit=commit,
                      exceptions=tuple(chain), raw_trace=proc.stderr)


# --- Go (no toolchain needed: traces are written against the real line numbers) --------------------------

GO_SERVICE = {
    "go.mod": "module github.com/acme/paysvc\n\ngo 1.22\n",
    "cmd/paysvc/main.go": _dedent("""
        package main

        import (
            "fmt"

            "github.com/acme/paysvc/internal/pay"
            "github.com/acme/paysvc/internal/pb"
            "github.com/acme/paysvc/internal/store"
        )

        func main() {
            svc := &pay.Service{Accounts: store.New()}
            fmt.Println(svc.Charge(&pb.ChargeRequest{Account: "a9", Amount: "100"})) // MARK:main-call
        }
        """),
    "internal/pay/charge.go": _dedent("""
        package pay

        import (
            "strconv"

            "github.com/acme/paysvc/internal/pb"
            "github.com/acme/paysvc/internal/store"
        )

        type Service struct {
            Accounts *store.Accounts
        }

        func (s *Service) Charge(req *pb.ChargeRequest) (string, error) {
            cents, err := strconv.Atoi(req.GetAmount()) // MARK:atoi
            if err != nil {
                return "", err
            }
            acct := s.Accounts.Find(req.GetAccount()) // MARK:find-call
            return acct.Currency + strconv.Itoa(cents), nil // MARK:deref
        }
        """),
    "internal/pay/charge_test.go": _dedent("""
        package pay

        import "testing"

        func TestCharge(t *testing.T) {
            (&Service{}).Charge(nil) // MARK:test-call
        }
        """),
    "internal/store/store.go": _dedent("""
        package store

        type Account struct {
            Currency string
        }

        type Accounts struct {
            byID map[string]*Account
        }

        func New() *Accounts {
            return &Accounts{byID: map[string]*Account{"a1": {Currency: "EUR"}}}
        }

        func (a *Accounts) Find(id string) *Account { // MARK:find
            return a.byID[id]
        }
        """),
    "internal/pb/pay.pb.go": _dedent("""
        // Code generated by protoc-gen-go. DO NOT EDIT.
        package pb

        type ChargeRequest struct {
            Account string
            Amount  string
        }

        func (x *ChargeRequest) GetAccount() string {
            return x.Account // MARK:get-account
        }

        func (x *ChargeRequest) GetAmount() string {
            return x.Amount
        }
        """),
}


def go_service(path: Path) -> Service:
    """Payment service in Go with a generated protobuf file."""
    service = Service(GitRepo(path))
    service.commit("initial", "Add payment service", GO_SERVICE)
    return service
