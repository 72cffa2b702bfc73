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


# ---- the farm (kiln.Farm) --------------------------------------------------------------------


class FarmError(KilnError):
    """A call to a farm failed. `code` is the call's grpc.StatusCode (None for an error the
    client found itself, such as a bad chunk in a download), `details` kilnd's own message, and
    `address` the farm's address; str(error) is "<kilnd's message> (<CODE>)"."""

    def __init__(self, message: str, *, code=None, details: str = "", address: str = ""):
        super().__init__(message)
        self.code = code
        self.details = details or message
        self.address = address


class FarmUnavailableError(FarmError, KilnSystemError, ConnectionError):
    """The farm cannot be reached (nothing listening at the address, a broken connection, a TLS
    handshake that failed) or is stopping: gRPC's UNAVAILABLE. Also a ConnectionError."""


class FarmAuthError(FarmError):
    """The farm refused the call's token: none was given where one is needed, or it is wrong
    (UNAUTHENTICATED, PERMISSION_DENIED)."""


class FarmNotFoundError(FarmError, LookupError):
    """What the call named is not on the farm: a job id, or a device key no device registered
    (NOT_FOUND)."""


class FarmInvalidArgumentError(FarmError, InvalidInputError):
    """The farm refused what was sent: a model that does not import, a bad target, input shapes
    that do not fit the model (INVALID_ARGUMENT). Also an InvalidInputError."""


class FarmResourceExhaustedError(FarmError):
    """Over one of the farm's limits: a model larger than its --max-model-bytes (the message
    names both sizes), too many submissions in a minute (RESOURCE_EXHAUSTED)."""


class FarmPreconditionError(FarmError):
    """The job is not in a state for this call: fetching the bundle of a job that is not done,
    cancelling one that already ended (FAILED_PRECONDITION)."""


class FarmTimeoutError(FarmError, TimeoutError):
    """A call or a wait (Job.watch / Job.result with a timeout) ran past its time
    (DEADLINE_EXCEEDED). Also a TimeoutError."""


class JobFailedError(FarmError):
    """The job ended FAILED; the message is kilnd's reason, `info` the job's final JobInfo."""

    def __init__(self, message: str, *, info, address: str = ""):
        super().__init__(message, details=info.error, address=address)
        self.info = info


class JobCancelledError(FarmError):
    """The job was cancelled (by its owner, or by anyone holding the farm's token); `info` is
    its final JobInfo, whose `error` holds the reason given."""

    def __init__(self, message: str, *, info, address: str = ""):
        super().__init__(message, details=info.error, address=address)
        self.info = info
