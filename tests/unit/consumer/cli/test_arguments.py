"""Argument mistakes: one line on stderr, exit code 2, naming the mistake and the --help of the command it
was made in."""

from __future__ import annotations

import pytest

from consumer.cli import main


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run `logagent argv`; assert exit 2 with exactly one stderr line and nothing on stdout; return it."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert exited.value.code == 2 and len(lines) == 1 and captured.out == "", captured
    return lines[0]


class TestArgumentErrors:
    @pytest.mark.parametrize(("command", "argv"), [
        ("fingerprint", ("fingerprint", "--bogus")), ("redact", ("redact", "-", "--bogus")),
        ("memory show", ("memory", "show", "--bogus")), ("memory show", ("memory", "show", "an-id", "--bogus")),
        ("memory list", ("memory", "list", "--bogus")), ("memory", ("memory", "--bogus")),
        ("feedback", ("feedback", "an-id", "--verdict", "wrong", "--bogus")),
        ("analyze", ("analyze", "--repo", ".", "--bogus")), ("config", ("config", "--bogus")),
    ], ids=lambda value: " ".join(value) if isinstance(value, tuple) else "")
    def test_an_unknown_flag_names_the_help_of_its_own_command(
        self, command: str, argv: tuple[str, ...], capsys: pytest.CaptureFixture[str],
    ) -> None:
        """`logagent memory show --bogus` is refused by `memory show`, pointing to `logagent memory show
        --help`, and says the flag is unknown even where a required argument is missing too."""
        assert _refused(capsys, *argv) == (
            f"logagent {command}: error: unrecognized arguments: --bogus (see logagent {command} --help)")

    def test_an_unknown_flag_without_a_command_is_unknown_not_a_missing_command(
        self, capsys: pytest.CaptureFixture[str],
    ) -> None:
        """`logagent --bogus` says --bogus is unknown (it used to say COMMAND is required)."""
        assert _refused(capsys, "--bogus") == (
            "logagent: error: unrecognized arguments: --bogus (see logagent --help)")

    @pytest.mark.parametrize(("argv", "missing", "command"), [
        ((), "COMMAND", ""), (("memory",), "ACTION", " memory"), (("memory", "show"), "analysis_id", " memory show"),
        (("analyze",), "--repo", " analyze"), (("feedback", "an-id"), "--verdict", " feedback"),
    ], ids=str)
    def test_a_missing_argument_is_named_with_its_commands_help(
        self, argv: tuple[str, ...], missing: str, command: str, capsys: pytest.CaptureFixture[str],
    ) -> None:
        """Without an unknown flag, a missing argument is still reported by name."""
        assert _refused(capsys, *argv) == (f"logagent{command}: error: the following arguments are required: "
                                           f"{missing} (see logagent{command} --help)")

    def test_a_flag_before_the_command_belongs_to_the_top_parser(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`logagent --bogus fingerprint`: --bogus was given to `logagent`, whose help is named."""
        assert _refused(capsys, "--bogus", "fingerprint") == (
            "logagent: error: unrecognized arguments: --bogus (see logagent --help)")

    def test_a_known_flag_still_parses(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Required arguments given are accepted: the parse reaches the command (here, a usage error of its own)."""
        assert main(["memory", "show", "an-id", "--commit", "HEAD"]) == 2
        assert capsys.readouterr().err.strip() == "logagent: --commit needs --repo"


class TestArgumentValues:
    @pytest.mark.parametrize(("argv", "said"), [
        (("demo", "--timeout", "-1"), "logagent demo: error: argument --timeout: must be more than 0 seconds"),
        (("demo", "--timeout", "nan"), "logagent demo: error: argument --timeout: must be more than 0 seconds"),
        (("demo", "--timeout", "soon"), "logagent demo: error: argument --timeout: 'soon' is not a number of seconds"),
        (("memory", "list", "--limit", "many"), "logagent memory list: error: argument --limit/-k: 'many' is not a "
                                                "whole number"),
        (("demo", "--events", "0"), "logagent demo: error: argument --events: must be at least 1"),
    ], ids=lambda value: " ".join(value) if isinstance(value, tuple) else "")
    def test_a_value_out_of_its_range_is_refused_in_the_users_words(
        self, argv: tuple[str, ...], said: str, capsys: pytest.CaptureFixture[str],
    ) -> None:
        """A timeout of 0 or less is refused before the demo starts (it ran, then exited 1 without a word);
        a word where a number goes is named as such, not as an "invalid positive_int value"."""
        assert _refused(capsys, *argv).startswith(said)


class TestHelp:
    @pytest.mark.parametrize(("argv", "shown"), [(("analyze", "-h"), " --repo REPO "),
                                                 (("feedback", "--help"), " --verdict {correct,wrong}\n")])
    def test_required_options_are_shown_required(self, argv: tuple[str, ...], shown: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
        """Parsing relaxes required arguments (to report an unknown flag first); --help still shows them
        without brackets."""
        with pytest.raises(SystemExit) as exited:
            main(list(argv))
        usage = capsys.readouterr().out.split("\n\n")[0] + "\n"
        assert exited.value.code == 0 and shown in usage and "[" + shown.strip() not in usage


class TestTheEnvironment:
    def test_a_path_that_cannot_be_made_is_one_line(self, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
        """A trial: `logagent demo --keep /proc/x` (and a data directory another user owns) ended in a
        traceback; an operating system's refusal is one line naming the path, exit 2."""
        monkeypatch.setenv("LOGAGENT_DATA_DIR", str(tmp_path))
        assert main(["demo", "--keep", "/proc/logagent-test/keep"]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines[-1].startswith("logagent: No such file or directory: /proc/logagent-test"), lines

    def test_version_names_the_commit(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A trial looked for `logagent --version`: the version and commit `logagent_build_info` exports."""
        with pytest.raises(SystemExit) as exited:
            main(["--version"])
        out = capsys.readouterr().out
        assert exited.value.code == 0 and out.startswith("logagent 0.1.0 (commit ") and out.endswith(")\n"), out
