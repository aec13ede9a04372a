"""Mininet's ``setParam`` protocol, shared by nodes and interfaces."""

from __future__ import annotations

from typing import Any

__all__ = ["set_param"]


def set_param(obj: object, results: dict[str, Any], method: str, **param: Any) -> Any:
    """Call ``obj.method`` with the one value in ``param`` (a list is spread, a dict
    passed as keywords) unless that value is None, and record the result under its
    name in ``results``."""
    name, value = next(iter(param.items()))
    fn = getattr(obj, method, None)
    if value is None or fn is None:
        return None
    if isinstance(value, list):
        result = fn(*value)
    elif isinstance(value, dict):
        result = fn(**value)
    else:
        result = fn(value)
    results[name] = result
    return result
