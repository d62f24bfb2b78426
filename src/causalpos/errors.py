"""Errors a user can fix (a setting, a missing or damaged file): the CLI prints their message in one line.

The classes that raise them live with their stage (config.ConfigError, train.CheckpointError, ...) and derive
from UserError, so the CLI can tell them from bugs without importing the stages (and torch) first.
"""


class UserError(Exception):
    """The message says what is wrong and what to do; no traceback is needed."""


class ConfigError(UserError, ValueError):
    """A config value is wrong; the message names the key and what is allowed."""
