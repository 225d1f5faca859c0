"""Suite files: TOML parsed once, at the edge, into a validated SweepSpec.

Every problem is a ConfigError of one line that names the file, the line where it can tell, the
bad value and what is allowed.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from gpubench.config import launcher_keys, model_options, prices
from gpubench.config.checks import (
    check_bool,
    check_model,
    check_noise_budget,
    check_watts,
)
from gpubench.config.convergence import Convergence
from gpubench.config.errors import ConfigError, keyed_error
from gpubench.config.launcher_keys import LauncherKeys
from gpubench.config.spec import (
    AUTO,
    Budget,
    SweepSpec,
)
from gpubench.config.validate import ELEMENT_CHECKS, SCALAR_CHECKS, check_budget, validate

# Each list axis and the type of its values, as SweepSpec declares it ("tuple[int, ...]": int).
_LIST_KEYS = {
    f.name: str(f.type).removeprefix("tuple[").split(" ")[0].rstrip(",")
    for f in fields(SweepSpec)
    if f.name in ELEMENT_CHECKS
}
_ONE_OR_LIST = ("models", "scaling", "checkpoint")  # a single string means a list of one
_SCALAR_KEYS = [*SCALAR_CHECKS, "model"]  # `model`: a single model, as `models` of one
# issue 15: profile = false skips the step-time breakdown; skip_emulated = true leaves out a
# precision the device only emulates (bf16 on a CPU without bf16 instructions)
_BOOL_KEYS = ("profile", "skip_emulated")
_TABLES = {"budget": Budget, "convergence": Convergence}


def _line_of(text: str, key: str) -> int | None:
    # [ \t]*, not \s*: a blank line before the key is not its line
    pattern = re.compile(rf"^[ \t]*{re.escape(key)}[ \t]*=|^[ \t]*\[{re.escape(key)}[\].]", re.M)
    m = pattern.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _where(path: Path, text: str, key: str) -> str:
    line = _line_of(text, key)
    return f"{path}, line {line}" if line else str(path)


_AT = re.compile(r"\s*\((?:at line (\d+), column \d+|at end of document)\)$")


def _decode_error(e: tomllib.TOMLDecodeError, text: str) -> tuple[str, int | None]:
    """tomllib's message without its position, and the line of the mistake. tomllib finds an
    unclosed array or table only where the next line starts, or at the end of the file: the
    line is then the one where it opened, which is where it needs closing."""
    message = str(e)
    m = _AT.search(message)
    if m is None:
        return message, None
    line = int(m.group(1)) if m.group(1) else len(text.splitlines())
    if message.startswith("Unclosed"):
        offset = _offset_of_line(text, line) if m.group(1) else len(text)
        opened = _open_bracket_line(text[:offset])
        line = opened if opened is not None else line
    return message[: m.start()], line


def _offset_of_line(text: str, line: int) -> int:
    """The offset where 1-based `line` starts."""
    offset = 0
    for _ in range(line - 1):
        offset = text.index("\n", offset) + 1
    return offset


def _open_bracket_line(text: str) -> int | None:
    """The 1-based line of the innermost [ or { still open at the end of `text`, skipping
    strings and comments; None when none is open."""
    stack: list[int] = []
    i, line = 0, 1
    while i < len(text):
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "#":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif c in "\"'":
            quote = text[i : i + 3] if text[i : i + 3] in ('"""', "'''") else c
            end = text.find(quote, i + len(quote))
            while c == '"' and end > 0 and text[end - 1] == "\\":  # an escaped quote
                end = text.find(quote, end + 1)
            stop = len(text) if end < 0 else end + len(quote)
            line += text.count("\n", i, stop)
            i = stop
            continue
        elif c in "[{":
            stack.append(line)
        elif c in "]}" and stack:
            stack.pop()
        i += 1
    return stack[-1] if stack else None


SHIPPED = Path(__file__).resolve().parent.parent / "suites"  # the suites inside the package


def shipped_names() -> list[str]:
    """The names of the suites shipped inside the package ('quick', 'gpu', ...)."""
    return sorted(p.stem for p in SHIPPED.glob("*.toml"))


def find_suite(name_or_path: str | Path) -> Path:
    """The suite file that `name_or_path` means, as the command line reads it: a file that
    exists, as it is; otherwise a shipped suite, by name ('quick', 'quick.toml') or by a
    relative path that does not exist here and ends in a shipped suite's file name (the
    README's 'suites/quick.toml', run from another folder). Anything else is a ConfigError
    naming the value and the shipped suites."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    file_name = path.name if path.suffix == ".toml" else f"{path.name}.toml"
    shipped = SHIPPED / file_name
    elsewhere = not path.exists() and not path.is_absolute() and path.suffix in ("", ".toml")
    if elsewhere and shipped.is_file():
        return shipped
    if path.exists():
        problem = f"suite {str(name_or_path)!r} is not a file"
    elif path.suffix or len(path.parts) > 1:
        problem = f"suite file {str(name_or_path)!r} does not exist"
    else:
        problem = f"unknown suite {str(name_or_path)!r}"
    raise ConfigError(
        f"{problem}; allowed: a .toml file, or a shipped suite: {', '.join(shipped_names())}"
    )


def _read(name_or_path: str | Path) -> tuple[Path, str, dict[str, Any]]:
    """The suite file `name_or_path` means (find_suite), its text and its TOML; a ConfigError
    naming the file (and line) where it cannot be read or is no TOML."""
    path = find_suite(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read suite {str(path)!r}: {e}") from e
    try:
        return path, text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message, line = _decode_error(e, text)
        where = f"{path}, line {line}" if line is not None else str(path)
        raise ConfigError(f"{where}: malformed TOML: {message}") from e


def load_suite(path: str | Path) -> SweepSpec:
    """Read and validate a suite: a TOML file, or a shipped suite by name ('quick'; see
    find_suite), from whatever the current folder is. Every problem is a ConfigError naming
    the file (and line)."""
    path, text, raw = _read(path)
    try:
        return validate(_spec_from_dict(raw, default_name=path.stem))
    except ConfigError as e:
        key = getattr(e, "key", None)
        raise ConfigError(f"{_where(path, text, key) if key else path}: {e}") from e


# The shipped suite whose [convergence] settings (data, evaluation gaps, warm-up, base rate,
# time limit, targets) a training run to a target outside a convergence suite uses: a target
# search (tune --target) and a sweep's --confirm-target.
CONVERGENCE_SUITE = "convergence"


def convergence_settings(optimizer: str) -> tuple[str, Convergence]:
    """The shipped convergence suite's model size and settings (its base rate only for the
    optimizers it names: the optimizer's default for the others)."""
    spec = load_suite(CONVERGENCE_SUITE)
    conv = spec.convergence
    if optimizer not in spec.optimizers:
        conv = replace(conv, lr=None)
    return spec.size, conv


def target_settings(optimizer: str) -> Convergence:
    """The settings a speed sweep's "fastest to target" is predicted under (its noise phase) and
    checked under (`--confirm-target`), issue 51: the shipped convergence suite's target,
    learning-rate rule, warm-up, evaluation gaps and limits for `optimizer`, with each model at
    its own input size, the shape its speed points measured, and its target there (the suite
    itself trains the CNN on 8x8 digits, smaller than the CNN's own input)."""
    _, conv = convergence_settings(optimizer)
    return conv.at_own_input()


def load_launcher(path: str | Path) -> LauncherKeys:
    """The suite's `[launcher]` table (config.launcher_keys; every key None where the suite has
    no table), checked as load_suite checks it: a bad value is a ConfigError of one line naming
    the file, the line, the value and what is allowed."""
    path, text, raw = _read(path)
    if launcher_keys.TABLE not in raw:
        return LauncherKeys()
    try:
        return launcher_keys.parse_table(raw[launcher_keys.TABLE])
    except ConfigError as e:
        raise ConfigError(f"{_where(path, text, launcher_keys.TABLE)}: {e}") from e


def _spec_from_dict(raw: dict[str, Any], default_name: str) -> SweepSpec:
    allowed = sorted([*_LIST_KEYS, *_SCALAR_KEYS, *_TABLES, "model_options", *_BOOL_KEYS])
    allowed = sorted([*allowed, "prices", "cpu_watts", "noise_budget_s"])  # issues 32, 49, 51
    allowed = sorted([*allowed, launcher_keys.TABLE])  # issue 53
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            if key == "model_options":
                continue  # parsed once the models are known
            if key == "batch_sizes" and value == AUTO:
                kwargs[key] = AUTO
            elif key in _LIST_KEYS:
                kwargs[key] = _list(
                    key,
                    [value] if key in _ONE_OR_LIST and isinstance(value, str) else value,
                )
            elif key == "model":
                kwargs["models"] = (*kwargs.get("models", ()), check_model(value))
            elif key in _BOOL_KEYS:
                kwargs[key] = check_bool(value, key)
            elif key in _SCALAR_KEYS:
                kwargs[key] = _scalar(key, value)
            elif key in _TABLES:
                kwargs[key] = _table(key, value, _TABLES[key])
            elif key == "prices":  # issue 32
                kwargs[key] = prices.from_table(value)
            elif key == "cpu_watts":  # issue 49
                kwargs[key] = check_watts(value)
            elif key == "noise_budget_s":  # issue 51
                kwargs[key] = check_noise_budget(value)
            elif key == launcher_keys.TABLE:  # issue 53: checked here, read by load_launcher
                launcher_keys.parse_table(value)
            else:
                raise ConfigError(f"unknown key {key!r}; allowed: {', '.join(allowed)}")
        except ConfigError as e:
            raise keyed_error(key, str(e)) from e
    kwargs.setdefault("name", default_name)
    if "models" not in kwargs:
        raise ConfigError('no models given; set models = [...] (or model = "pkg.mod:fn")')
    if "model_options" in raw:
        try:
            kwargs["model_options"] = model_options.parse_table(
                raw["model_options"], kwargs["models"]
            )
        except ConfigError as e:
            raise keyed_error("model_options", str(e)) from e
    return SweepSpec(**kwargs)


def _list(key: str, value: object) -> tuple[Any, ...]:
    want = _LIST_KEYS[key]
    if not isinstance(value, list) or not value:
        also = f' or "{AUTO}"' if key == "batch_sizes" else ""
        also = ' (or "auto")' if key == "threads" else also
        raise ConfigError(f"{key} must be a non-empty list of {want}s{also}, got {value!r}")
    return tuple(ELEMENT_CHECKS[key](v) for v in value)


def _scalar(key: str, value: object) -> Any:
    if not isinstance(value, str):
        raise ConfigError(f"{key} must be a string, got {value!r}")
    return SCALAR_CHECKS[key](value)


def _table(key: str, value: object, cls: type) -> Any:
    if not isinstance(value, dict):
        raise keyed_error(key, f"[{key}] must be a table, got {value!r}")
    if cls is Convergence:
        from gpubench.config.convergence import parse_table

        try:
            return parse_table(value)
        except ConfigError as e:
            raise keyed_error(key, str(e)) from e
    # `deadline` is a moment of one tune's search (harness.timing), not a setting a file can hold.
    names = {f.name for f in fields(cls)} - {"deadline"}
    for k, v in value.items():
        if k not in names:
            raise keyed_error(key, f"unknown key {key}.{k!r}; allowed: {', '.join(sorted(names))}")
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise keyed_error(key, f"{key}.{k} must be a number, got {v!r}")
    table = replace(cls(), **value)
    if cls is Budget:
        check_budget(table)
    return table
