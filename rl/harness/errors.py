"""Exit statuses of the harness's commands and the one error type for bad input.

    raise UsageError("--seed must be a non-negative integer, got 'x'")   # printed as one line, exit 2
"""

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UPLOAD_FAILED = 3


class UsageError(Exception):
    """Bad input: printed as one line that names the fix, exit status EXIT_USAGE."""
