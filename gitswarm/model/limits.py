"""Defaults and bounds that several layers share, kept here so that reading them imports nothing heavy.

Every number a user or a spec can give is checked against a bound here
before anything is written: a NaN, an infinity or an absurd value is bad
input, never accepted silently (docs/cli.md lists them).
"""

DAY = 24 * 3600.0

DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_OUTPUT_CAP = 16 * 1024 * 1024  # bytes of stdout, and of stderr, kept per process run

MAX_TIMEOUT_SECONDS = 7 * DAY  # a task's (or an adapter's, or an audit's) timeout
MAX_WALL_SECONDS = 365 * DAY  # a job's budget.max_wall
MAX_WORKERS = 256  # -j
MIN_LEASE_SECONDS = 1.0  # --lease: renewed every third of it
MAX_LEASE_SECONDS = DAY
MIN_OUTPUT_CAP = 1024  # --output-cap, in bytes
MAX_OUTPUT_CAP = 1024 * 1024 * 1024

MAX_PULLED_RECORD = 16 * 1024 * 1024  # bytes of one pulled record: an operation's commit, an artifact ([pull] max_record)
MAX_PULL = 1024 * 1024 * 1024  # bytes one pull may read in all ([pull] max_pull)

#: `work --remote`: how far past its deadline another machine's lease must be before it is expired (seconds).
DEFAULT_CLOCK_SKEW_SECONDS = 5.0
