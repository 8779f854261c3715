"""Reading the environment into ``Settings``: unknown variables, JSON and invalid values, each
said in one line that names the variable and never its value (a value may be a secret)."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from functools import lru_cache

from pydantic import ValidationError
from pydantic_settings import SettingsError

from wbsync.config.settings import Settings
from wbsync.errors import ConfigError

# Read by the test suite only; allowed beside the settings so CI can set it.
_NOT_SETTINGS = frozenset({"WBSYNC_TEST_POSTGRES_URL"})


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """``WBSYNC_*`` variables that name no setting, each with a hint (a typo is an error)."""
    known = {f"WBSYNC_{name.upper()}" for name in Settings.model_fields}
    problems = []
    for var in sorted(environ):
        if var.startswith("WBSYNC_") and var not in known and var not in _NOT_SETTINGS:
            close = difflib.get_close_matches(var, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"{var} is not a setting{hint}")
    return problems


SETTINGS_TABLE = "see docs/settings.md"
_JSON_FIELD = re.compile(r'field "(\w+)"')


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read from the environment on first use.

    ``ConfigError`` names every wrong variable and what to do, in one line without the values
    (a value may be a secret).
    """
    unknown = unknown_variables(os.environ)
    if unknown:
        raise ConfigError("; ".join(unknown) + f"; {SETTINGS_TABLE}")
    try:
        return Settings()
    except SettingsError as exc:  # a JSON setting that is not JSON
        found = _JSON_FIELD.search(str(exc))
        var = f"WBSYNC_{found.group(1).upper()}" if found else "a WBSYNC_ JSON setting"
        raise ConfigError(
            f"{var}: not valid JSON; write it as JSON (quotes included), {SETTINGS_TABLE}"
        ) from None
    except ValidationError as exc:
        raise ConfigError(describe(exc)) from None


def describe(exc: ValidationError) -> str:
    """One line naming each invalid variable and what was wrong with it (never its value)."""
    problems = []
    for err in exc.errors():
        name = str(err["loc"][0]) if err["loc"] else "?"
        where = "".join(f"[{p}]" for p in err["loc"][1:])  # a list's index, a queue's name
        msg = err["msg"].removeprefix("Value error, ")
        problems.append(f"WBSYNC_{name.upper()}{where}: {msg}")
    return "; ".join(problems) + f" ({SETTINGS_TABLE})"
