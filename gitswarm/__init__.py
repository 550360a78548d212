"""gitswarm: a supervisor for coding-agent swarms whose durable state lives in git."""

__version__ = "0.1.0"
