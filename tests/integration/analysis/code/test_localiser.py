"""The heuristic localiser on real repositories, with real Python, Node and Java traces and Go panics."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from analysis.code.burst import analysis_id, burst_id
from analysis.code.localiser import localise
from analysis.code.repo import open_local
from analysis.code.tools import FileTools
from analysis.event import ErrorEvent, ExceptionInfo, Frame
from analysis.intake.stacktrace import parse_trace
from analysis.report import Analysis
from tests.gitrepo import (
    GitRepo,
    Service,
    cluster_of,
    compile_java,
    deploy_copy,
    go_service,
    java_service,
    node_service,
    python_service,
    run_java,
    run_node,
    run_python,
)

pytestmark = pytest.mark.integration


def analyse(service: Service, event: ErrorEvent) -> Analysis:
    checkout = open_local(service.path)
    tools = FileTools(checkout.root, repo_dir=checkout.repo_dir, commit=checkout.commit)
    return localise(cluster_of(event), checkout, tools)


def culprit_at(analysis: Analysis) -> tuple[str, int | None]:
    """(path, line) of the culprit; fails when there is none."""
    assert analysis.culprit is not None, analysis.notes
    return analysis.culprit.path, analysis.culprit.line


def suspect_at(analysis: Analysis, path: str, line: int) -> int:
    """Rank (0 = culprit) of the suspect at path:line; fails when it is absent."""
    ranks = [i for i, s in enumerate(analysis.suspects) if (s.path, s.line) == (path, line)]
    assert ranks, f"{path}:{line} not among {[(s.path, s.line) for s in analysis.suspects]}"
    return ranks[0]


# --- Python: real tracebacks from a deployed copy (src/ copied to app/, like a container build) ----------

@pytest.fixture(scope="module")
def py(tmp_path_factory: pytest.TempPathFactory) -> tuple[Service, Path]:
    base = tmp_path_factory.mktemp("py")
    service = python_service(base / "repo")
    deployed = deploy_copy(service.path, base / "image" / "app", "src")
    shutil.copytree(service.path / "tests", deployed / "tests")
    return service, deployed


class TestPython:
    """Python tracebacks, chained, captured from a real interpreter."""

    SERVICE = "src/orders/service.py"

    def test_bad_literal_culprit_is_the_parsing_line(self, py: tuple[Service, Path]) -> None:
        """int('abc') inside place_order: the culprit is that line; the chained wrapper ranks below."""
        service, deployed = py
        event = run_python(deployed, "orders.api", "handle", {"customer": "c1", "qty": "abc"})
        assert [e.type for e in event.exceptions] == ["OrderRejected", "ValueError"]
        analysis = analyse(service, event)
        assert culprit_at(analysis) == (self.SERVICE, service.line(self.SERVICE, "MARK:int"))
        api = "src/orders/api.py"
        assert suspect_at(analysis, api, service.line(api, "MARK:handle-call")) > 0

    def test_validation_helper_points_at_its_caller(self, py: tuple[Service, Path]) -> None:
        """require_positive raises, but the caller passing 0 ranks first and the helper below it."""
        service, deployed = py
        event = run_python(deployed, "orders.api", "handle", {"customer": "c1", "qty": "0"})
        analysis = analyse(service, event)
        assert analysis.culprit is not None
        assert analysis.culprit.line == service.line(self.SERVICE, "MARK:require")
        helper = suspect_at(analysis, "src/orders/validation.py",
                            service.line("src/orders/validation.py", "MARK:raise-positive"))
        assert helper > 0
        assert analysis.suspects[helper].score < analysis.suspects[0].score
        assert "require_positive" in analysis.suspects[0].reason

    def test_none_dereference_names_callee_and_buggy_commit(self, py: tuple[Service, Path]) -> None:
        """AttributeError on None: the dereference is the culprit, find_customer a suspect, blame the bug."""
        service, deployed = py
        event = run_python(deployed, "orders.api", "handle", {"customer": "c9", "qty": "2"})
        assert "NoneType" in event.exceptions[-1].value
        analysis = analyse(service, event)
        assert analysis.culprit is not None
        assert analysis.culprit.line == service.line(self.SERVICE, "MARK:deref")
        callee = analysis.suspects[suspect_at(analysis, "src/orders/repository.py",
                                              service.line("src/orders/repository.py", "def find_customer"))]
        assert callee.function == "find_customer"
        assert analysis.suspect_commits[0].sha == service.commits["bug"]
        assert analysis.suspect_commits[0].summary == "Simplify order placement"
        assert "customer.name.upper()" in analysis.root_cause

    def test_test_file_frame_is_never_the_culprit(self, py: tuple[Service, Path]) -> None:
        """A fake in a test file raised; the production caller is the culprit and no test file ranks."""
        service, deployed = py
        analysis = analyse(service, run_python(deployed, "tests.test_service", "test_quote_unknown_price"))
        assert analysis.culprit is not None
        assert (analysis.culprit.path, analysis.culprit.line) == (
            self.SERVICE, service.line(self.SERVICE, "MARK:price-call"))
        assert not any(s.path.startswith("tests/") for s in analysis.suspects)
        assert any("test code tests/test_service.py" in n for n in analysis.notes)

    def test_report_is_complete_and_deterministic(self, py: tuple[Service, Path]) -> None:
        """Status, ids, cluster, commit, validated citations and bounded confidence are all filled."""
        service, deployed = py
        event = run_python(deployed, "orders.api", "handle", {"customer": "c1", "qty": "abc"})
        analysis = analyse(service, event)
        cluster = cluster_of(event)
        assert (analysis.status, analysis.analyzer) == ("heuristic", "heuristic")
        assert analysis.analysis_id == burst_id(cluster)
        assert analysis.analysis_id != analysis_id(cluster.server_id, cluster.tenant, "other", cluster.first_seen)
        assert analysis.commit == service.commits["bug"]
        assert analysis.cluster.sample_messages == [event.message]
        assert 0.3 <= analysis.confidence <= 0.6
        assert analysis.citations and all(c.commit == service.commits["bug"] and len(c.blob_sha) == 40
                                          for c in analysis.citations)
        first, (_, line) = analysis.citations[0], culprit_at(analysis)
        assert first.path == self.SERVICE and line is not None and first.start_line <= line <= first.end_line
        assert "qty = int(qty_text)" in analysis.root_cause
        assert Analysis.model_validate_json(analysis.model_dump_json()) == analysis


# --- Node: real V8 stacks ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> tuple[Service, Path]:
    base = tmp_path_factory.mktemp("node")
    service = node_service(base / "repo")
    return service, deploy_copy(service.path, base / "image" / "app") / "src/orders.js"


class TestNode:
    """Node.js stacks from a real node process."""

    def test_require_helper_points_at_caller(self, node: tuple[Service, Path]) -> None:
        """requireField throws for a missing field: placeOrder's call ranks first."""
        service, entry = node
        analysis = analyse(service, run_node(entry, {"customerId": ""}))
        assert culprit_at(analysis) == ("src/orders.js", service.line("src/orders.js", "MARK:require"))
        helper = "src/util/validate.js"
        assert suspect_at(analysis, helper, service.line(helper, "MARK:require-throw")) > 0

    def test_json_parse_of_bad_input_points_at_the_caller(self, node: tuple[Service, Path]) -> None:
        """JSON.parse fed bad input: the in-app line that called it is the culprit, and the reason says so."""
        service, entry = node
        analysis = analyse(service, run_node(entry, {"customerId": "c1", "items": "{bad"}))
        assert analysis.culprit is not None
        assert analysis.culprit.line == service.line("src/orders.js", "MARK:parse")
        assert "JSON.parse" in analysis.suspects[0].reason

    def test_undefined_property_names_the_callee(self, node: tuple[Service, Path]) -> None:
        """Reading .name of undefined: findCustomer, which returned undefined, is the second suspect."""
        service, entry = node
        analysis = analyse(service, run_node(entry, {"customerId": "c9", "items": "[]"}))
        assert analysis.culprit is not None
        assert analysis.culprit.line == service.line("src/orders.js", "MARK:deref")
        customers = "src/customers.js"
        assert suspect_at(analysis, customers, service.line(customers, "function findCustomer")) == 1


