"""Reading one source file: masking, methods by name, statements, and who a name is (no I/O)."""

from __future__ import annotations

from analysis.code.expression import call_args, calls_in, is_literal, operands, param_name, receivers_in, split_args
from analysis.code.source import Source, language_of


def source(path: str, text: str) -> Source:
    lang = language_of(path)
    assert lang is not None
    return Source(path, tuple(text.splitlines()), lang)


JAVA = source("src/Fraction.java", """\
package a;

public class Fraction {
    private final int num;

    public Fraction(int num) {
        this(num, 1);
    }

    private Fraction(final int num, int den)
        throws ArithmeticException {
        if (den == 0) {
            throw new ArithmeticException("zero denominator");  // a { in a comment
        }
        String s = "text with ( and {";
        this.num = num / den;
    }

    public static <T> java.util.List<T> wrap(T value) { return java.util.List.of(value); }
}
""")


class TestMasking:
    """Strings and comments are blanked, lines keep their length, code inside f-strings stays."""

    def test_java_strings_and_comments_are_blank(self) -> None:
        """Braces and parentheses in a string or a comment do not count as code."""
        assert "{" not in JAVA.masked(13).split(";")[1]
        assert JAVA.masked(15).count("(") == 0
        assert all(len(a) == len(b) for a, b in zip(JAVA.lines, JAVA.code, strict=True))

    def test_python_f_string_keeps_its_code(self) -> None:
        """`f"{record['id']}"` keeps the subscript readable; a plain string does not."""
        py = source("a.py", 'x = f"invoice {record[\'id\']}"\ny = "a {b}"\n')
        assert "record['id']" in py.masked(1) and "invoice" not in py.masked(1)
        assert "b" not in py.masked(2)

    def test_js_template_keeps_its_code_across_lines(self) -> None:
        """`${user.name}` stays; the literal text around it, also on the next line, does not."""
        js = source("a.js", "const m = `hi ${user.name}\nmore ${x}`; run(1);\n")
        assert "user.name" in js.masked(1) and "hi" not in js.masked(1)
        assert "run(1)" in js.masked(2) and "more" not in js.masked(2)


class TestMethods:
    """Methods are found by name with their extent and parameters."""

    def test_java_overloaded_constructors(self) -> None:
        """Both constructors are found with their own parameters and no return type."""
        ctors = JAVA.named("Fraction")
        assert [(m.start, m.end, m.params, m.returns) for m in ctors] == [
            (6, 8, ("num",), ""), (10, 17, ("num", "den"), "")]

    def test_java_generic_static_method_on_one_line(self) -> None:
        """A generic return type and a one-line body are still a method."""
        [wrap] = JAVA.named("wrap")
        assert (wrap.start, wrap.end, wrap.params, wrap.returns) == (19, 19, ("value",), "java.util.List<T>")

    def test_calls_are_not_declarations(self) -> None:
        """`this(num, 1)` and `new ArithmeticException(...)` declare nothing."""
        assert [m.name for m in JAVA.methods] == ["Fraction", "Fraction", "wrap"]

    def test_enclosing_method_of_a_line(self) -> None:
        """Line 16 is inside the two-argument constructor."""
        method = JAVA.enclosing(16)
        assert method is not None and method.params == ("num", "den")

    def test_python_defs_and_extent(self) -> None:
        """A def ends where the indentation returns to its level; `self` is a parameter."""
        py = source("a.py", "class A:\n    def f(self, x, *rest, y=2):\n        return x\n\n    def g(self):\n"
                            "        pass\n")
        assert [(m.name, m.start, m.end, m.params) for m in py.methods] == [
            ("f", 2, 3, ("self", "x", "rest", "y")), ("g", 5, 6, ("self",))]

    def test_js_function_forms(self) -> None:
        """function declarations, arrow functions and class methods are found by name."""
        js = source("a.js", "function load(raw) {\n  return raw;\n}\nconst total = (order, tax) => {\n"
                            "  return order;\n};\nclass Cart {\n  count(items) {\n    return items.length;\n  }\n}\n")
        assert [(m.name, m.params) for m in js.methods] == [
            ("load", ("raw",)), ("total", ("order", "tax")), ("count", ("items",))]

    def test_go_receiver(self) -> None:
        """A Go method keeps its receiver's name, through which the object's state is read."""
        go = source("a.go", "func (s *Service) Charge(req *Req, n int) (string, error) {\n  return \"\", nil\n}\n")
        [charge] = go.methods
        assert (charge.name, charge.params, charge.receiver) == ("Charge", ("req", "n"), "s")


