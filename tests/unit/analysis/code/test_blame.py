"""Where the code's evidence moves the blame, on small sources written for each rule (no I/O).

Each test gives the files and a trace (innermost frame first) and checks the blamed frame, the cited
line, and that the evidence says why in words a person can check.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from analysis.code.blame import Blame, blame
from analysis.code.expression import calls_in
from analysis.code.site import Site, code_name, fault_kind, place
from analysis.code.source import Source, language_of
from analysis.event import Frame


def read(files: dict[str, str], frames: Sequence[tuple[str, str, int]], exc_type: str, message: str = "",
         deeper: Sequence[Frame] = ()) -> Blame:
    """Blame for a trace of (path, function, line) frames, innermost first, over `files`."""
    sources = {p: Source(p, tuple(t.splitlines()), language_of(p) or "") for p, t in files.items()}
    trace = [Frame(function=f.rsplit(".", 1)[-1], module=f.rsplit(".", 1)[0] if "." in f else "",
                   filename=p.rsplit("/", 1)[-1], lineno=n) for p, f, n in frames]
    sites: list[Site] = []
    arity = None
    for i in reversed(range(len(trace))):
        callee = trace[i - 1] if i else None
        site = place(i, trace[i], frames[i][0], sources[frames[i][0]], callee, fault_kind(exc_type, message), arity)
        sites.append(site)
        calls = calls_in(site.statement(), code_name(callee)) if callee else []
        arity = len(calls[0][1]) if calls else None
    sites.reverse()
    return blame(sites, fault_kind(exc_type, message), message, deeper,
                 lambda caller, callee: caller.index == callee.index + 1)


VALIDATE = "def require_positive(value, name):\n    if value <= 0:\n        raise ValueError(name)\n    return value\n"


class TestGuards:
    """A check that rejects a parameter sends the blame to whoever produced the value."""

    def test_guard_on_a_parameter_blames_the_caller_that_computed_it(self) -> None:
        """require_positive rejects `value`; place() computed qty itself: place() is blamed at its call."""
        files = {"app/validate.py": VALIDATE,
                 "app/orders.py": "def place(text):\n    qty = int(text) - 5\n    require_positive(qty, 'qty')\n"}
        verdict = read(files, [("app/validate.py", "require_positive", 3), ("app/orders.py", "place", 3)],
                       "ValueError", "qty")
        assert (verdict.site.path, verdict.line) == ("app/orders.py", 3)
        assert verdict.producer == ("app/orders.py", 2)
        assert verdict.raiser is not None and verdict.raiser.path == "app/validate.py"
        text = " ".join(verdict.evidence)
        assert "require_positive() raises when value <= 0, its parameter value" in text
        assert "caller place() passed qty at app/orders.py:3, assigned at app/orders.py:2" in text

    def test_a_raise_in_a_catch_says_what_failed_in_the_try(self) -> None:
        """The guard of a `catch` is its `try` body: quoted as a statement, it read `parse() raises when return
        Integer.parseInt(raw.trim());, its parameter raw` (new-user trial on the demo)."""
        files = {"web/QuantityParser.java": "public class QuantityParser {\n"
                                            "    public int parse(int line, String raw) {\n"
                                            "        try {\n            return Integer.parseInt(raw.trim());\n"
                                            "        } catch (NumberFormatException e) {\n"
                                            "            throw new IllegalArgumentException(\"bad \" + line, e);\n"
                                            "        }\n    }\n}\n",
                 "web/Cart.java": "public class Cart {\n    public void update(int line, String qty) {\n"
                                  "        save(parser.parse(line, qty));\n    }\n}\n"}
        verdict = read(files, [("web/QuantityParser.java", "web.QuantityParser.parse", 6),
                               ("web/Cart.java", "web.Cart.update", 3)], "java.lang.IllegalArgumentException", "bad 3")
        assert verdict.evidence[0] == ("parse() raises when Integer.parseInt(raw.trim()) fails, its parameter raw "
                                       "(web/QuantityParser.java:6)")

    def test_the_value_is_followed_through_frames_that_pass_it_on(self) -> None:
        """Two frames only pass `amount` on; the frame that computed it, three up, is blamed."""
        files = {"app/validate.py": VALIDATE,
                 "app/tax.py": "def with_tax(amount):\n    return require_positive(amount, 'amount') * 1.2\n",
                 "app/cart.py": "def total(amount):\n    return with_tax(amount)\n",
                 "app/api.py": "def handle(order):\n    net = order['gross'] - order['discount']\n"
                               "    return total(net)\n",
                 "app/main.py": "def main():\n    handle({'gross': 1, 'discount': 5})\n"}
        verdict = read(files, [("app/validate.py", "require_positive", 3), ("app/tax.py", "with_tax", 2),
                               ("app/cart.py", "total", 2), ("app/api.py", "handle", 3), ("app/main.py", "main", 2)],
                       "ValueError")
        assert (verdict.site.path, verdict.line) == ("app/api.py", 3)
        assert [s.path for s in verdict.passed] == ["app/tax.py", "app/cart.py"]
        assert "total() passes its own parameter on (amount at app/cart.py:2)" in " ".join(verdict.evidence)

    def test_input_from_outside_stays_with_the_code_that_chose_to_check_it(self) -> None:
        """The value is the entry's own argument: the guard's caller, which checks it, is blamed."""
        files = {"app/validate.py": VALIDATE,
                 "app/orders.py": "def place(qty):\n    require_positive(qty, 'qty')\n    return qty\n"}
        verdict = read(files, [("app/validate.py", "require_positive", 3), ("app/orders.py", "place", 2)],
                       "ValueError")
        assert (verdict.site.path, verdict.line) == ("app/orders.py", 2)
        assert verdict.evidence[-1] == ("the value comes from outside the application; place() at app/orders.py:2 "
                                        "checks it")

    def test_input_from_outside_at_a_fault_is_used_there_not_checked(self) -> None:
        """A new-user trial read "is where it is checked" of a line that checks nothing: a fault where the value
        is first used says so."""
        pricing = "DISCOUNTS = {'SUMMER': 10}\n\ndef apply(coupon):\n    return DISCOUNTS[coupon.upper()]\n"
        files = {"app/pricing.py": pricing,
                 "app/api.py": "def handle(coupon):\n    return apply(coupon)\n"}
        verdict = read(files, [("app/pricing.py", "apply", 4), ("app/api.py", "handle", 2)], "KeyError", "'WINTER'")
        assert verdict.evidence[-1] == ("the value comes from outside the application; apply() at app/pricing.py:4 is "
                                        "the first code of the application to use it")

    def test_a_parser_fed_outside_input_blames_the_line_that_parsed_it(self) -> None:
        """json.loads raised on input handed in from outside: the parsing line, not its callers."""
        files = {"app/ingest.py": "import json\n\ndef parse(payload):\n    return json.loads(payload)\n",
                 "app/api.py": "def handle(body):\n    return parse(body)\n"}
        library = [Frame(function="decode", module="json.decoder", filename="/usr/lib/python3.11/json/decoder.py",
                         lineno=353),
                   Frame(function="loads", module="json", filename="/usr/lib/python3.11/json/__init__.py", lineno=346)]
        verdict = read(files, [("app/ingest.py", "parse", 4), ("app/api.py", "handle", 2)], "JSONDecodeError",
                       deeper=library)
        assert (verdict.site.path, verdict.line) == ("app/ingest.py", 4)
        assert verdict.evidence[0].startswith("parse() hands json.loads payload, its parameter payload")


STATE_JAVA = """\
package m;

