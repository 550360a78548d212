"""Swarm state shared between clones, and the verdicts that travel with it.

`share`: pull (shadow fetch, checks, per-job compare-and-swap) and push;
`memory_pull`: a pull's memory; `approval`: let a pulled job run here;
`audit`: audits and reviews as notes on commits; `hooks`: the git hook shims
and what they do; `push_gate`: the pre-push hook's first, stdlib-only answer.
"""
