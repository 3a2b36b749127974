"""How the CLI turns the LOGAGENT_* environment into Settings, and `logagent config`, which shows the result.

A mistake in the environment ends in one line that names the variable and the fix: a value that is not
JSON where a list or object is expected, a value out of range or outside its choices, a URL setting that
is no http(s) URL, a combination that cannot work, a file that is missing or unreadable, and a LOGAGENT_*
variable that names no setting (with the closest real name, since a misspelt variable would otherwise
leave its default silently in force).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import BaseModel, SecretStr, ValidationError

from consumer.cli import settings_tree as tree
from consumer.cli.common import add_command, add_output_flags, readable
from consumer.settings import ConfigError, Settings, env_name, masked_url, secret_name
from consumer.url import http_url

__all__ = ["effective_settings", "load_settings", "register"]

_PREFIX = "LOGAGENT_"
_MASK = "********"
_MAX_VALUE_CHARS = 80
# Settings filled from others when not set (Settings._derive), with what they follow.
_DERIVED: dict[tuple[str, ...], str] = {
    ("ollama", "url"): env_name("ollama_url"),
    ("repo", "cache_dir"): env_name("data_dir"),
    ("memory", "uri"): env_name("data_dir"),
}


def register(commands: Any) -> None:
    """Add `config` to the subcommands."""
    config = add_command(
        commands, "config", summary="print the effective settings and where each came from (secrets masked)",
        description="Every setting with its value and its source: the environment variable, a default, a "
                    "group's JSON, the repository file, or the setting it is derived from. Secrets and URL "
                    "passwords are masked. A mistake in the environment is reported as every command reports "
                    "it: one line naming the variable and the fix, exit code 2.",
        examples=["logagent config", "logagent config --json | jq -r 'select(.source != \"default\") | .setting'",
                  "kubectl exec logagent-0 -- logagent config"])
    add_output_flags(config)
    config.set_defaults(handler=_config)


def load_settings(environ: Mapping[str, str]) -> Settings:
    """Settings from the environment (`environ` is the one pydantic-settings reads); ConfigError names the
    variable and the fix of the first mistake."""
    ours = {name.upper(): value for name, value in environ.items() if name.upper().startswith(_PREFIX)}
    _check_json(ours)
    try:
        settings = Settings()
    except ValidationError as error:
        # A misspelt variable often explains the error (its setting kept a default that does not fit).
        _refuse_unknown(ours, allowed=set())
        raise ConfigError(describe_error(error, ours)) from None
    token_envs = {spec.token_env.upper() for spec in settings.repo_servers().values() if spec.token_env}
    _refuse_unknown(ours, allowed=token_envs)
    _check_urls(settings, ours)
    return settings


def _depth_set(path: tuple[str, ...], ours: Mapping[str, str], default: int) -> int:
    """How deep along `path` the variable that set it is: the deepest one set on the way (a group's JSON, a
    setting, a key below a mapping setting), else `default`."""
    return next((end for end in range(len(path), 0, -1) if env_name(*path[:end]) in ours), default)


# --- checks --------------------------------------------------------------------------------------


def _check_json(ours: Mapping[str, str]) -> None:
    """Lists, mappings and whole groups are JSON; say so before pydantic-settings fails without a name."""
    for name, value in ours.items():
        target = tree.target(name.removeprefix(_PREFIX).lower().split("__"))
        if target is None or len(target[0]) != len(name.removeprefix(_PREFIX).split("__")):
            continue
        shape = tree.json_shape(target[1])
        if shape is None:
            continue
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise ConfigError(f"{name} is not JSON: write a JSON {shape}, {tree.example(target[0])}") from None
        group = tree.model_of(target[1])
        unknown = tree.unknown_key(group, parsed) if group is not None else None
        if unknown is not None:  # pydantic ignores it, so a misspelt key would leave its default in force
            where, known = unknown
            close = difflib.get_close_matches(where[-1].lower(), known, n=1, cutoff=0.75)
            hint = f"did you mean {tree.json_path((*where[:-1], close[0]))}?" if close else "see `logagent config`"
            shown = tree.json_path(tuple(map(masked_url, where)))[:_MAX_VALUE_CHARS]  # a key too is input
            raise ConfigError(f"{name} is invalid at {shown}: no such setting; {hint}")


def _check_urls(settings: Settings, ours: Mapping[str, str]) -> None:
    """Every URL setting (`url`, `*_url`) that is set holds an http(s) URL with a host (`consumer.url`); the
    line names the variable that set it (`LOGAGENT_NOTIFY is invalid at .slack.webhook_url`)."""
    for leaf in tree.leaves(Settings):
        if leaf.path[-1] != "url" and not leaf.path[-1].endswith("_url"):
            continue
        value = tree.value_at(settings, leaf)
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if not isinstance(text, str) or (not text and leaf.field.default is None):  # unset
            continue
        try:
            http_url(text)
        except ValueError as error:  # the value is not quoted: where it cannot be read, no mask is sure
            depth = _depth_set(leaf.path, ours, len(leaf.path))
            where = f" at {tree.json_path(leaf.path[depth:])}" if depth < len(leaf.path) else ""
            raise ConfigError(f"{env_name(*leaf.path[:depth])} is invalid{where}: {error}") from None


def _refuse_unknown(ours: Mapping[str, str], allowed: set[str]) -> None:
    known = [leaf.env for leaf in tree.leaves(Settings)] + [env_name(*group) for group in tree.groups(Settings)]
    for name in sorted(ours):
        if name in allowed or tree.target(name.removeprefix(_PREFIX).lower().split("__")) is not None:
            continue
        # Compared without the prefix every name shares, which would make anything look close.
        close = difflib.get_close_matches(name.removeprefix(_PREFIX), [k.removeprefix(_PREFIX) for k in known],
                                          n=1, cutoff=0.75)
        hint = f"did you mean {_PREFIX}{close[0]}?" if close else "see `logagent config` for every setting"
        raise ConfigError(f"{name} is not a setting: {hint} (unset it, or rename it)")


def describe_error(error: ValidationError, ours: Mapping[str, str]) -> str:
    """One line for the first validation error: the variable set, where in its JSON the mistake is, the value
    given (never a secret's) and what is expected (with an example for a JSON setting)."""
    first = error.errors()[0]
    message = _HINTS.get(first["type"], str(first["msg"]).removeprefix("Value error, "))
    loc = tuple(str(part) for part in first["loc"])
    setting = tree.setting_of(loc)
    if setting is None or (setting == loc and tree.model_of(tree.annotation_at(loc)) is not None
                           and first["type"] == "value_error"):
        # A combination check: name its group unless the text names the variables already.
        group = env_name(*loc) + "__*" if loc else ""
        return message if "LOGAGENT_" in message or not group else f"{group}: {message}"
    # The variable given (`_depth_set`), else the setting itself: its default is what fails.
    depth = _depth_set(loc, ours, len(setting))
    name, inner = env_name(*loc[:depth]), loc[depth:]
    given = first.get("input")
    if isinstance(given, str):
        given = masked_url(given)[:_MAX_VALUE_CHARS]
    # Never the value of a secret setting, nor of any key named like one (a number is a secret too).
    shown = (isinstance(given, str | int | float) and first["type"] != "missing"
             and not tree.holds_secret(tree.annotation_at(loc))
             and not any(secret_name(str(key)) for key in loc[len(setting):]))
    expected = _lower_first(message)
    if tree.json_shape(tree.annotation_at(loc[:depth])):
        expected += f"; {tree.example(loc[:depth])}"
    if inner:
        value = f" ({_json(given)[:_MAX_VALUE_CHARS]})" if shown else ""
        return f"{name} is invalid at {tree.json_path(inner)}{value}: {expected}"
    if not shown or name not in ours:
        return f"{name} is invalid: {expected}"
    return f"{name}={given} is invalid: {expected}"


# pydantic's words where they do not say what would be accepted.
_HINTS = {"bool_parsing": "input should be true or false", "bool_type": "input should be true or false",
          "model_type": "input should be a JSON object", "model_attributes_type": "input should be a JSON object",
          "dict_type": "input should be a JSON object", "list_type": "input should be a JSON list",
          "tuple_type": "input should be a JSON list"}


def _json(value: str | int | float) -> str:
    """`value` as JSON, or as Python writes it when orjson cannot (an integer past 64 bits)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


# --- logagent config -----------------------------------------------------------------------------


def effective_settings(settings: Settings, environ: Mapping[str, str]) -> list[dict[str, str]]:
    """Every setting as {setting, value, source}, secrets masked; source is `env`, `default` or what it
    was derived from."""
    given = {name.upper() for name in environ}
    rows: list[dict[str, str]] = []
    for leaf in tree.leaves(Settings):
        value = settings.repo_servers() if leaf.path == ("repo", "servers") else tree.value_at(settings, leaf)
        rows.append({"setting": leaf.env, "value": _show(value), "source": _source(leaf, given)})
    return rows


def _source(leaf: tree.Leaf, given: set[str]) -> str:
    if leaf.env in given:
        return "env"
    if any(name.startswith(leaf.env + "__") for name in given):
        return f"env {leaf.env}__*"
    for depth in range(len(leaf.path) - 1, 0, -1):
        if env_name(*leaf.path[:depth]) in given:
            return f"env {env_name(*leaf.path[:depth])} (JSON)"
    if leaf.path == ("repo", "servers") and env_name("repos_file") in given:
        return f"file {env_name('repos_file')}"
    derived = _DERIVED.get(leaf.path)
    if derived is not None and derived in given:
        return f"derived from {derived}"
    return "default"


def _show(value: Any) -> str:
    """A setting's value as text, with secrets and URL passwords masked."""
    if isinstance(value, SecretStr):
        return _MASK
    if value is None:
        return "unset"
    if isinstance(value, BaseModel | dict | list | tuple):
        return orjson.dumps(_masked(value), default=str).decode()
    return masked_url(str(value))


def _masked(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return _masked({name: getattr(value, name) for name in type(value).model_fields})
    if isinstance(value, dict):
        # A key of a mapping setting names a secret whatever its value's type (`aws_secret_access_key`: 12), but
        # a key holding a group is a name (a server called `compass-api`), its group masked in turn.
        return {k: _MASK if secret_name(str(k)) and not isinstance(v, BaseModel | dict) else _masked(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v) for v in value]
    if isinstance(value, SecretStr):
        return _MASK
    return masked_url(value) if isinstance(value, str) else value


def _config(args: argparse.Namespace, settings: Settings) -> int:
    rows = effective_settings(settings, os.environ)
    if not readable(args):
        for row in rows:
            sys.stdout.write(orjson.dumps(row).decode() + "\n")
        return 0
    width = max(len(row["setting"]) for row in rows)
    for row in rows:
        value = row["value"] if len(row["value"]) <= 60 else row["value"][:57] + "..."
        sys.stdout.write(f"{row['setting']:<{width}}  {value:<60}  {row['source']}\n")
    return 0
