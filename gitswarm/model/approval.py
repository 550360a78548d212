"""A person's approval of the tasks of a job that act outside the repository.

A task with side effects (a deploy, a browser) runs only once a person has
approved it. At the terminal, `--approve` (or `approve = true` in a spec the
person submits) is that approval. A pilot's `approve` is only a request: the
person answers it through the MCP client (elicitation) or later with
`gitswarm approve JOB`. Either way the job records what was approved, by
whom and how: at submission in `Job.approval`, afterwards as an `approved`
operation (JobState.approval). An `approved` op counts only where it was made
(pulled, it could be anyone's): engine/jobs/approvals.py.
"""

from __future__ import annotations

import msgspec

#: How an approval was given, as recorded.
BY_FLAG = "--approve"
BY_SPEC = "approve = true in the spec"
BY_ELICITATION = "asked through the MCP client"
BY_COMMAND = "gitswarm approve"
#: Not an approval: a pilot asked for one, and the tasks wait for a person.
PILOT_REQUEST = "requested by a pilot"


class Approval(msgspec.Struct, frozen=True, kw_only=True):
    """Who approved which tasks' side effects, how, and when (`op`: the `approved` op, when one recorded it)."""

    tasks: tuple[str, ...]
    by: str
    how: str
    at: float
    op: str | None = None
