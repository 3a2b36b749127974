"""Frame → repository file mapping, and the ranking rules, on plain data (no I/O)."""

from __future__ import annotations

from analysis.code.filemap import FileIndex, is_generated_path, is_test_path
from analysis.code.suspects import is_helper, java_null_callee, merge, null_callee, rank_exception
from analysis.event import ExceptionInfo, Frame

REPO = FileIndex([
    "src/main/java/com/acme/orders/OrderService.java",
    "src/main/java/com/acme/billing/OrderService.java",
    "src/test/java/com/acme/orders/OrderServiceTest.java",
    "src/orders/service.py",
    "src/orders/util.py",
    "internal/pay/charge.go",
    "internal/pb/pay.pb.go",
    "web/src/app/cart.js",
    "web/src/index.js",
    "lib/index.js",
])


class TestFileIndex:
    """Each language's frames find their file; library frames do not."""

    def test_java_package_disambiguates_same_file_name(self) -> None:
        """com.acme.billing.OrderService maps to the billing file, not the orders one."""
        for frame in (Frame(function="charge", module="com.acme.billing.OrderService",
                            filename="OrderService.java"),
                      Frame(function="com.acme.billing.OrderService.charge", filename="OrderService.java")):
            match = REPO.locate(frame)
            assert match is not None and match.path == "src/main/java/com/acme/billing/OrderService.java"
            assert not match.ambiguous

    def test_jvm_frame_of_another_package_does_not_map(self) -> None:
        """A runner's org.apache.tools.ant.Main is not the repository's own lib/tools/Main.java."""
        repo = FileIndex(["lib/tools/Main.java", "src/main/java/com/acme/Main.java"])
        assert repo.locate(Frame(function="runBuild", module="org.apache.tools.ant.Main", filename="Main.java")) is None
        match = repo.locate(Frame(function="main", module="com.acme.Main", filename="Main.java"))
        assert match is not None and match.path == "src/main/java/com/acme/Main.java"

    def test_paths_ending(self) -> None:
        """Files whose last parts are the given ones."""
        assert REPO.paths_ending(("orders", "service.py")) == ["src/orders/service.py"]
        assert REPO.paths_ending(("index.js",)) == ["lib/index.js", "web/src/index.js"]
        assert REPO.paths_ending(("billing", "service.py")) == []

    def test_python_deployed_path_suffix(self) -> None:
        """/app/orders/service.py (src/ copied to /app) maps to src/orders/service.py."""
        match = REPO.locate(Frame(function="place", filename="/app/orders/service.py"))
        assert match is not None and match.path == "src/orders/service.py"

    def test_python_module_without_file(self) -> None:
        """A module name alone maps through module → path."""
        match = REPO.locate(Frame(function="place", module="orders.service"))
        assert match is not None and match.path == "src/orders/service.py"

    def test_go_import_path_with_bare_file_name(self) -> None:
        """A Go function's import path plus charge.go maps to internal/pay/charge.go."""
        match = REPO.locate(Frame(function="github.com/acme/svc/internal/pay.(*Service).Charge",
                                  filename="charge.go"))
        assert match is not None and match.path == "internal/pay/charge.go"

    def test_go_import_path_in_module(self) -> None:
        """The same when the parser keeps the import path in `module` and the method in `function`."""
        match = REPO.locate(Frame(function="(*Service).Charge", module="github.com/acme/svc/internal/pay",
                                  filename="charge.go"))
        assert match is not None and match.path == "internal/pay/charge.go"

    def test_js_webpack_and_file_urls(self) -> None:
        """webpack:// and file:// source paths (with query strings) map by suffix."""
        for name in ("webpack:///./src/app/cart.js?abc1", "file:///srv/web/src/app/cart.js",
                     "webpack://shop/src/app/cart.js"):
            match = REPO.locate(Frame(function="add", filename=name))
            assert match is not None and match.path == "web/src/app/cart.js", name

    def test_library_paths_never_map(self) -> None:
        """site-packages, node_modules, Go's runtime and stdlib frames are not repository files."""
        for name in ("/usr/lib/python3.11/site-packages/orders/util.py", "/app/node_modules/lib/index.js",
                     "/usr/local/go/src/internal/pay/charge.go", "node:internal/process/task_queues"):
            assert REPO.locate(Frame(function="f", filename=name)) is None, name

    def test_single_shared_part_is_not_enough(self) -> None:
        """/opt/other/util.py shares only its name with src/orders/util.py: no match."""
        assert REPO.locate(Frame(function="f", filename="/opt/other/util.py")) is None

    def test_bare_ambiguous_name_is_flagged(self) -> None:
        """index.js alone matches two files: the match says it is ambiguous."""
        match = REPO.locate(Frame(function="f", filename="index.js"))
        assert match is not None and match.ambiguous

    def test_test_and_generated_paths(self) -> None:
        """Test and generated paths are recognised across languages."""
        assert all(map(is_test_path, ["tests/test_x.py", "pkg/x_test.go", "src/test/java/A.java",
                                      "web/a.spec.ts", "src/FooTest.java", "app/__tests__/a.js"]))
        assert not any(map(is_test_path, ["src/testing_utils.py", "src/contest.py"]))
        assert all(map(is_generated_path, ["internal/pb/pay.pb.go", "api/x_pb2.py", "src/generated/A.java"]))


