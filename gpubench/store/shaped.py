"""Whether a JSON value read from a run file has the shape its writer gives it, by a small schema
of the keys gpubench reads (a free-form file such as env.json, whose other keys are kept as they
are): the one check of such a file, so that a value of the wrong type is named in one line (its
key path and what it holds) before a reader formats or compares it.

A schema is one of:
- a type (str, int, float, bool, dict, list): a value of it, or null (float takes a whole
  number; a number is finite and at most MAX_MAGNITUDE in size; bool is no number);
- `object`: any value;
- a dict {key: schema}: an object whose listed keys (each optional) have their shape, any
  other key allowed; {"*": schema}: an object whose every value has that shape;
- a list [schema]: an array each of whose items has that shape;
- a tuple of schemas: a value of any one of those shapes;
- LIMIT: a number as float takes it, or infinity (a budget's "no limit").
"""

from __future__ import annotations

import math
from typing import Any

# The largest magnitude a number in a run file may have: beyond any figure gpubench measures
# (bytes under 2**63, FLOPs per step, samples/s) and far from a float's overflow (1e308), so
# that a product or a sum of two figures stays finite.
MAX_MAGNITUDE = 1e30
_WORDS = {str: "text", int: "a whole number", float: "a number", bool: "true or false"}
_WORDS |= {dict: "an object", list: "an array"}
LIMIT = "a number or infinity"


def problem(value: Any, schema: Any, where: str) -> str | None:
    """Why `value` (at key path `where`) does not have the shape `schema`, in words that name
    the path ("cpu is 'fast', not an object"); None where it has."""
    if schema is object or value is None:
        return None
    if isinstance(schema, tuple):
        whys = [problem(value, one, where) for one in schema]
        return None if None in whys else whys[-1]
    if schema == LIMIT:
        if isinstance(value, float) and math.isinf(value) and value > 0:
            return None
        schema = float
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return f"{where} is {shown(value)}, not an object"
        for key, item in value.items():
            inner = schema.get("*", schema.get(key, object))
            if (why := problem(item, inner, f"{where}.{key}")) is not None:
                return why
        return None
    if isinstance(schema, list):
        if not isinstance(value, list):
            return f"{where} is {shown(value)}, not an array"
        for i, item in enumerate(value):
            if (why := problem(item, schema[0], f"{where}[{i}]")) is not None:
                return why
        return None
    if schema in (int, float):
        allowed = int if schema is int else int | float
        if isinstance(value, bool) or not isinstance(value, allowed):
            return f"{where} is {shown(value)}, not {_WORDS[schema]}"
        if not (isinstance(value, int) or math.isfinite(value)) or abs(value) > MAX_MAGNITUDE:
            return f"{where} is {shown(value)}, beyond {MAX_MAGNITUDE:g} in size"
        return None
    if not isinstance(value, schema):
        return f"{where} is {shown(value)}, not {_WORDS.get(schema, schema.__name__)}"
    return None


def shown(value: Any) -> str:
    """`value` as an error quotes it: its repr (control characters escaped), at most 40
    characters; a whole number of many digits by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 100:
        return f"a number of {len(str(value)) if value.bit_length() < 4000 else 'many'} digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
