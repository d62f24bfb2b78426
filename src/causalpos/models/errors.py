"""The extraction's error, apart from the modules that raise it (recorder, decoder, probe, extract).

A module of its own so that the numpy-only position probe can raise it without importing torch and
transformers, as it would through the recorder.
"""

from causalpos.errors import UserError


class ExtractionError(UserError, RuntimeError):
    """The model cannot be analysed as asked; the message names the model and the setting."""