# --- Java: compiled and run in a real JVM ------------------------------------------------------------------

@pytest.fixture(scope="module")
def jvm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Service, Path]:
    base = tmp_path_factory.mktemp("java")
    service = java_service(base / "repo")
    compile_java(service.path, base / "classes")
    return service, base / "classes"


class TestJava:
    """Java traces mapped through package → path (Maven layout)."""

    ORDERS = "src/main/java/com/acme/orders/OrderService.java"

    def test_validate_helper_points_at_caller(self, jvm: tuple[Service, Path]) -> None:
        """Validate.notBlank throws IllegalArgumentException: OrderService.place ranks first."""
        service, classes = jvm
        analysis = analyse(service, run_java(classes, "", "2"))
        assert culprit_at(analysis) == (self.ORDERS, service.line(self.ORDERS, "MARK:validate"))
        validate = "src/main/java/com/acme/util/Validate.java"
        assert suspect_at(analysis, validate, service.line(validate, "MARK:throw")) > 0

    def test_parse_int_points_at_caller(self, jvm: tuple[Service, Path]) -> None:
        """NumberFormatException from Integer.parseInt: the calling line is the culprit."""
        service, classes = jvm
        analysis = analyse(service, run_java(classes, "c1", "x"))
        assert analysis.culprit is not None
        assert analysis.culprit.line == service.line(self.ORDERS, "MARK:parse")
        assert "Integer.parseInt" in analysis.suspects[0].reason

    def test_helpful_npe_names_the_method_returning_null(self, jvm: tuple[Service, Path]) -> None:
        """'the return value of CustomerRepository.find is null': find is the second suspect."""
        service, classes = jvm
        analysis = analyse(service, run_java(classes, "c9", "2"))
        assert analysis.culprit is not None
        assert analysis.culprit.line == service.line(self.ORDERS, "MARK:deref")
        repo_file = "src/main/java/com/acme/orders/CustomerRepository.java"
        assert suspect_at(analysis, repo_file, service.line(repo_file, "MARK:find")) == 1

    def test_a_null_local_names_the_definition_its_receiver_is_declared_as(self, jvm: tuple[Service, Path]) -> None:
        """'because "customer" is null', assigned from `customers.find(...)` while `AuditLog` defines a `find`
        too: the suspect is CustomerRepository's, the class `customers` is declared as (the demo named the
        other class's method, first in path order)."""
        service, classes = jvm
        event = run_java(classes, "c9", "greet")
        assert 'because "customer" is null' in event.message
        analysis = analyse(service, event)
        assert culprit_at(analysis) == (self.ORDERS, service.line(self.ORDERS, "MARK:local-deref"))
        repo_file = "src/main/java/com/acme/orders/CustomerRepository.java"
        assert suspect_at(analysis, repo_file, service.line(repo_file, "MARK:find")) == 1
        assert "CustomerRepository.java" in analysis.root_cause and "AuditLog" not in analysis.root_cause


