"""A JSON object read into a frozen dataclass by the dataclass's own annotations, so that a record
file has one definition of its fields (the dataclass) and a malformed file is named in one line:
the file, the field's path in it, and what is wrong there."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

from gpubench.store.results import ResultsError, ResultStore

R = TypeVar("R")


class RecordError(ResultsError):
    """A record file that is not what its writer writes (a user's input: exit status 2)."""


def read(path: Path, cls: type[R], what: str) -> R:
    """The record `cls` that the JSON file `path` holds; RecordError naming the file and what
    is wrong otherwise (`what`: the record's name in the message, "a tune record")."""
    data = value(path)
    try:
        return of(cls, data, "")
    except _Wrong as e:
        raise RecordError(f"{path} is not {what}: {e}") from None


def value(path: Path) -> Any:
    """The JSON value the file `path` holds; RecordError naming the file where it cannot be read
    or is not JSON (for a file whose shape its caller checks: a cache, a saved suite)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise RecordError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:  # not JSON, or not UTF-8
        raise RecordError(f"{path} is not JSON ({e})") from None


def read_in(run_dir: str | Path, name: str, cls: type[R], what: str) -> R | None:
    """The record `cls` in the file `name` of `run_dir` (None where the folder has none);
    RecordError as `read` says where it is there and not what its writer writes."""
    path = Path(run_dir) / name
    return read(path, cls, what) if path.is_file() else None


class Record:
    """A run folder's file of one frozen dataclass (the subclass): `FILE` its name, `WHAT` the
    record's name in an error ("a shard record"). Its fields are the file's keys, in order."""

    FILE: ClassVar[str]
    WHAT: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """The record as its file holds it (dataclasses.asdict unless the record says more)."""
        return dataclasses.asdict(self)  # type: ignore[call-overload, no-any-return]

    def write(self, run_dir: Path) -> Path:
        """The record as `FILE` in `run_dir`, written whole and durably (a crash leaves the
        old file or the new one, never half of one)."""
        return ResultStore(run_dir).write_json(self.FILE, self.to_dict())

    @classmethod
    def read(cls, run_dir: str | Path) -> Self | None:
        """The record in `run_dir`'s `FILE` (None where the folder has none); RecordError (one
        line: the file, the field and what is wrong) where it is not what its writer writes."""
        return read_in(run_dir, cls.FILE, cls, cls.WHAT)


class _Wrong(Exception):
    """What is wrong, and where in the object."""


def of(cls: type[R], value: Any, where: str) -> R:
    """`value` (a JSON object) as the dataclass `cls`: every field without a default present,
    each of its annotated type; a key that is no field is an error (a typo, or another file)."""
    if not isinstance(value, dict):
        raise _Wrong(f"{where or 'the file'} is {_shown(value)}, not an object")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise _Wrong(f"{_at(where, unknown[0])} is not a field of it")
    hints = typing.get_type_hints(cls)
    given: dict[str, Any] = {}
    for name, f in fields.items():
        if name in value:
            given[name] = _typed(value[name], hints[name], _at(where, name))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _Wrong(f"{_at(where, name)} is missing")
    try:
        return cls(**given)
    except ValueError as e:  # what the record's own check finds wrong
        raise _Wrong(f"{where}: {e}" if where else str(e)) from None


def _typed(value: Any, hint: Any, where: str) -> Any:
    """`value` as the type `hint` (a float field takes a whole number too; a tuple field a
    JSON array); _Wrong where it is not one."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _typed(value, inner, where)
    if dataclasses.is_dataclass(hint):
        return of(hint, value, where)  # type: ignore[arg-type]
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise _Wrong(f"{where} is {_shown(value)}, not a list")
        items = [_typed(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if (origin or hint) is dict:
        if not isinstance(value, dict):
            raise _Wrong(f"{where} is {_shown(value)}, not an object")
        if len(args) == 2:  # dict[str, T]: each value a T
            return {k: _typed(v, args[1], _at(where, str(k))) for k, v in value.items()}
        return value
    if hint is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _Wrong(f"{where} is {_shown(value)}, not a number")
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise _Wrong(f"{where} is {_shown(value)}, not {_NAMES.get(hint, hint.__name__)}")
    return value


_NAMES = {str: "a string", int: "a whole number", bool: "true or false"}


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _shown(value: Any) -> str:
    shown = json.dumps(value, default=str)
    return shown if len(shown) <= 40 else shown[:37] + "..."
