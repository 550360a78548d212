"""What an adapter can do, named the same in adapter specs (`capabilities`) and job specs (`needs`)."""

from __future__ import annotations

CAPABILITIES = ("edit", "browser", "web", "read-only", "deploy")
#: Work that acts outside the repository: a task that needs it runs only when approved.
SIDE_EFFECTS = frozenset({"browser", "deploy"})