# --- Go: panics written against the repository's real line numbers ---------------------------------------

@pytest.fixture(scope="module")
def go(tmp_path_factory: pytest.TempPathFactory) -> Service:
    return go_service(tmp_path_factory.mktemp("go") / "repo")


def go_panic(frames: list[Frame]) -> ErrorEvent:
    message = "runtime error: invalid memory address or nil pointer dereference"
    exc = ExceptionInfo("panic", message, tuple(frames))
    return ErrorEvent(server_id="pay", timestamp=1_700_000_000.0, message=exc.value, exceptions=(exc,))


class TestGo:
    """Go panics: import paths and /go/src paths map onto the module's files."""

    MOD = "github.com/acme/paysvc"

    def test_nil_dereference_in_service_names_the_store_lookup(self, go: Service) -> None:
        """A nil Account dereferenced in Charge: Charge is the culprit, store.Find the second suspect."""
        charge = "internal/pay/charge.go"
        event = go_panic([
            Frame(function="runtime.panicmem", filename="/usr/local/go/src/runtime/panic.go", lineno=261),
            Frame(function="runtime.sigpanic", filename="/usr/local/go/src/runtime/signal_unix.go",
                  lineno=861),
            Frame(function=f"{self.MOD}/internal/pay.(*Service).Charge",
                  filename=f"/go/src/{self.MOD}/{charge}", lineno=go.line(charge, "MARK:deref")),
            Frame(function="main.main", filename=f"/go/src/{self.MOD}/cmd/paysvc/main.go",
                  lineno=go.line("cmd/paysvc/main.go", "MARK:main-call")),
        ])
        analysis = analyse(go, event)
        assert analysis.culprit is not None
        assert (analysis.culprit.path, analysis.culprit.line) == (charge, go.line(charge, "MARK:deref"))
        store = "internal/store/store.go"
        assert suspect_at(analysis, store, go.line(store, "MARK:find")) == 1

    def test_generated_and_test_frames_are_never_the_culprit(self, go: Service) -> None:
        """A nil request panics inside generated pb code called from a test: Charge's call is the culprit."""
        charge = "internal/pay/charge.go"
        event = go_panic([
            Frame(function=f"{self.MOD}/internal/pb.(*ChargeRequest).GetAccount", filename="pay.pb.go",
                  lineno=go.line("internal/pb/pay.pb.go", "MARK:get-account")),
            Frame(function=f"{self.MOD}/internal/pay.(*Service).Charge", filename="charge.go",
                  lineno=go.line(charge, "MARK:find-call")),
            Frame(function=f"{self.MOD}/internal/pay.TestCharge", filename="charge_test.go",
                  lineno=go.line("internal/pay/charge_test.go", "MARK:test-call")),
        ])
        analysis = analyse(go, event)
        assert analysis.culprit is not None
        assert (analysis.culprit.path, analysis.culprit.line) == (charge, go.line(charge, "MARK:find-call"))
        assert not any(s.path.endswith((".pb.go", "_test.go")) for s in analysis.suspects)
        assert any("generated code internal/pb/pay.pb.go" in n for n in analysis.notes)


