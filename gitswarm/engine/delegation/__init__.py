"""Delegations and their patches: an implement attempt, from a worktree to a verified merge.

`attempt`: one implement attempt (worktree, agent, capture, verify, repair);
`integrity`: what the agent must not touch, snapshot before and compared
after; `readonly`: analyze tasks on a clean checkout; `verify`: checks on a
clean checkout of the exact head, with the base's judges (`judges`: what of
the patch changes what judges it) in a guarded environment (`check_env`),
and on the base; `merge`: only a verified head reaches a
branch; `patches`: what `diff`, `verify`, `merge` and `worktrees` do;
`check_view`, `discard`, `similar`.
"""
