"""What a device's time costs (issue 32): `--price cpu=0.10,cuda=2.50` (US dollars per hour of
each device) and `--epoch NAME|SAMPLES`, or a suite's `[prices]` table
(`cpu = 0.10`, `cuda = 2.50`, `epoch = "imagenet"`), parsed once here into `Prices`; the sweep
turns them into each row's cost columns (run.cost).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from gpubench.config.errors import ConfigError

# Training-set sizes an epoch can be named by (samples), each from its data set's own paper.
EPOCHS = {
    # ILSVRC-2012 classification training images (Russakovsky et al., IJCV 2015, Table 2)
    "imagenet": 1_281_167,
    # CIFAR-10 training images (Krizhevsky, "Learning Multiple Layers of Features from Tiny
    # Images", 2009, section 3)
    "cifar10": 50_000,
    # MNIST training digits (LeCun et al., http://yann.lecun.com/exdb/mnist/)
    "mnist": 60_000,
}
_DEVICE = re.compile(r"^(cpu|cuda|cuda:\d+)$")
DEVICES_ALLOWED = "cpu, cuda or cuda:N"


@dataclass(frozen=True)
class Prices:
    """US dollars per hour per device ("cpu", "cuda" or "cuda:N"; {} none), and the samples
    of one epoch (`epoch` names it: a key of EPOCHS, or its count as text; None: none)."""

    usd_per_hour: dict[str, float] = field(default_factory=dict)
    epoch: str | None = None
    epoch_samples: int | None = None

    def of(self, device: str) -> float | None:
        """The price of `device`'s hour: its own (cuda:1), else its type's (cuda), else None."""
        return self.usd_per_hour.get(device, self.usd_per_hour.get(device.split(":")[0]))


def price(device: str, value: Any, where: str = "--price") -> float:
    """A checked price: `device` one of DEVICES_ALLOWED, `value` a finite number > 0."""
    if not _DEVICE.match(device):
        raise ConfigError(
            f"{where} {device}={value}: unknown device {device!r}; allowed: {DEVICES_ALLOWED}"
        )
    try:
        usd = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        usd = math.nan
    if not (math.isfinite(usd) and usd > 0):
        raise ConfigError(
            f"{where} {device}={value}: a price must be a number of US dollars per hour "
            "above 0, e.g. cuda=2.50"
        )
    return usd


def epoch(value: Any, where: str = "--epoch") -> tuple[str, int]:
    """A checked epoch: a name of EPOCHS or a whole number of samples above 0."""
    text = str(value).strip().lower()
    if text in EPOCHS:
        return text, EPOCHS[text]
    if text.isdigit() and int(text) > 0 and not isinstance(value, bool | float):
        return text, int(text)
    raise ConfigError(
        f"{where} {value!r}: allowed: {', '.join(EPOCHS)} or a whole number of samples above 0"
    )


def from_flag(text: str, given: Prices | None = None) -> Prices:
    """`--price cpu=0.10,cuda=2.50` over the suite's prices `given` (a device named in both
    takes the flag's)."""
    base = given or Prices()
    out = dict(base.usd_per_hour)
    for item in text.split(","):
        device, sep, value = item.strip().partition("=")
        if not sep:
            raise ConfigError(
                f"--price {item.strip()!r}: allowed: DEVICE=USD_PER_HOUR, comma-separated, "
                "e.g. cpu=0.10,cuda=2.50"
            )
        out[device.strip()] = price(device.strip(), value.strip())
    return Prices(out, base.epoch, base.epoch_samples)


def with_epoch(value: str, given: Prices | None = None) -> Prices:
    """`--epoch NAME|SAMPLES` over the prices `given`."""
    base = given or Prices()
    name, samples = epoch(value)
    return Prices(dict(base.usd_per_hour), name, samples)


def from_table(table: Any) -> Prices:
    """A suite's `[prices]` table: device keys with dollars per hour, and `epoch`."""
    if not isinstance(table, dict):
        raise ConfigError(f"[prices] must be a table, got {table!r}")
    return _checked({k: v for k, v in table.items() if k != "epoch"}, table.get("epoch"))


def _checked(usd_per_hour: dict[str, Any], given: Any) -> Prices:
    usd = {k: price(k, v, "[prices]") for k, v in usd_per_hour.items()}
    return Prices(usd) if given is None else Prices(usd, *epoch(given, "[prices] epoch"))