public abstract class BaseSolver {
    private int evaluations;
    private final int max = 100;

    protected void incrementCount() {
        if (++evaluations > max) {
            throw new TooManyEvaluationsException(max);
        }
    }

    protected double compute(double x) {
        incrementCount();
        return x * x;
    }
}
"""
BRENT_JAVA = """\
package m;

public class BrentSolver extends BaseSolver {
    protected double doSolve() {
        double x = 1;
        while (true) {
            double y = compute(x);
            x = x / 2 + y;
        }
    }
}
"""


class TestState:
    """A check on the object's own state blames the caller whose loop or branch drove it there."""

    def test_climbs_same_object_calls_to_the_loop(self) -> None:
        """The counter check fails; compute() always counts; doSolve()'s loop is blamed."""
        files = {"src/m/BaseSolver.java": STATE_JAVA, "src/m/BrentSolver.java": BRENT_JAVA}
        verdict = read(files, [("src/m/BaseSolver.java", "m.BaseSolver.incrementCount", 9),
                               ("src/m/BaseSolver.java", "m.BaseSolver.compute", 14),
                               ("src/m/BrentSolver.java", "m.BrentSolver.doSolve", 7)], "TooManyEvaluationsException")
        assert (verdict.site.path, verdict.line) == ("src/m/BrentSolver.java", 7)
        assert "the object's own state" in verdict.evidence[0]
        assert "inside `while (true)`" in verdict.evidence[-1]