class TestWithoutFrames:
    """Events the localiser cannot place still give a report."""

    def test_message_only_event(self, go: Service) -> None:
        """No stack trace: no culprit, low confidence, and a note saying why."""
        event = ErrorEvent(server_id="pay", timestamp=1.0, message="payment gateway returned 502")
        analysis = analyse(go, event)
        assert analysis.culprit is None and analysis.suspects == []
        assert analysis.confidence <= 0.2
        assert any("no stack trace" in n for n in analysis.notes)
        # Not "no frame could be located", which read as a failed search when there was nothing to search.
        assert analysis.root_cause == ("payment gateway returned 502 "
                                       "(the log carries no stack trace: no code to locate).")

    def test_in_app_frame_missing_from_the_commit_is_noted(self, go: Service) -> None:
        """A frame the event calls in-app but whose file this commit lacks hints at a wrong commit."""
        frame = Frame(function=f"{TestGo.MOD}/internal/refund.Issue", filename="refund.go", lineno=3,
                      in_app=True)
        event = go_panic([frame])
        analysis = analyse(go, event)
        assert analysis.culprit is None
        assert any("has no file in the repository" in n for n in analysis.notes)




class TestWithTheTraceParser:
    """Raw text traces through the project's parser land on the same culprit as the structured frames."""

    @staticmethod
    def reparsed(event: ErrorEvent) -> ErrorEvent:
        chain = parse_trace(event.raw_trace)
        assert chain, f"parser found no trace in: {event.raw_trace[:300]}"
        return replace(event, exceptions=chain)

    def test_python_java_node_raw_traces(self, py: tuple[Service, Path], node: tuple[Service, Path],
                                         jvm: tuple[Service, Path]) -> None:
        """Real tracebacks/stacks as text: parsed, then localised to the same culprit line."""
        (py_service, deployed), (node_service_, entry), (java_service_, classes) = py, node, jvm
        cases = [
            (py_service, run_python(deployed, "orders.api", "handle", {"customer": "c1", "qty": "0"})),
            (node_service_, run_node(entry, {"customerId": "c1", "items": "{bad"})),
            (java_service_, run_java(classes, "", "2")),
        ]
        for service, event in cases:
            assert culprit_at(analyse(service, self.reparsed(event))) == culprit_at(analyse(service, event))

    def test_go_panic_text(self, go: Service) -> None:
        """A Go panic as text (goroutine dump) finds the Charge line and the store lookup."""
        charge, store, main = "internal/pay/charge.go", "internal/store/store.go", "cmd/paysvc/main.go"
        mod = f"/go/src/{TestGo.MOD}"
        text = (
            "panic: runtime error: invalid memory address or nil pointer dereference\n"
            "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x47d8e5]\n\n"
            "goroutine 1 [running]:\n"
            f"{TestGo.MOD}/internal/pay.(*Service).Charge(0xc000012028, 0xc00001c030)\n"
            f"\t{mod}/{charge}:{go.line(charge, 'MARK:deref')} +0x45\n"
            "main.main()\n"
            f"\t{mod}/{main}:{go.line(main, 'MARK:main-call')} +0x8b\n"
            "exit status 2\n"
        )
        event = ErrorEvent(server_id="pay", timestamp=1.0, message="panic", raw_trace=text)
        analysis = analyse(go, self.reparsed(event))
        assert culprit_at(analysis) == (charge, go.line(charge, "MARK:deref"))
        assert suspect_at(analysis, store, go.line(store, "MARK:find")) == 1


