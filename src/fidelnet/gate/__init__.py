"""Regression gating: a baseline of results, and a comparison that knows the noise
(``fidelnet test --save-baseline``, ``fidelnet compare``; docs/regression.md)."""

from __future__ import annotations

__all__: list[str] = []