FACTORY_JAVA = """\
package m;

public class MappingException extends RuntimeException {
    public MappingException(String msg) { super(msg); }

    public static MappingException from(String msg) {
        return new MappingException(msg);
    }
}
"""
CONTEXT_JAVA = """\
package m;

public class Context {
    public void reportMismatch(String msg) {
        throw MappingException.from(msg);
    }
}
"""
READER_JAVA = """\
package m;

public class NodeReader {
    public Object read(Token t, Context ctxt) {
        if (t == Token.START) {
            return new Object();
        }
        ctxt.reportMismatch("cannot read node out of this token");
        return null;
    }
}
"""


class TestReporters:
    """Exception classes, factories and reporters raise for their caller; the frame that decides is blamed."""

    def test_climbs_factory_and_reporter_to_the_decision(self) -> None:
        """from() builds the exception, reportMismatch() always raises, read() chose to report."""
        files = {"src/m/MappingException.java": FACTORY_JAVA, "src/m/Context.java": CONTEXT_JAVA,
                 "src/m/NodeReader.java": READER_JAVA}
        verdict = read(files, [("src/m/MappingException.java", "m.MappingException.from", 7),
                               ("src/m/Context.java", "m.Context.reportMismatch", 5),
                               ("src/m/NodeReader.java", "m.NodeReader.read", 8)], "m.MappingException",
                       "cannot read node out of this token")
        assert (verdict.site.path, verdict.line) == ("src/m/NodeReader.java", 8)
        assert verdict.evidence[:2] == [
            "from() builds the exception (src/m/MappingException.java:7)",
            "reportMismatch() raises whenever it is called (src/m/Context.java:5)",
        ]


class TestComputedHere:
    """A value made in the raising method keeps the blame there."""

    def test_switch_default_is_a_missing_case(self) -> None:
        """The switch on the parameter's type has no case for it: the switch is blamed, not the caller."""
        java = ("package m;\n\nclass Refiner {\n    void refine(Node node) {\n        switch (node.getType()) {\n"
                "            case 1:\n                break;\n            default:\n"
                "                throw new IllegalArgumentException(\"cannot refine\");\n        }\n    }\n}\n")
        caller = ("package m;\n\nclass Flow {\n    void run(Node n) {\n"
                  "        new Refiner().refine(n.getFirstChild());\n    }\n}\n")
        verdict = read({"src/m/Refiner.java": java, "src/m/Flow.java": caller},
                       [("src/m/Refiner.java", "m.Refiner.refine", 9), ("src/m/Flow.java", "m.Flow.run", 5)],
                       "java.lang.IllegalArgumentException")
        assert (verdict.site.path, verdict.line) == ("src/m/Refiner.java", 9)
        assert "has no case for this node.getType()" in verdict.evidence[0]

    def test_index_fault_on_an_array_allocated_here_cites_the_allocation(self) -> None:
        """`out[row]` overflows an array this method sized: the allocation line is cited."""
        java = ("package m;\n\nclass Matrix {\n    double[] operate(double[] v, int rows) {\n"
                "        final double[] out = new double[v.length];\n        for (int row = 0; row < rows; row++) {\n"
                "            out[row] = 1;\n        }\n        return out;\n    }\n}\n")
        verdict = read({"src/m/Matrix.java": java}, [("src/m/Matrix.java", "m.Matrix.operate", 7)],
                       "java.lang.ArrayIndexOutOfBoundsException")
        assert verdict.line == 5
        assert "allocated at src/m/Matrix.java:5" in verdict.evidence[0]

    def test_none_returned_by_a_call_stays_and_names_the_producer(self) -> None:
        """`user` came from find_user() in this method: blamed here, its assignment recorded."""
        py = "def handle(request):\n    user = find_user(request['id'])\n    return user['email']\n"
        verdict = read({"app/api.py": py}, [("app/api.py", "handle", 3)], "TypeError",
                       "'NoneType' object is not subscriptable")
        assert (verdict.site.path, verdict.line, verdict.producer) == ("app/api.py", 3, ("app/api.py", 2))

    def test_constant_at_fault_is_recorded(self) -> None:
        """Dividing by a module constant: the constant is kept for a search of its definition."""
        py = "from app.limits import MAX_BATCH\n\ndef batches(items):\n    return len(items) // MAX_BATCH\n"
        verdict = read({"app/batching.py": py}, [("app/batching.py", "batches", 4)], "ZeroDivisionError")
        assert verdict.constants == ["MAX_BATCH"]