# --- Reading the code: another build's lines, the evidence, files no frame names ------------------------

_STATS_V1 = '''\
def mean(values):
    if not values:
        raise ValueError("no values")  # MARK:raise
    return sum(values) / len(values)


def report(rows):
    prices = [row["price"] for row in rows if row["price"] > 0]
    return mean(prices)  # MARK:mean-call
'''


class TestReadingTheCode:
    """The localiser reads the frames' code: lines from another build, guards, and evidence in words."""

    def test_trace_from_another_build_is_placed_in_the_named_function_and_marked(self, tmp_path: Path) -> None:
        """The deployed build had two more comment lines above mean(): the raise is found by name, not
        the line the trace names, and the report says the line is unverified."""
        service = Service(GitRepo(tmp_path / "repo"))
        service.commit("initial", "Add stats", {"stats/__init__.py": "", "stats/core.py": _STATS_V1})
        build = tmp_path / "build"
        (build / "stats").mkdir(parents=True)
        (build / "stats" / "__init__.py").write_text("")
        (build / "stats" / "core.py").write_text("# built 2024-06-01\n# release 7\n" + _STATS_V1)
        event = run_python(build, "stats.core", "report", [{"price": 0}])
        assert event.exceptions[-1].frames[0].lineno == service.line("stats/core.py", "MARK:raise") + 2
        analysis = analyse(service, event)
        assert culprit_at(analysis) == ("stats/core.py", service.line("stats/core.py", "MARK:mean-call"))
        raised = analysis.suspects[suspect_at(analysis, "stats/core.py", service.line("stats/core.py", "MARK:raise"))]
        assert "line unverified" in raised.reason

    def test_the_evidence_names_the_guard_and_the_producing_line(self, tmp_path: Path) -> None:
        """mean() raises on its parameter; report() built the empty list: the reason says both, with lines."""
        service = Service(GitRepo(tmp_path / "repo"))
        service.commit("initial", "Add stats", {"stats/__init__.py": "", "stats/core.py": _STATS_V1})
        deployed = deploy_copy(service.path, tmp_path / "image")
        analysis = analyse(service, run_python(deployed, "stats.core", "report", [{"price": 0}]))
        mean_call = service.line("stats/core.py", "MARK:mean-call")
        assert culprit_at(analysis) == ("stats/core.py", mean_call)
        reason = analysis.suspects[0].reason
        assert "mean() raises when not values, its parameter values (stats/core.py:3)" in reason
        assert f"caller report() passed prices at stats/core.py:{mean_call}, assigned at stats/core.py:8" in reason
        assert "caller report() passed prices" in analysis.root_cause

    def test_callers_say_whom_they_call_and_a_line_is_one_suspect(self, tmp_path: Path) -> None:
        """checkout() sums a generator expression on one line: its two frames make one suspect, which
        calls line_total(); the caller further up says how far up it is."""
        service = Service(GitRepo(tmp_path / "repo"))
        service.commit("initial", "Cart", {"shop/__init__.py": "", "shop/cart.py": _CART})
        deployed = deploy_copy(service.path, tmp_path / "image")
        analysis = analyse(service, run_python(deployed, "shop.cart", "report", {"plum": 2}))
        summed = analysis.suspects[suspect_at(analysis, "shop/cart.py", service.line("shop/cart.py", "MARK:sum"))]
        assert summed.reason.startswith("calls line_total()") and "frames up" not in summed.reason
        report = analysis.suspects[suspect_at(analysis, "shop/cart.py", service.line("shop/cart.py", "MARK:report"))]
        assert report.reason.startswith("leads to line_total(), 3 frames up the stack")


