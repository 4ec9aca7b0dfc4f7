"""The harness's one error base and its exit statuses.

    raise UsageError("--seed must be a non-negative integer, got 'x'")   # printed as one line, exit 2

    try:
        ...
    except HarnessError as error:          # what the CLI catches: every harness error carries its status
        print(f"rl-harness: error: {error}", file=sys.stderr)
        return error.exit_status

Each module's own error (RecordError, ClusterError, ...) subclasses one of these, so a caller
catches `HarnessError` and never a tuple of types. Bad input a user can fix is a `UsageError`;
a programming error in a recipe's call is a plain `ValueError` (the traceback shows where);
a fault is a `HarnessError` with its `exit_status` (rl/harness/AGENTS.md, Errors).
"""

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UPLOAD_FAILED = 3


class HarnessError(Exception):
    """An error the harness explains in one line naming the fix; `exit_status` is what the CLI returns."""

    exit_status = EXIT_FAILED


class UsageError(HarnessError):
    """Bad input (a flag, a record, a setting): printed as one line that names the fix, exit status EXIT_USAGE."""

    exit_status = EXIT_USAGE


class NothingToDo(HarnessError):
    """The request is already done (`--resume-from` a completed run): one line saying so, exit status 0."""

    exit_status = 0
