"""Browser work: its default timeout, the guardrails every browser prompt carries, and the model floor.

A browser task acts (it drives a real browser against a real service), so it
needs approval like any side effect (model/capabilities.py). Two failure
modes are common enough to be named in every browser prompt: a value set on
a React-controlled input through `.value` never reaches the framework's
state (the form then submits nothing, a fake and reproducible "bug"), and an
HTTP 200 that carries an application error. Cheap models fail at grounding
and misreport a login failure as a defect of the app, so a repository may
name the models it allows for browser work (`[browser] models`): a browser
task on any other model is refused at submission.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

BROWSER = "browser"
BROWSER_TIMEOUT = 1200.0  # seconds: a browser task's default, unless its spec sets a timeout

GUARDRAILS = """
# Browser work: three rules

1. Set a React-controlled (or any framework-controlled) input through the native
   value setter, then fire input and change events:
   `Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set.call(el, text)`,
   then `el.dispatchEvent(new Event("input", {bubbles: true}))` and the same with
   "change" (HTMLTextAreaElement for a textarea). Assigning `el.value = text` leaves
   the framework's state empty, so a submit sends nothing: a fake "bug" that
   reproduces every time.
2. Judge by network truth: each request's URL, status and response body. HTTP 200
   can carry an application error, and a page can look fine after a failed request.
   A login or setup step that failed is a failure of your run, not a defect of the app.
3. Report the network evidence each finding relies on (method, URL, status, the
   relevant part of the body) with the finding.
"""


def is_browser(needs: Sequence[str]) -> bool:
    return BROWSER in needs


def below_floor(model: str | None, allowed: Sequence[str] | None) -> str | None:
    """Why a browser task on `model` may not run here, or None when it may.

    `allowed` is the repository's `[browser] models` (exact names or shell-style
    patterns such as `claude-opus-*`); None means no floor is set.
    """
    if allowed is None:
        return None
    shown = ", ".join(allowed) if allowed else "none"
    if not model:
        return f"names no model, and browser work here runs only on an allowed one ([browser] models: {shown}): set model ="
    if any(fnmatchcase(model, pattern) for pattern in allowed):
        return None
    return f"model {model!r} is below the floor for browser work ([browser] models: {shown})"