_CART = """\
PRICES = {"apple": 1.0}


def line_total(item, n):
    return PRICES[item] * n  # MARK:raise


def checkout(basket):
    return sum(line_total(item, n) for item, n in basket.items())  # MARK:sum


def report(basket):
    return checkout(basket)  # MARK:report
"""


class TestWithoutApplicationFrames:
    """No frame is application code: the message and the history are searched instead."""

    def test_refused_port_finds_its_configuration_and_the_change_since_the_last_good_deploy(
        self, tmp_path: Path
    ) -> None:
        """Node's ECONNREFUSED carries only a runtime frame: the port leads to the config that names it,
        which also changed since the last good deploy."""
        service = Service(GitRepo(tmp_path / "repo"))
        good = service.commit("good", "Relay", {"src/config.js": "module.exports = { port: 47391 };\n",
                                                "src/relay.js": "const { port } = require('./config');\n"})
        service.commit("bug", "Move the upstream", {"src/config.js": "module.exports = { port: 47393 };\n"})
        frame = Frame(function="TCPConnectWrap.afterConnect [as oncomplete]", filename="node:net", lineno=1555)
        exc = ExceptionInfo("Error", "connect ECONNREFUSED 127.0.0.1:47393", (frame,))
        event = ErrorEvent(server_id="relay", timestamp=1.0, message=exc.value, exceptions=(exc,))
        checkout = open_local(service.path)
        tools = FileTools(checkout.root, repo_dir=checkout.repo_dir, commit=checkout.commit)
        analysis = localise(cluster_of(event), checkout, tools, last_good=good)
        assert culprit_at(analysis) == ("src/config.js", 1)
        assert f"changed since {good[:12]}, the last good deploy" in analysis.suspects[0].reason
        assert "uses 47393, which the message names" in analysis.suspects[0].reason
        assert any("not from a frame" in n for n in analysis.notes)

        # Without a last good deploy the prior is the analysed commit's own change, and says so: its parent
        # is no known good deploy (the new-user trial saw a failure's own commit called that).
        unknown = localise(cluster_of(event), checkout, tools)
        reason = unknown.suspects[0].reason
        assert f"its file changed in the analysed commit {checkout.commit[:12]}" in reason
        assert "last good deploy" not in reason


# --- The stack ran out: real runs of recursions that never end -------------------------------------------

_RECURSIONS = {
    "python": ("app.py", """\
def walk(node):
    return walk(node + 1)  # MARK:cycle


def main():
    print(walk(0))  # MARK:entry


main()
"""),
    "node": ("rec.js", """\
function depth(n) {
  return depth(n + 1) + 1; // MARK:cycle
}
console.log(depth(0)); // MARK:entry
"""),
    "java": ("src/main/java/Rec.java", """\
public class Rec {
    static int depth(int n) {
        return depth(n + 1) + 1; // MARK:cycle
    }
    public static void main(String[] args) {
        System.out.println(depth(0)); // MARK:entry
    }
}
"""),
}


def _crash_file(service: Service, name: str) -> ErrorEvent:
    """Run the committed Python program `name` for real; what it printed on stderr, parsed, as an event."""
    return _crash(service, "python", name)


