"""How an error the user can fix (causalpos.errors.UserError: a setting, a missing or damaged file; USER_ERRORS)
ends Snakemake, a job or the CLI: its message, in one line, and no traceback on the console.

Snakemake prints a traceback under any exception raised while it reads the Snakefile, and a job's Python
traceback reaches the console through the job's stderr; both bury a message that already says what to do.
Bugs (any other exception) keep their tracebacks. Kept out of workflow.runners: none of this decides a result.
"""

from __future__ import annotations

import errno
import sys

from causalpos.errors import UserError


# What the CLI and the jobs print in one line: UserError, and ValueError, which the stages raise for a setting
# out of range (models.settings, models.data, models.tokenizer name the key). A bug raising ValueError loses
# nothing: the job's traceback is in its log, the line says where.
USER_ERRORS = (UserError, ValueError)


def stop_on_user_error(check, *args, **kwargs):
    """Call `check` while Snakemake reads the Snakefile; a UserError it raises ends Snakemake with exit status
    1 and the message alone, through Snakemake's logger (the console and .snakemake/log). SystemExit passes
    Snakemake's `except Exception` at the top of its command line untouched, and nothing is locked yet."""
    try:
        return check(*args, **kwargs)
    except USER_ERRORS as err:
        from snakemake.logging import logger

        logger.error(f"Error: {err}")
        raise SystemExit(1) from None


# A full disk or quota: nothing in the job to fix, and the same for every job that writes meanwhile.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def report_job_error(error: BaseException, log_path) -> None:
    """What a job says on stderr when its stage raised one of USER_ERRORS, or found no space to write (the
    traceback is in its log already; Snakemake's own report of the failed job names the rule)."""
    if isinstance(error, OSError) and error.errno in NO_SPACE:
        where = f" writing {error.filename}" if error.filename else ""
        error = (
            f"{error.strerror}{where}: free space where the results go (df -h shows it) and run the same command "
            f"again; nothing half-written is kept"
        )
    print(f"{error} (details: {log_path})", file=sys.stderr, flush=True)


def is_user_error(error: BaseException | None) -> bool:
    return isinstance(error, USER_ERRORS) or (isinstance(error, OSError) and error.errno in NO_SPACE)