def ranked_paths(frames: list[Frame]) -> list[str]:
    candidates, _ = rank_exception(ExceptionInfo("E", "m", tuple(frames)), 0, REPO.locate)
    return [f"{c.path}:{c.line}" for c in merge(candidates)]


class TestRanking:
    """The evidence rules that move the culprit away from the naive deepest frame."""

    def test_deepest_in_app_frame_first_by_default(self) -> None:
        """Without other evidence the innermost mapped frame ranks first."""
        assert ranked_paths([Frame(function="a", filename="/app/orders/service.py", lineno=5),
                             Frame(function="b", filename="/srv/web/src/app/cart.js", lineno=9)])[0] == \
            "src/orders/service.py:5"

    def test_in_app_util_helper_yields_to_caller(self) -> None:
        """A frame in a util module raising on behalf of its caller ranks below the caller."""
        frames = [Frame(function="require_int", filename="/app/orders/util.py", lineno=3),
                  Frame(function="place", filename="/app/orders/service.py", lineno=12)]
        assert ranked_paths(frames) == ["src/orders/service.py:12", "src/orders/util.py:3"]

    def test_helper_detection(self) -> None:
        """Owners and function names that check arguments are helpers; ordinary code is not."""
        assert is_helper(Frame(function="notBlank", module="com.acme.util.Validate"), "x/Validate.java")
        assert is_helper(Frame(function="checkArgument", module="com.acme.Orders"), "x/Orders.java")
        assert not is_helper(Frame(function="checkout", module="com.acme.Cart"), "x/Cart.java")

    def test_test_frames_are_skipped_with_a_note(self) -> None:
        """A test file frame is not a candidate; the note says so."""
        frames = [Frame(function="fake", filename="src/test/java/com/acme/orders/OrderServiceTest.java",
                        module="com.acme.orders.OrderServiceTest", lineno=4),
                  Frame(function="place", module="com.acme.orders.OrderService", filename="OrderService.java",
                        lineno=20)]
        candidates, notes = rank_exception(ExceptionInfo("E", "m", tuple(frames)), 0, REPO.locate)
        assert [c.path for c in candidates] == ["src/main/java/com/acme/orders/OrderService.java"]
        assert notes and "test code" in notes[0]

    def test_chained_exception_counts_less(self) -> None:
        """The same depth in a chained (outer) exception scores lower than in the root cause."""
        frame = [Frame(function="a", filename="/app/orders/service.py", lineno=5)]
        root, _ = rank_exception(ExceptionInfo("E", "m", tuple(frame)), 0, REPO.locate)
        outer, _ = rank_exception(ExceptionInfo("E", "m", tuple(frame)), 1, REPO.locate)
        assert outer[0].score < root[0].score


class TestNullCallee:
    """Finding the function whose null return value was dereferenced."""

    def test_python_variable_assigned_above(self) -> None:
        """'NoneType' has no attribute 'name' on `user.name`: the call assigning `user` is named."""
        assert null_callee("'NoneType' object has no attribute 'name'", "    return user.name",
                           ["    user = self.repo.find_user(uid)", ""]) == "find_user"

    def test_js_direct_call(self) -> None:
        """`getCart(id).items` reading 'items' of undefined names getCart."""
        assert null_callee("Cannot read properties of undefined (reading 'items')",
                           "const n = getCart(id).items.length;", []) == "getCart"

    def test_go_short_assignment(self) -> None:
        """A nil pointer on `acct.Currency` after `acct, err := s.store.Find(id)` names Find."""
        assert null_callee("invalid memory address or nil pointer dereference", "return acct.Currency",
                           ["acct, err := s.store.Find(id)"]) == "Find"

    def test_java_helpful_npe(self) -> None:
        """JDK helpful NPE messages name the class and method whose return value was null."""
        message = 'Cannot invoke "A.b()" because the return value of "com.acme.Repo.find(String)" is null'
        assert java_null_callee(message) == ("com.acme.Repo", "find")
        assert java_null_callee('Cannot invoke "A.b()" because "x" is null') is None

    def test_no_assignment_found(self) -> None:
        """When nothing assigns the receiver, no callee is invented."""
        assert null_callee("'NoneType' object has no attribute 'x'", "return a.x", ["b = 1"]) is None
