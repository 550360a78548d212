"""Many machines working one job through one git remote (`work --remote`).

`arbiter`: offer commits to the remote and adopt what it accepted;
`remote_leases`: the lease transitions, each accepted by the remote before it
counts; `claim_ahead`: a worker's next claim pushed while its task runs;
`crew`: a machine's workers claiming for each other in one push;
`remote_watch`: fetch, merge and expire what died elsewhere.
"""
