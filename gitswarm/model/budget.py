"""Job budgets: whether the next lease would go past one of them."""

from __future__ import annotations

from gitswarm.model.records import Job, JobState


def exhausted(job: Job, state: JobState, now: float) -> str | None:
    """The budget the job has used up, with the figures, or None while it may go on."""
    budget = job.budget
    if budget is None or state.stopped:
        return None
    if budget.max_usd is not None and state.spent_usd >= budget.max_usd:
        return f"max_usd: spent ${state.spent_usd:.4f} of ${budget.max_usd:g}"
    if budget.max_tokens is not None and state.tokens >= budget.max_tokens:
        return f"max_tokens: used {state.tokens} of {budget.max_tokens} tokens"
    if budget.max_attempts is not None and state.claims >= budget.max_attempts:
        return f"max_attempts: made {state.claims} of {budget.max_attempts} attempts"
    if budget.max_wall is not None and now - job.created >= budget.max_wall:
        return f"max_wall: {now - job.created:.0f}s since submission, limit {budget.max_wall:g}s"
    return None
