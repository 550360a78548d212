"""Delegations and their patches: an implement attempt, from a worktree to a verified merge.

`attempt`: one implement attempt (worktree, agent, capture, verify, repair);
`integrity`: what the agent must not touch, snapshot before and compared
after; `readonly`: analyze tasks on a clean checkout; `verify`: checks on a
clean checkout of the exact head; `merge`: only a verified head reaches a
branch; `patches`: what `diff`, `verify`, `merge` and `worktrees` do;
`check_view`, `discard`, `similar`.
"""
