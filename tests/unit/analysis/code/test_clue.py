"""Suspects the frames do not name: the message's terms, definitions, data files, test frames, history."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analysis.code.clue import Clue, ClueFinder, combine, definition_regex, message_terms
from analysis.code.filemap import FileIndex
from analysis.code.site import SourceReader
from analysis.code.tools import FileTools
from analysis.event import ErrorEvent, ExceptionInfo, Frame

FILES = {
    "app/rates.py": 'RATES = {"EUR": 1.0}\n',
    "app/pricing.py": "from app.rates import RATES\n\n\ndef total(order):\n    return order['amount'] * RATES['EUR']\n",
    "app/client.py": 'import json\nSETTINGS = json.loads(open("settings.json").read())\n',
    "app/settings.json": '{"timeout_s": "2.5s"}\n',
    "src/config.js": "module.exports = { upstream: { port: 47392 } };\n",
    "src/models.js": "class Order {\n  constructor(items) {\n    this.items = items;\n  }\n}\n",
    "tests/test_pricing.py": "from app.pricing import total\n\n\ndef test_total():\n    total({'amount': 2})\n",
}


@pytest.fixture()
def finder(tmp_path: Path) -> ClueFinder:
    for path, text in FILES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    tools = FileTools(tmp_path)
    return ClueFinder(tools, FileIndex.build(tmp_path, tools.limits.skip_dirs), SourceReader(tools))


class TestMessageTerms:
    """What a message names, in order; words every runtime prints are left out."""

    def test_python_import_error(self) -> None:
        """The quoted name and module first, then the path in parentheses."""
        terms = message_terms("cannot import name 'EUR' from 'app.rates' (/srv/app/rates.py)")
        assert terms == [("EUR", True), ("app.rates", True), ("/srv/app/rates.py", False)]

    def test_runtime_words_and_addresses_are_not_terms(self) -> None:
        """'NoneType' and a bare address say nothing; a port after ':' does."""
        assert message_terms("'NoneType' object is not subscriptable") == []
        assert message_terms("connect ECONNREFUSED 127.0.0.1:47392") == [("47392", False)]

    def test_distinctive_keeps_quoted_and_dotted_names_only(self) -> None:
        """Bare camel-case words (NaN, cause) are not distinctive; java.* names never count."""
        text = "diverged to NaN for java.lang.Throwable.cause at 'computeTotal' in pricing.compute"
        assert message_terms(text, distinctive=True) == [("computeTotal", True), ("pricing.compute", False)]


class TestDefinitions:
    """One regex finds a definition in any of the languages read."""

    @pytest.mark.parametrize("line", [
        "def find_user(user_id):", "class find_user:", "function find_user(id) {", "const find_user = (id) => id;",
        "func find_user(id string) *User {", "    public static final int find_user = 0;", "find_user = 3",
        '"find_user": 1,', "  find_user(id) {",
    ])
    def test_definition_forms(self, line: str) -> None:
        assert re.search(definition_regex("find_user"), line)

    @pytest.mark.parametrize("line", ["user = find_user(id)", "return find_user(id)", "if find_user == 3:"])
    def test_uses_are_not_definitions(self, line: str) -> None:
        assert not re.search(definition_regex("find_user"), line)


class TestFinder:
    """Searches of a real checkout (the file tools over a temporary directory)."""

    def test_message_naming_a_module_points_at_its_file(self, finder: ClueFinder) -> None:
        """'app.rates' is the module app/rates.py; the test file is never a clue."""
        clues = combine(finder.from_message("cannot import name 'EUR' from 'app.rates'", 0.5, distinctive=True))
        assert clues[0].path == "app/rates.py"
        assert all(not c.path.startswith("tests/") for c in clues)

    def test_a_member_of_a_named_module_is_one_reason_with_its_line(self, finder: ClueFinder) -> None:
        """`app.pricing.total` is the module's file, cited where it defines total(): one reason says both
        (it read `the message names app.pricing.total; which defines total (…)`, a sentence cut in two)."""
        (clue,) = finder.from_message("failed in 'app.pricing.total'", 0.5, distinctive=True)
        assert (clue.path, clue.line) == ("app/pricing.py", 4)
        assert clue.reasons == ["the message names app.pricing.total, defined at app/pricing.py:4"]

    def test_port_in_a_message_finds_the_configuration(self, finder: ClueFinder) -> None:
        clues = finder.from_message("connect ECONNREFUSED 127.0.0.1:47392", 0.5, distinctive=False)
        assert [(c.path, c.line) for c in clues] == [("src/config.js", 1)]

    def test_a_name_defined_on_the_line_that_uses_it_is_said_once(self, finder: ClueFinder) -> None:
        """A new-user trial read "defines port, which the message names; uses port, which the message names" of one
        line: its definition says it."""
        clues = combine(finder.from_message("'total' failed", 0.5, distinctive=True))
        assert [(c.path, c.line, c.reasons) for c in clues] == [
            ("app/pricing.py", 4, ["defines total, which the message names (app/pricing.py:4)"])]

    def test_constant_loaded_from_a_data_file(self, finder: ClueFinder) -> None:
        """SETTINGS is defined from settings.json: both the definition and the data file are clues."""
        clues = finder.constant("SETTINGS", 0.5, "defines SETTINGS")
        assert [c.path for c in clues] == ["app/client.py", "app/settings.json"]
        assert "SETTINGS is loaded from settings.json (app/client.py:2)" in clues[1].reasons

    def test_test_frame_calls_lead_to_their_definitions(self, finder: ClueFinder) -> None:
        """No application frame: what the test called is the entry into the application."""
        frame = Frame(function="test_total", filename="/ci/tests/test_pricing.py", lineno=5)
        event = ErrorEvent(server_id="s", timestamp=1.0, message="boom",
                           exceptions=(ExceptionInfo("KeyError", "'amount'", (frame,)),))
        clues = finder.from_test_frames(event, 0.5)
        assert [(c.path, c.line) for c in clues] == [("app/pricing.py", 4)]
        assert "total() is what the test at tests/test_pricing.py:5 called" in clues[0].reasons[0]


class TestCombine:
    def test_independent_signals_add_up_per_file(self) -> None:
        """Two clues on one file: 1 - (1 - 0.5)(1 - 0.4) = 0.7, the first clue's line, both reasons."""
        clues = combine([Clue("a.py", 3, 0.5, ["x"]), Clue("b.py", 1, 0.6, ["y"]), Clue("a.py", 9, 0.4, ["z"])])
        assert [(c.path, c.line, c.score, c.reasons) for c in clues] == [
            ("a.py", 3, 0.7, ["x", "z"]), ("b.py", 1, 0.6, ["y"])]
