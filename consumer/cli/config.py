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
import re
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel, SecretStr, ValidationError
from pydantic.fields import FieldInfo

from consumer.cli.common import add_command, add_output_flags, readable
from consumer.settings import ConfigError, Settings, env_name, masked_url
from consumer.url import http_url

__all__ = ["effective_settings", "load_settings", "register"]

_PREFIX = "LOGAGENT_"
_MASK = "********"
_SECRET_KEY = re.compile(r"secret|token|password|credential", re.IGNORECASE)
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
    _check_urls(settings)
    return settings


# --- the settings tree ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Leaf:
    path: tuple[str, ...]
    field: FieldInfo

    @property
    def env(self) -> str:
        return env_name(*self.path)


def _value(settings: Settings, leaf: _Leaf) -> Any:
    value: Any = settings
    for part in leaf.path:
        value = getattr(value, part)
    return value


def _model_of(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _kinds(annotation: Any) -> set[Any]:
    """The origins of an annotation, `X | None` unwrapped: {list}, {dict}, {str}, ..."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return {kind for arg in typing.get_args(annotation) if arg is not type(None) for kind in _kinds(arg)}
    if typing.get_origin(annotation) is typing.Annotated:
        return _kinds(typing.get_args(annotation)[0])
    return {typing.get_origin(annotation) or annotation}


def _leaves(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[_Leaf]:
    for name, field in model.model_fields.items():
        nested = _model_of(field.annotation)
        if nested is not None:
            yield from _leaves(nested, (*prefix, name))
        else:
            yield _Leaf((*prefix, name), field)


def _groups(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, field in model.model_fields.items():
        nested = _model_of(field.annotation)
        if nested is not None:
            yield (*prefix, name)
            yield from _groups(nested, (*prefix, name))


def _target(parts: list[str]) -> tuple[tuple[str, ...], Any] | None:
    """The setting an env var sets (its path and annotation), or None when it names none. Keys below a
    mapping setting (LOGAGENT_MEMORY__TTL_S__DEFAULT) belong to that setting."""
    model: type[BaseModel] = Settings
    path: tuple[str, ...] = ()
    for index, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return None
        path = (*path, part)
        nested = _model_of(field.annotation)
        if nested is not None:
            model = nested
            if index == len(parts) - 1:
                return path, nested
            continue
        if dict in _kinds(field.annotation) or index == len(parts) - 1:
            return path, field.annotation
        return None
    return None


# --- checks --------------------------------------------------------------------------------------


def _check_json(ours: Mapping[str, str]) -> None:
    """Lists, mappings and whole groups are JSON; say so before pydantic-settings fails without a name."""
    for name, value in ours.items():
        target = _target(name.removeprefix(_PREFIX).lower().split("__"))
        if target is None or len(target[0]) != len(name.removeprefix(_PREFIX).split("__")):
            continue
        kinds = _kinds(target[1])
        if _model_of(target[1]) is not None or dict in kinds:
            shape, example = "object", '{"key": "value"}'
        elif kinds & {list, tuple, set, frozenset}:
            shape, example = "list", '["com.acme"]'
        else:
            continue
        try:
            orjson.loads(value)
        except orjson.JSONDecodeError:
            raise ConfigError(f"{name} is not JSON: write a JSON {shape}, e.g. {name}='{example}'") from None


def _check_urls(settings: Settings) -> None:
    """Every URL setting (`url`, `*_url`) that is set holds an http(s) URL with a host (`consumer.url`)."""
    for leaf in _leaves(Settings):
        if leaf.path[-1] != "url" and not leaf.path[-1].endswith("_url"):
            continue
        value = _value(settings, leaf)
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if not isinstance(text, str) or (not text and leaf.field.default is None):  # unset
            continue
        try:
            http_url(text)
        except ValueError as error:  # the value is not quoted: where it cannot be read, no mask is sure
            raise ConfigError(f"{leaf.env} is invalid: {error}") from None


def _refuse_unknown(ours: Mapping[str, str], allowed: set[str]) -> None:
    known = [leaf.env for leaf in _leaves(Settings)] + [env_name(*group) for group in _groups(Settings)]
    for name in sorted(ours):
        if name in allowed or _target(name.removeprefix(_PREFIX).lower().split("__")) is not None:
            continue
        # Compared without the prefix every name shares, which would make anything look close.
        close = difflib.get_close_matches(name.removeprefix(_PREFIX), [k.removeprefix(_PREFIX) for k in known],
                                          n=1, cutoff=0.75)
        hint = f"did you mean {_PREFIX}{close[0]}?" if close else "see `logagent config` for every setting"
        raise ConfigError(f"{name} is not a setting: {hint} (unset it, or rename it)")


def describe_error(error: ValidationError, ours: Mapping[str, str]) -> str:
    """One line for the first validation error: the variable, the value given (never a secret's) and what
    is expected."""
    first = error.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    loc = tuple(str(part) for part in first["loc"])
    target = _target(list(loc)) if loc else None
    if target is None or _model_of(target[1]) is not None:
        # A combination check: name its group unless the text names the variables already.
        group = env_name(*loc) + "__*" if loc else ""
        return message if "LOGAGENT_" in message or not group else f"{group}: {message}"
    path, annotation = target
    name = env_name(*path)
    given = first.get("input")
    if SecretStr in _kinds(annotation) or not isinstance(given, str | int | float) or name not in ours:
        return f"{name} is invalid: {_lower_first(message)}"
    return f"{name}={str(given)[:_MAX_VALUE_CHARS]} is invalid: {_lower_first(message)}"


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


# --- logagent config -----------------------------------------------------------------------------


def effective_settings(settings: Settings, environ: Mapping[str, str]) -> list[dict[str, str]]:
    """Every setting as {setting, value, source}, secrets masked; source is `env`, `default` or what it
    was derived from."""
    given = {name.upper() for name in environ}
    rows: list[dict[str, str]] = []
    for leaf in _leaves(Settings):
        value = settings.repo_servers() if leaf.path == ("repo", "servers") else _value(settings, leaf)
        rows.append({"setting": leaf.env, "value": _show(value), "source": _source(leaf, given)})
    return rows


def _source(leaf: _Leaf, given: set[str]) -> str:
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
        return {k: _MASK if _SECRET_KEY.search(str(k)) and not str(k).endswith(("_env", "_file")) else _masked(v)
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
