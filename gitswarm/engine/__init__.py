"""The engine: what commands do, built on the store, the adapters runtime and the model.

The base modules here are what every part uses: `swarm` (the repository's
handles and the library API the commands call), `config` (`.gitswarm.toml`),
`config_file`, `adapter_facts`, `events` and `child_signals`. The rest lives
in subpackages by concept, each importing only the base and the ones listed
before it (tests/test_layers.py):

    knowledge    what a task's prompt packet carries: memory, skills, follow-up sections
    routing      which adapter and model an attempt gets, adapter checks, what runs cost
    notify       `[notify]`: a command run when something a person waits for happens
    delegation   implement attempts and their patches: verify, merge, integrity, read-only analyze
    sharing      push and pull of swarm state, hooks, audits and reviews, approval
    machines     many machines through one git remote: the arbiter, remote leases, the watch
    jobs         running a job: supervisor, workers, steering, follow-ups, the summary
    upkeep       doctor, the demo, the report an internal error leaves
"""