def _crash(service: Service, language: str, name: str = "") -> ErrorEvent:
    """Run the committed program for real; what it printed on stderr, parsed, as an event."""
    root, name = service.path, name or _RECURSIONS[language][0]
    if language == "python":
        command = [sys.executable, "-B", name]
    elif language == "node":
        node = shutil.which("node")
        assert node, "node is required for the Node localiser tests"
        command = [node, name]
    else:
        compile_java(root, root / "classes")
        java = shutil.which("java")
        assert java, "java is required for the Java localiser tests"
        command = [java, "-Xss512k", "-cp", str(root / "classes"), "Rec"]
    proc = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, proc.stdout
    chain = parse_trace(proc.stderr)
    assert chain, proc.stderr[-500:]
    return ErrorEvent(server_id="rec", timestamp=1.0, message=chain[-1].value, exceptions=chain,
                      raw_trace=proc.stderr)


class TestTheStackRanOut:
    """RecursionError, StackOverflowError, V8's call stack: the call that goes round is the culprit, not the
    caller that passed the first value (a trial saw `main() passed the constant 0` blamed, and the same
    sentence once per frame of the recursion)."""

    @pytest.mark.parametrize("language", sorted(_RECURSIONS))
    def test_a_function_calling_itself_without_end_is_blamed_at_its_call(self, tmp_path: Path,
                                                                         language: str) -> None:
        name, code = _RECURSIONS[language]
        service = Service(GitRepo(tmp_path / "repo"))
        service.commit("bug", "Walk", {name: code})
        analysis = analyse(service, _crash(service, language))
        cycle = service.line(name, "MARK:cycle")
        assert culprit_at(analysis) == (name, cycle)
        function = "walk" if language == "python" else "depth"
        said = f"{function}() calls itself at {name}:{cycle} and never reached a case that ends the recursion"
        assert said in analysis.root_cause
        assert analysis.root_cause.count("calls itself") == 1
        assert "constant" not in analysis.root_cause
        if language == "java":  # an error without a message reads as its type alone
            assert analysis.root_cause.startswith(f"java.lang.StackOverflowError at {name}:{cycle} in depth.")
        if language == "python":  # the other traces are cut before the entry's frame
            assert f"entered from main() at {name}:{service.line(name, 'MARK:entry')}" in analysis.root_cause

    def test_calls_that_go_round_two_functions_name_both(self, tmp_path: Path) -> None:
        """visit() → walk() → visit(), through a list comprehension's own frame."""
        code = """\
def visit(node):
    return [walk(child) for child in node["children"]]  # MARK:visit


def walk(node):
    return visit(node)  # MARK:walk


loop = {"children": []}
loop["children"].append(loop)
walk(loop)
"""
        service = Service(GitRepo(tmp_path / "repo"))
        service.commit("bug", "Visit", {"app.py": code})
        analysis = analyse(service, _crash(service, "python"))
        visit, walk = service.line("app.py", "MARK:visit"), service.line("app.py", "MARK:walk")
        assert culprit_at(analysis) == ("app.py", visit)
        assert f"the calls go round visit() → walk() → visit() (at app.py:{visit}, app.py:{walk})" in \
            analysis.root_cause