class TestPlacing:
    """A frame's line is checked against its method; a trace from another build is re-found and marked."""

    def test_shifted_line_is_found_in_the_named_method_and_marked_unverified(self) -> None:
        """The trace says line 5, two lines after the throw that moved up: the throw is read, unverified."""
        java = ("package m;\n\nclass A {\n    void f(int x) {\n        if (x < 0) {\n"
                "            throw new IllegalStateException(\"negative\");\n        }\n        x++;\n    }\n}\n")
        src = Source("src/m/A.java", tuple(java.splitlines()), "java")
        site = place(0, Frame(function="f", module="m.A", filename="A.java", lineno=8), "src/m/A.java", src, None,
                     "java.lang.IllegalStateException", None)
        assert (site.line, site.verified) == (6, False)
        assert "line 8 does not hold a raise" in site.note and "(line unverified)" in site.note

    def test_overload_chosen_by_the_callers_argument_count(self) -> None:
        """The trace line is outside both overloads: the one with the caller's arity is taken."""
        java = ("package m;\n\nclass A {\n    int g(int a) {\n        return h(a);\n    }\n\n"
                "    int g(int a, int b) {\n        return h(a + b);\n    }\n}\n")
        src = Source("src/m/A.java", tuple(java.splitlines()), "java")
        callee = Frame(function="h", module="m.A", filename="A.java", lineno=40)
        site = place(1, Frame(function="g", module="m.A", filename="A.java", lineno=30), "src/m/A.java", src,
                     callee, "E", 2)
        assert site.method is not None and site.method.params == ("a", "b")
        assert (site.line, site.verified) == (9, False)

    def test_names_of_frames(self) -> None:
        """Constructors, lambdas, Go methods and closures, JS methods by their declared names."""
        assert code_name(Frame(function="<init>", module="a.b.Fraction")) == "Fraction"
        assert code_name(Frame(function="lambda$run$3", module="a.B")) == "run"
        assert code_name(Frame(function="(*Service).Charge", module="github.com/x/pay")) == "Charge"
        assert code_name(Frame(function="main.main.func1")) == "main"
        assert code_name(Frame(function="async Api.handle")) == "handle"
        assert code_name(Frame(function="new Cart")) == "constructor"
        assert code_name(Frame(function="access$000", module="a.B")) == ""


