"""Every `logagent` command explains itself: a description and examples in its --help."""

from __future__ import annotations

import argparse

import pytest
from pydantic import BaseModel

from consumer.cli import _parser, main
from consumer.cli.service import setting_groups
from consumer.settings import Settings


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of the CLI (`memory show` is ("memory", "show")), walked from the parser itself so
    a command added later is checked too."""
    found = [path] if path else []
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, (*path, name))
    return found


COMMANDS = _commands(_parser())


def _help(capsys: pytest.CaptureFixture[str], *path: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*path, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


class TestHelp:
    def test_the_walk_finds_every_command_group(self) -> None:
        """The walk reaches nested actions (so the test below sees them all)."""
        assert {("run",), ("demo",), ("analyze",), ("fingerprint",), ("memory",), ("memory", "show"),
                ("memory", "servers"), ("feedback",)} <= set(COMMANDS)

    @pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
    def test_every_command_has_a_description_and_an_example(self, path: tuple[str, ...],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
        """--help prints a description paragraph and at least one `logagent ...` example."""
        text = _help(capsys, *path)
        description = text.split("\n\n")[1]
        assert not description.startswith(("positional", "options")) and len(description) > 60, text
        examples = text.split("examples:\n", 1)
        assert len(examples) == 2 and "logagent " + path[0] in examples[1], text

    def test_run_lists_every_settings_group_and_points_at_config(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`run --help` names each settings group with what it sets, and the `logagent config` command."""
        text = _help(capsys, "run")
        assert "`logagent config`" in text
        *groups, _ = setting_groups()
        for pattern, meaning in groups:
            assert f"{pattern}" in text and meaning in text
        for name, field in Settings.model_fields.items():
            nested = isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
            assert f"LOGAGENT_{name.upper()}{'__*' if nested else ''}" in text
