"""The shape of Settings, for the CLI's checks and `logagent config`: every setting and group with its
environment variable, the type expected at any path through groups, mappings and lists, and an example
value of it."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from consumer.settings import Settings, env_name

__all__ = [
    "Leaf", "annotation_at", "example", "groups", "holds_secret", "json_path", "json_shape", "kinds", "leaves",
    "model_of", "setting_of", "target", "unknown_key", "value_at",
]  # fmt: skip


@dataclass(frozen=True)
class Leaf:
    """One setting (no group): its path from Settings and its field."""

    path: tuple[str, ...]
    field: FieldInfo

    @property
    def env(self) -> str:
        return env_name(*self.path)


def value_at(settings: Settings, leaf: Leaf) -> Any:
    """The value of `leaf` in `settings`."""
    value: Any = settings
    for part in leaf.path:
        value = getattr(value, part)
    return value


def model_of(annotation: Any) -> type[BaseModel] | None:
    """The group (a pydantic model) an annotation is, else None."""
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def kinds(annotation: Any) -> set[Any]:
    """The origins of an annotation, `X | None` unwrapped: {list}, {dict}, {str}, ..."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return {kind for arg in typing.get_args(annotation) if arg is not type(None) for kind in kinds(arg)}
    if typing.get_origin(annotation) is typing.Annotated:
        return kinds(typing.get_args(annotation)[0])
    return {typing.get_origin(annotation) or annotation}


def leaves(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[Leaf]:
    """Every setting below `model`, groups walked through."""
    for name, field in model.model_fields.items():
        nested = model_of(field.annotation)
        if nested is not None:
            yield from leaves(nested, (*prefix, name))
        else:
            yield Leaf((*prefix, name), field)


def groups(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every group below `model`."""
    for name, field in model.model_fields.items():
        nested = model_of(field.annotation)
        if nested is not None:
            yield (*prefix, name)
            yield from groups(nested, (*prefix, name))


def target(parts: list[str]) -> tuple[tuple[str, ...], Any] | None:
    """The setting an env var sets (its path and annotation), or None when it names none. Keys below a
    mapping setting (LOGAGENT_MEMORY__TTL_S__DEFAULT) belong to that setting."""
    model: type[BaseModel] = Settings
    path: tuple[str, ...] = ()
    for index, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return None
        path = (*path, part)
        nested = model_of(field.annotation)
        if nested is not None:
            model = nested
            if index == len(parts) - 1:
                return path, nested
            continue
        if dict in kinds(field.annotation) or index == len(parts) - 1:
            return path, field.annotation
        return None
    return None


def setting_of(loc: tuple[str, ...]) -> tuple[str, ...] | None:
    """The setting or group a validation error's location falls in (below a mapping or a list setting, the
    setting); None when it names none."""
    for end in range(len(loc), 0, -1):
        found = target(list(loc[:end]))
        if found is not None:
            return found[0]
    return None


def unknown_key(model: type[BaseModel], value: Any,
                 where: tuple[str, ...] = ()) -> tuple[tuple[str, ...], list[str]] | None:
    """Where a group's JSON has a key that names no setting of its group (keys match in any case), with
    the names it could have meant."""
    if not isinstance(value, dict):
        return None
    for key, item in value.items():
        field = model.model_fields.get(str(key).lower())
        if field is None:
            return (*where, str(key)), list(model.model_fields)
        nested = model_of(_unwrapped(field.annotation))
        found = unknown_key(nested, item, (*where, str(key))) if nested is not None else None
        if found is not None:
            return found
    return None


def json_path(parts: tuple[str, ...]) -> str:
    """Where in a JSON value: `.default`, `[0]`, `.shop.url`."""
    return "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in parts)


def annotation_at(loc: tuple[str, ...]) -> Any:
    """The type expected at `loc` (a path through groups, mappings and lists); None when it names nothing."""
    annotation: Any = Settings
    for part in loc:
        annotation = _unwrapped(annotation)
        model = model_of(annotation)
        if model is not None:
            field = model.model_fields.get(part)
            if field is None:
                return None
            annotation = field.annotation
        elif typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[1]
        elif typing.get_origin(annotation) in (list, tuple, set, frozenset):
            annotation = typing.get_args(annotation)[0]
        else:
            return None
    return annotation


def _unwrapped(annotation: Any) -> Any:
    """`X | None` and `Annotated[X, ...]` as X (the first of several types)."""
    while typing.get_origin(annotation) in (typing.Union, types.UnionType, typing.Annotated):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        annotation = args[0]
    return annotation


def holds_secret(annotation: Any) -> bool:
    """Whether a value of this type may be or contain a secret (unknown types count as secret)."""
    if annotation is None or annotation is SecretStr:
        return True
    model = model_of(annotation)
    if model is not None:
        return any(holds_secret(field.annotation) for field in model.model_fields.values())
    return any(holds_secret(arg) for arg in typing.get_args(annotation) if arg is not type(None))


def json_shape(annotation: Any) -> str | None:
    """"object" or "list" for a setting written as JSON, None for a plain value."""
    found = kinds(annotation) if annotation is not None else set()
    if model_of(_unwrapped(annotation)) is not None or dict in found:
        return "object"
    return "list" if found & {list, tuple, set, frozenset} else None


def example(path: tuple[str, ...]) -> str:
    """`e.g. NAME='...'` for a JSON setting: its documented example, else its default, else its shape."""
    name, value = env_name(*path), _sample(annotation_at(path))
    field = _field_at(path)
    if field is not None and field.examples:
        value = field.examples[0]
    elif field is not None and model_of(_unwrapped(field.annotation)) is None:
        default = field.get_default(call_default_factory=True)
        if isinstance(default, dict | list | tuple) and default:
            value = dict(list(default.items())[:2]) if isinstance(default, dict) else list(default)[:2]
    return f"e.g. {name}='{orjson.dumps(value, default=str).decode()}'"


def _field_at(path: tuple[str, ...]) -> FieldInfo | None:
    model = model_of(_unwrapped(annotation_at(path[:-1]))) if path else None
    return model.model_fields.get(path[-1]) if model is not None else None


def _sample(annotation: Any) -> Any:
    """A small value of this type, for an example: a group or record shows its first required field, else
    its first field with a plain default."""
    annotation = _unwrapped(annotation)
    model = model_of(annotation)
    if model is not None:
        fields = model.model_fields
        required = [name for name, field in fields.items() if field.is_required()]
        if required:
            return {required[0]: _sample(fields[required[0]].annotation)}
        defaults = {name: field.get_default(call_default_factory=True) for name, field in fields.items()}
        return next(({name: value} for name, value in defaults.items() if isinstance(value, str | int | float)),
                    dict([next(iter(defaults.items()))]))
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict:
        return {"key": _sample(args[1])}
    if origin in (list, tuple, set, frozenset):
        return [_sample(args[0])]
    if origin is typing.Literal:
        return args[0]
    return {bool: True, int: 1, float: 1.5}.get(annotation, "value")