class TestRuntimeFaults:
    """A runtime fault's message says which operation failed; its operands decide."""

    def test_the_operator_the_message_names_picks_the_operands(self) -> None:
        """`unsupported operand type(s) for -` reads `1 - discount`, a local: not `order`, the parameter."""
        py = ("def total(order):\n    discount = SETTINGS.get('discount')\n"
              "    return order['price'] * (1 - discount)\n")
        api = "def handle(request):\n    order = request.json()\n    return total(order)\n"
        verdict = read({"app/orders.py": py, "app/api.py": api},
                       [("app/orders.py", "total", 3), ("app/api.py", "handle", 3)], "TypeError",
                       "unsupported operand type(s) for -: 'int' and 'NoneType'")
        assert (verdict.site.path, verdict.line) == ("app/orders.py", 3)
        assert "discount is computed in total() itself, assigned at app/orders.py:2" in verdict.evidence[0]

    @pytest.mark.parametrize("operator", ["<", ">="])
    def test_a_comparison_the_message_names_picks_its_operands(self, operator: str) -> None:
        """A new-user trial: `'>=' not supported between instances of 'NoneType' and 'int'` (the interpreter's
        own message, raised here) read as "raises whatever it is given"; `available` came from `.get()`."""
        try:
            eval(f"None {operator} 1")  # noqa: S307 - a constant expression, for the interpreter's message
        except TypeError as error:
            message = str(error)
        py = (f"def reserve(item, qty):\n    available = STOCK.get(item)\n    if available {operator} qty:\n"
              "        return True\n    return False\n")
        verdict = read({"shop/inventory.py": py}, [("shop/inventory.py", "reserve", 3)], "TypeError", message)
        assert "available is computed in reserve() itself, assigned at shop/inventory.py:2" in verdict.evidence[0]

    def test_a_string_constant_passed_is_quoted_as_written(self) -> None:
        """A second trial read `caller main() passed the constant " "`: the masked statement's blank string."""
        files = {"app/s.py": "import json\n\ndef load(raw):\n    return json.loads(raw)\n\ndef main():\n"
                             "    return load('{bad')\n\nmain()\n"}
        deeper = [Frame(function="loads", module="json")]
        verdict = read(files, [("app/s.py", "load", 4), ("app/s.py", "main", 7), ("app/s.py", "<module>", 9)],
                       "JSONDecodeError", "Expecting property name", deeper)
        assert "caller main() passed the constant '{bad' at app/s.py:7" in verdict.evidence, verdict.evidence

    def test_an_index_the_line_computes_keeps_the_blame(self) -> None:
        """`batch[len(batch)]` is off by one where it is written, whoever passed the batch."""
        go = ("package ledger\n\nfunc (l *Ledger) Settle(batch []Entry) Entry {\n    last := batch[len(batch)]\n"
              "    return last\n}\n")
        api = "package api\n\nfunc (h *Handler) settle(batch []Entry) {\n    h.Ledger.Settle(batch)\n}\n"
        verdict = read({"internal/ledger/ledger.go": go, "internal/api/handler.go": api},
                       [("internal/ledger/ledger.go", "(*Ledger).Settle", 4),
                        ("internal/api/handler.go", "(*Handler).settle", 4)],
                       "runtime.Error", "runtime error: index out of range [3] with length 3")
        assert (verdict.site.path, verdict.line) == ("internal/ledger/ledger.go", 4)
        assert "len(batch) is computed in Settle() itself" in verdict.evidence[0]

    def test_a_null_checks_argument_is_the_value_itself(self) -> None:
        """requireNonNull(cart.getCouponCode()) checks a value this method fetched: blamed here."""
        java = ("package m;\n\nclass Coupons {\n    long apply(Cart cart, long total) {\n"
                "        String code = Objects.requireNonNull(cart.getCouponCode(), \"couponCode\");\n"
                "        return total;\n    }\n}\n")
        caller = ("package m;\n\nclass Checkout {\n    long place(Cart cart) {\n"
                  "        return new Coupons().apply(cart, 3);\n    }\n}\n")
        library = [Frame(function="requireNonNull", module="java.util.Objects", filename="Objects.java", lineno=233)]
        verdict = read({"src/m/Coupons.java": java, "src/m/Checkout.java": caller},
                       [("src/m/Coupons.java", "m.Coupons.apply", 5), ("src/m/Checkout.java", "m.Checkout.place", 5)],
                       "java.lang.NullPointerException", "couponCode", deeper=library)
        assert (verdict.site.path, verdict.line) == ("src/m/Coupons.java", 5)
        # Quoted as written: the string's contents were blanked for reading (`" "`) and shown so.
        assert 'requireNonNull on cart.getCouponCode(), "couponCode":' in verdict.evidence[0]

    def test_a_fault_quotes_its_operands_as_written(self) -> None:
        """An operand holding a string literal is quoted with its contents, on a statement wrapped over lines
        with a comment between."""
        python = ('import os\n\n\ndef host():\n    name = os.environ.get(\n        "DB_HOST"  # set by the chart\n'
                  '    ).split(":")\n    return name\n')
        verdict = read({"app/db.py": python}, [("app/db.py", "app.db.host", 5)], "AttributeError",
                       "'NoneType' object has no attribute 'split'")
        evidence = " ".join(verdict.evidence)
        assert 'os.environ.get( "DB_HOST"' in evidence and '" "' not in evidence, evidence
