"""WBSYNC_LIMIT_OVERRIDES as values: a limit group's replacement limits, one per token type or one
for all, parsed from the setting's JSON. Imports nothing of wbsync: ``Settings`` is built on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class LimitOverride(BaseModel):
    """A limit group's replacement limit: ``limit`` requests per ``period_s``, ``burst``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    period_s: float = Field(gt=0)
    limit: int = Field(default=1, ge=1)
    burst: int = Field(ge=1)


def _override(where: str, spec: object) -> LimitOverride:
    try:
        return LimitOverride.model_validate(spec)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise ValueError(
            f"{where}{'.' + field if field else ''}: {err['msg']} "
            '(write {"period_s": <seconds>, "limit": <requests>, "burst": <size>})'
        ) from None


ALL_TOKEN_TYPES = "*"
"""The key of a limit group's override that applies to every token type that may call it."""

LimitOverrides = dict[str, dict[str, LimitOverride]]


def parse_limit_overrides(value: object) -> LimitOverrides:
    """Overrides by group and token type name (``"*"``: every type), from one spec per group
    or one per token type; ``ValueError`` with one line naming what is wrong in its shape.
    Whether each group and type exists is checked against the registry at start
    (``wbsync.composition.startup``)."""
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else {}
    if not isinstance(value, Mapping):
        raise ValueError('expected a JSON object: {"<limit group>": {"period_s": ..., ...}}')
    out: LimitOverrides = {}
    for group, spec in value.items():
        nested = (
            [isinstance(v, Mapping) for v in spec.values()] if isinstance(spec, Mapping) else []
        )
        if nested and all(nested):
            out[str(group)] = {str(t): _override(f"{group}.{t}", s) for t, s in spec.items()}
        elif any(nested):
            raise ValueError(f"{group}: give one limit, or one per token type, not both")
        else:
            out[str(group)] = {ALL_TOKEN_TYPES: _override(str(group), spec)}
    return out
