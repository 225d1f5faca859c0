"""What a setting needs to act (config.registry's `needs`) and the refusal of a setting that
cannot: channels-last without convolutions, a CUDA graph on the CPU, a loader's option without
the loader data mode. Such a point would measure the step of the point without the setting, so
the harness records it as an `unsupported` row with the reason (issue 16), and a sweep spec
that already shows a need missing is refused at the edge with one line.

One loop over the registry's entries decides every such refusal, so a new setting that needs
convolutions is refused on a model without them by its entry alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpubench.config.errors import ConfigError
from gpubench.config.registry import SETTINGS, Setting, axes

if TYPE_CHECKING:
    from gpubench.config.spec import SweepSpec

# A refusal's words for each need, where the setting has none of its own (Setting.refused):
# "{name}" is the setting, "{model}" the point's model.
WORDS: dict[str, str] = {
    "cuda": "{name} needs a CUDA device",
    "conv": "{name} applies to convolutional models; {model} has no Conv2d",
    "loader": "{name} applies to the loader data mode (--data loader)",
}


def held(row: Mapping[str, Any], conv: bool) -> dict[str, bool]:
    """What a point holds of what settings need (`row`: a Point's fields, or a result row's):
    a CUDA device, a model with 2-D convolutions (`conv`: its caller knows the model, e.g.
    models.workload.Workload.convolutional), a loader's batches."""
    return {
        "cuda": str(row["device"]).startswith("cuda"),
        "conv": conv,
        "loader": row.get("data") == "loader",
    }


def acts(setting: Setting, has: Mapping[str, bool]) -> bool:
    """Whether `setting` can act where `has` (held) holds: everything it needs is there."""
    return all(has[n] for n in setting.needs)


def refusal(row: Mapping[str, Any], conv: bool = True) -> str | None:
    """Why a setting `row` sets (Setting.engaged) cannot act, or None: the first setting in the
    registry's order with a need that `row` lacks, in the setting's words for that need (else
    WORDS'), its needs in their listed order. `conv`: whether the model has 2-D convolutions
    (True where the model is not known yet: its check waits for the model)."""
    has = held(row, conv)
    for s in SETTINGS:
        missing = [n for n in s.needs if not has[n]]
        if missing and s.engaged(row):
            words = dict(s.refused).get(missing[0], WORDS[missing[0]])
            return words.format(name=s.name, model=row["model"])
    return None


def check_sweep(spec: SweepSpec) -> None:
    """Refuse, as ConfigError, an axis given other values than its default where the spec
    already shows something it needs missing: a loader axis without data = "loader" (a CUDA
    device and convolutions are each point's, refused by `refusal` as the point runs)."""
    has = {"loader": spec.data == "loader"}
    for s in axes():
        if not any(not has.get(n, True) for n in s.needs):
            continue
        given = getattr(spec, str(s.axis))
        scalar = s.sweep == "scalar"
        if (given if scalar else tuple(given)) == s.spec_default():
            continue
        shown = repr(given) if scalar else repr(list(given))
        raise ConfigError(
            f"{s.axis} {shown} with data {spec.data!r}; allowed: {s.axis} with data = "
            "'loader' (--data loader)"
        )
