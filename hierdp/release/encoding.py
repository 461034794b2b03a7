"""Exact JSON for what a release carries: budgets, fractions, units, arrays, tuples.

:func:`encode` turns a value into plain JSON (dicts, lists, strings, numbers, booleans, null) that
:func:`decode` turns back into an equal value. Plain values stay plain, so the file reads naturally;
the few values JSON cannot hold exactly are tagged objects with one ``$`` key:

==============================  =================================================================
value                           JSON
==============================  =================================================================
``Fraction(1, 3)``              ``{"$fraction": "1/3"}`` (exact: budgets are rationals)
``Budget.zcdp(0.5)``            ``{"$budget": "zcdp", "rho": {"$fraction": "1/2"}}``
a privacy unit                  ``{"$unit": {"bounded": true, ...}, "kind": "hierdp.privacy.unit:PrivacyUnit"}``
an int beyond 2**53             ``{"$int": "340282366920938463463374607431768211455"}`` (seeds)
NaN, +-inf                      ``{"$float": "nan"}``, ``{"$float": "inf"}``, ``{"$float": "-inf"}``
a tuple                         ``{"$tuple": [...]}``
a numpy array                   ``{"$array": [...], "dtype": "int64", "shape": [3]}``
a dict with non-text keys       ``{"$dict": [[key, value], ...]}``
==============================  =================================================================

numpy scalars become the Python number they hold. Anything else is refused (``TypeError``): a
release must not carry what cannot be written down.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["decode", "encode", "hierdp_class"]

_SAFE_INT = 2**53


def encode(value: Any) -> Any:
    """``value`` as plain JSON that :func:`decode` turns back into an equal value."""
    from hierdp.privacy.budget import Budget
    from hierdp.privacy.unit import PrivacyUnit

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):
        return encode(value.item())
    if isinstance(value, int):
        return value if abs(value) < _SAFE_INT else {"$int": str(value)}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, Fraction):
        return {"$fraction": f"{value.numerator}/{value.denominator}"}
    if isinstance(value, Budget):
        return {"$budget": value.calculus, **{k: encode(v) for k, v in value.exact_parameters.items()}}
    if isinstance(value, PrivacyUnit):
        import dataclasses

        return {"$unit": {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)},
                "kind": f"{type(value).__module__}:{type(value).__qualname__}"}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufUO":
            raise TypeError(f"cannot write a numpy array of dtype {value.dtype}")
        return {"$array": [encode(v) for v in value.ravel().tolist()], "dtype": str(value.dtype),
                "shape": list(value.shape)}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode(v) for k, v in value.items()}
        return {"$dict": [[encode(k), encode(v)] for k, v in value.items()]}
    if hasattr(value, "items") and callable(value.items):  # a Mapping (e.g. mappingproxy)
        return encode(dict(value.items()))
    raise TypeError(f"cannot write a {type(value).__name__} into a release's JSON: {value!r:.80}")


def decode(obj: Any) -> Any:
    """The value :func:`encode` wrote."""
    from hierdp.privacy.budget import Budget
    from hierdp.privacy.unit import PrivacyUnit

    if isinstance(obj, list):
        return [decode(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if len(obj) >= 1:
        tag = next(iter(obj))
        if tag == "$fraction":
            return Fraction(obj[tag])
        if tag == "$budget":
            params = {k: decode(v) for k, v in obj.items() if k != "$budget"}
            return Budget(obj[tag], **params)
        if tag == "$unit":
            cls = hierdp_class(str(obj.get("kind", "hierdp.privacy.unit:PrivacyUnit")), PrivacyUnit)
            return cls(**{k: decode(v) for k, v in obj[tag].items()})
        if tag == "$int":
            return int(obj[tag])
        if tag == "$float":
            return float(obj[tag])
        if tag == "$tuple":
            return tuple(decode(v) for v in obj[tag])
        if tag == "$array":
            dtype = np.dtype(obj["dtype"])
            values = [decode(v) for v in obj[tag]]
            return np.array(values, dtype=dtype).reshape(obj["shape"])
        if tag == "$dict":
            return {_hashable(decode(k)): decode(v) for k, v in obj[tag]}
    return {k: decode(v) for k, v in obj.items()}


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def hierdp_class(kind: str, base: type) -> Any:
    """The class ``"module:QualName"`` names, a subclass of ``base`` defined in hierdp - a file
    must not make this process import arbitrary code.

    Raises:
        ValueError: another package's class, an unknown name, or not a ``base``.
    """
    import importlib

    module, _, name = kind.partition(":")
    if not (module == "hierdp" or module.startswith("hierdp.")) or not name:
        raise ValueError(f"{kind!r} is not a hierdp class")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{kind!r}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(f"{kind!r} is not a {base.__name__}")
    return cls
