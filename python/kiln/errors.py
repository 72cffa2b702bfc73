"""The exceptions Kiln raises, each carrying Kiln's message (the file, input, shape or field).

Every one is a KilnError; a mistake in what was given (a model, an input's shape or dtype, a
target, a flag) is also a ValueError, a failure of the environment (a file that cannot be written,
a farm that cannot be reached) also an OSError.
"""


class KilnError(Exception):
    """Any error from Kiln: the compiler, the runtime, or a farm."""


class InvalidInputError(KilnError, ValueError):
    """What was given is wrong: a model Kiln cannot read, an input of the wrong shape or dtype,
    an unknown target or operator. The message names it."""


class KilnSystemError(KilnError, OSError):
    """The environment failed: a file could not be read or written, a database, a device."""
