"""Model options: a suite's `[model_options."NAME"]` tables, carried in each Point as canonical
JSON so a worker builds the same model, and the check at the edge that every model of a sweep
resolves and builds with its options before anything is written."""

from __future__ import annotations

import json
import warnings
from typing import Any

from gpubench.config.errors import ConfigError

_SCALARS = (bool, int, float, str)


def parse_table(value: object, models: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """`[model_options]` from TOML: a table per model named in `models`, of option = value
    (a number, string, boolean, or a list of those)."""
    if not isinstance(value, dict):
        raise ConfigError(f"[model_options] must be a table of tables, got {value!r}")
    out: dict[str, dict[str, Any]] = {}
    for model, options in value.items():
        if model not in models:
            raise ConfigError(
                f"model_options names {model!r}, not in models; allowed: {', '.join(models)}"
            )
        if not isinstance(options, dict):
            raise ConfigError(f'[model_options."{model}"] must be a table, got {options!r}')
        for key, v in options.items():
            _check_value(f"model_options.{model}.{key}", v)
        out[model] = dict(options)
    return out


def _check_value(where: str, v: object) -> None:
    items = v if isinstance(v, list) else [v]
    if not all(isinstance(x, _SCALARS) for x in items):
        raise ConfigError(f"{where} = {v!r}; allowed: a number, string, boolean or a list of those")


class OldOptionForm(FutureWarning):
    """`--option KEY=VALUE` without its model: the form max-batch and tune took before
    issue 30; still read, with this one-line warning."""


def with_given(
    table: dict[str, dict[str, Any]],
    given: list[tuple[str | None, str, Any]],
    models: tuple[str, ...],
    where: str = "in the sweep",
) -> dict[str, dict[str, Any]]:
    """`table` (a suite's [model_options]) with the command line's `--option MODEL.KEY=VALUE`
    settings on top: a key given wins over the suite's value for it, the suite's other keys
    stay. A model not in `models` is a ConfigError naming it and the models allowed; so is an
    option without its model where there are several (where there is one, the old `KEY=VALUE`
    is read as that model's, with an OldOptionForm warning). Whether each option exists is
    check_buildable's to say."""
    out = {model: dict(options) for model, options in table.items()}
    for model, key, value in given:
        text = f"{key}={json.dumps(value)}"  # TOML reads a JSON scalar or list alike
        if model is None and len(models) == 1:
            warnings.warn(
                f"--option {text} without its model is deprecated; write --option "
                f"{models[0]}.{text}",
                OldOptionForm,
                stacklevel=2,
            )
            model = models[0]
        if model is None:
            raise ConfigError(
                f"--option {text} names no model; allowed: MODEL.KEY=VALUE, MODEL one of "
                f"{', '.join(models)}"
            )
        if model not in models:
            raise ConfigError(
                f"--option {model}.{text} names model {model!r}, not {where}; "
                f"allowed: {', '.join(models)}"
            )
        _check_value(f"--option {model}.{key}", value)
        out.setdefault(model, {})[key] = value
    return out


def for_model(model: str, given: list[tuple[str | None, str, Any]], command: str) -> dict[str, Any]:
    """The options `--option` gives a command that measures one model (max-batch, tune):
    `MODEL.KEY=VALUE` naming that model, or the old `KEY=VALUE` (read with a warning)."""
    return with_given({}, given, (model,), f"the one {command} measures").get(model, {})


def encode(options: dict[str, Any] | None) -> str | None:
    """Options as the canonical JSON a Point carries (sorted keys), None when there are none."""
    return json.dumps(options, sort_keys=True) if options else None


def decode(encoded: str | None) -> dict[str, Any]:
    """A Point's model options as keyword arguments for gpubench.models.build."""
    return json.loads(encoded) if encoded else {}


def check_buildable(models: tuple[str, ...], size: str, options: dict[str, dict[str, Any]]) -> None:
    """Resolve and build every model with its options, on the meta device (no memory, no
    arithmetic), so a typo, a missing library or an unknown option is a ConfigError before a
    sweep writes anything. A user's model that cannot be built on the meta device is built
    for real instead (it may create tensors on a named device)."""
    import torch

    from gpubench import models as registry

    for name in models:
        kwargs = options.get(name, {})
        try:
            try:
                with torch.device("meta"):
                    registry.build(name, size, **kwargs)
            except (NotImplementedError, RuntimeError):
                if name.partition(":")[0] in registry.ECOSYSTEMS or ":" not in name:
                    raise
                registry.build(name, size, **kwargs)  # a user's model: build it for real
        except ValueError as e:  # gpubench.models' own one-line messages name the model
            raise ConfigError(str(e)) from e
        except Exception as e:  # a user's function, or a library, failed: exit 2, not a row
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ConfigError(f"model {name!r} cannot be built: {type(e).__name__}: {first}") from e