class TestStatementsAndNames:
    """A statement spans its continuation lines; names are parameters, locals or state."""

    def test_statement_spans_continuation_lines(self) -> None:
        """A call split over three lines is one statement from any of its lines."""
        java = source("A.java", "class A {\n  void f() {\n    call(a,\n         b,\n         c);\n"
                                "    next();\n  }\n}\n")
        assert java.statement(4) == (3, 5)
        assert java.statement(6) == (6, 6)

    def test_roles_of_names(self) -> None:
        """A parameter, a local assigned before the line, a field, a constant."""
        py = source("a.py", "LIMIT = 3\n\ndef f(items, name):\n    count = len(items)\n"
                            "    return self.x + count + LIMIT\n")
        [f] = py.methods
        roles = [py.role(f, n, 5) for n in ("items", "count", "self.x", "LIMIT")]
        assert roles == ["param", "local", "field", "constant"]

    def test_reshaped_parameter_stays_a_parameter(self) -> None:
        """`msg = format(msg, args)` keeps msg the caller's; `msg = "x"` makes it a local."""
        py = source("a.py", "def f(msg, args):\n    msg = format(msg, args)\n    raise E(msg)\n\n"
                            "def g(msg):\n    msg = 'x'\n    raise E(msg)\n")
        f, g = py.methods
        assert py.role(f, "msg", 3) == "param"
        assert py.role(g, "msg", 7) == "local"
        assert py.assignment(g, "msg", 7) == 6


class TestExpressions:
    """Operands, calls and arguments of one statement."""

    def test_operands_keep_calls_and_subscripts_whole(self) -> None:
        """Operators split operands; `a.b(c)[i].d` is one operand; literals are operands too."""
        assert operands("oldOne.getClass() == newOne.getClass() && a[i+1].x > 3") == [
            "oldOne.getClass()", "newOne.getClass()", "a[i+1].x", "3"]
        assert operands('"Type \'" + name + "\' missing"') == ['"Type \'"', "name", '"\' missing"']

    def test_calls_in_with_receivers(self) -> None:
        """Each call to a name with its receiver and arguments, generics and nesting respected."""
        found = calls_in("x = ctxt.report(p, Map.<K, V>of(a, b), f(1, 2)); report(q);", "report")
        assert found == [("ctxt", ["p", "Map.<K, V>of(a, b)", "f(1, 2)"]), ("", ["q"])]

    def test_call_args_of_the_last_call(self) -> None:
        assert call_args("a.b(x, f(y), 3)") == ["x", "f(y)", "3"]
        assert call_args("a.b") == []

    def test_split_args_respects_generics(self) -> None:
        assert split_args("Map<String, Integer> m, int n") == ["Map<String, Integer> m", "int n"]

    def test_parameter_names_per_language(self) -> None:
        assert param_name("final @NonNull Map<String, X> byId", "java") == "byId"
        assert param_name("count: int = 3", "python") == "count"
        assert param_name("{ a, b }", "js") == ""
        assert param_name("id string", "go") == "id"

    def test_receivers_skip_class_names_but_not_constants(self) -> None:
        """`Math.max` is a class's; `SETTINGS[...]` and `user.name` are values dereferenced."""
        assert receivers_in("Math.max(user.name, SETTINGS['a'])") == ["user", "SETTINGS"]

    def test_literals(self) -> None:
        assert all(is_literal(x) for x in ("3", '"x"', "null", "None", "{ body: 1 }", "[1, 2]"))
        assert not is_literal("x")