class TestTopLevelCode:
    """Code at a module's top level is no function, and is the application's own."""

    def test_a_constant_passed_from_top_level_code_is_blamed_there(self, tmp_path: Path) -> None:
        """A trial read `the value comes from outside the application; <module>() at app.py:7 checks it`. A
        script's top-level code is where its input is written, so a check below it stays a suspect when it
        is the first code to use the value (a measured case of evals/localisation.py)."""
        code = """\
def check_port(port):
    if port <= 0:
        raise ValueError(f"bad port {port}")
    return port


check_port(-1)  # MARK:call
"""
        service = Service(GitRepo(tmp_path / "repo"))
        service.commit("bug", "Port", {"app.py": code})
        analysis = analyse(service, _crash(service, "python"))
        call = service.line("app.py", "MARK:call")
        assert culprit_at(analysis) == ("app.py", call)
        assert f"the value is the constant -1, which the module's top-level code passes at app.py:{call}." in \
            analysis.root_cause
        assert "outside the application" not in analysis.root_cause
        assert "<module>()" not in " ".join(s.reason for s in analysis.suspects)

    def test_a_value_passed_down_a_recursion_is_said_once(self, tmp_path: Path) -> None:
        """Each frame of the recursion passes the parameter on at the same line: one sentence says so."""
        code = """\
def parse(depth, n):
    if depth == 0:
        if n < 0:
            raise ValueError(f"negative: {n}")  # MARK:raise
        return n
    return parse(depth - 1, n)  # MARK:pass


parse(3, -1)  # MARK:call
"""
        service = Service(GitRepo(tmp_path / "repo"))
        service.commit("bug", "Parse", {"app.py": code})
        analysis = analyse(service, _crash(service, "python"))
        passed, call = service.line("app.py", "MARK:pass"), service.line("app.py", "MARK:call")
        assert culprit_at(analysis) == ("app.py", service.line("app.py", "MARK:raise"))
        assert analysis.root_cause.count(f"parse() passes its own parameter on (n at app.py:{passed})") == 1
        assert f"the value is the constant -1, which the module's top-level code passes at app.py:{call}; " \
            f"parse() at app.py:{service.line('app.py', 'MARK:raise')} checks it" in analysis.root_cause

    def test_an_import_that_fails_at_top_level_is_said_so(self, tmp_path: Path) -> None:
        """A trial read `<module>() fails on DEFAULTS` and `calls <module>()` of an import-time crash."""
        service = Service(GitRepo(tmp_path / "repo"))
        service.commit("bug", "Settings", {"settings.py": 'DEFAULTS = {"timeout": 3}\nTIMEOUT = DEFAULTS["retries"]\n',
                                           "app.py": "import settings\n\nprint(settings.TIMEOUT)\n"})
        analysis = analyse(service, _crash_file(service, "app.py"))
        assert culprit_at(analysis) == ("settings.py", 2)
        assert "the module's top-level code fails on DEFAULTS at settings.py:2" in analysis.root_cause
        reasons = {(s.path, s.line): s.reason for s in analysis.suspects}
        assert reasons[("app.py", 1)] == "loads the module whose top-level code failed"
        assert "<module>()" not in analysis.root_cause + " ".join(reasons.values())

    def test_an_argument_is_quoted_as_written(self, tmp_path: Path) -> None:
        """A trial read `handle() passes its own parameter on (job[" "] …)`: the masked statement's blank."""
        code = ('def parse(n):\n    return int(n)\n\n\ndef handle(job):\n    return parse(job["n"])\n\n\n'
                'handle({"n": "x1"})\n')
        service = Service(GitRepo(tmp_path / "repo"))
        service.commit("bug", "Worker", {"app.py": code})
        analysis = analyse(service, _crash(service, "python"))
        assert 'handle() passes its own parameter on (job["n"] at app.py:6)' in analysis.root_cause
        assert 'the value is the constant {"n": "x1"}' in analysis.root_cause


class TestClassInitialisers:
    def test_a_static_initialiser_that_fails_is_read_at_the_first_use(self, tmp_path: Path) -> None:
        """A trial: the line that first used the class read "could not be matched (line unverified)", and
        the message's `n/a` named a file `a`."""
        service = Service(GitRepo(tmp_path / "repo"))
        prices, main = "src/main/java/Prices.java", "src/main/java/Main2.java"
        service.commit("bug", "Prices", {
            prices: 'public class Prices {\n    static final double PEAR = Double.parseDouble("n/a");\n}\n',
            main: 'public class Main2 {\n    public static void main(String[] args) {\n        System.out.println(1);\n'
                  '        System.out.println(Prices.PEAR);\n    }\n}\n'})
        compile_java(service.path, service.path / "classes")
        java = shutil.which("java")
        assert java, "java is required for the Java localiser tests"
        proc = subprocess.run([java, "-cp", str(service.path / "classes"), "Main2"], capture_output=True, text=True,
                              timeout=120)
        assert "ExceptionInInitializerError" in proc.stderr, proc.stderr
        chain = parse_trace(proc.stderr)
        event = ErrorEvent(server_id="shop", timestamp=1.0, message=chain[-1].value, exceptions=chain,
                           raw_trace=proc.stderr)
        analysis = analyse(service, event)
        assert culprit_at(analysis) == (prices, 2)
        reasons = {(s.path, s.line): s.reason for s in analysis.suspects}
        assert "unverified" not in reasons[(main, 4)], reasons
        assert "refers to a," not in reasons[(prices, 2)], reasons
