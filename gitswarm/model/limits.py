"""Defaults that several layers share, kept here so that reading them imports nothing heavy."""

DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_OUTPUT_CAP = 16 * 1024 * 1024  # bytes of stdout, and of stderr, kept per process run
