"""Settings, read once from the environment (``WBSYNC_*``) into one typed object.

Every setting's default and meaning is declared in ``settings`` (the one ``Settings`` class) and
``queues`` (the rows of its per-queue settings); docs/settings.md is generated from them
(``wbsync settings --markdown``, ``settings_doc``). ``environment`` reads the environment into
``Settings`` (``get_settings``) and says in one line what is wrong; ``secrets`` keeps secrets and
passwords out of reprs.

A layer near the bottom: it imports nothing of wbsync above ``errors`` (the limit overrides and a
per-queue option are value types of their own, ``wbsync.values.limit_overrides`` and
``wbsync.values.queue_options``), and checks only what a value is on its own. Names that must
exist in the registry (queues, WB methods, limit groups, token types, which plugins may add to)
and URLs checked by the layer that uses them are checked where the application is composed,
after the plugins are loaded (``wbsync.composition.startup``), in the same one-line form.
"""

from wbsync.config.environment import (
    SETTINGS_TABLE,
    describe,
    get_settings,
    unknown_variables,
)
from wbsync.config.queues import QUEUE_OPTIONS
from wbsync.config.secrets import without_password
from wbsync.config.settings import API_KEY_MIN_LENGTH, FUNNEL_DAYS_MAX, Settings

__all__ = [
    "API_KEY_MIN_LENGTH",
    "FUNNEL_DAYS_MAX",
    "QUEUE_OPTIONS",
    "SETTINGS_TABLE",
    "Settings",
    "describe",
    "get_settings",
    "unknown_variables",
    "without_password",
]
