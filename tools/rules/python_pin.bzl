"""The one place that pins the Python version of the whole build."""

PYTHON_MINOR_VERSION = "3.11"
