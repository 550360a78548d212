"""The SQLite index: a rebuildable cache of the refs plus the leases.

It lives in the git common dir (shared by every worktree), in WAL mode. It
records per job the ref tip it last indexed; `refresh` re-indexes whatever
moved. A missing, corrupt or old-format index is rebuilt from the refs, and
so is one that fails or is deleted under a running process (`recover`).

schema.py holds the tables and how a file is opened, connection.py the
connection, its lock and transactions, sync.py the keeping in step with the
refs, queries.py what the index answers and its row types.
"""

from __future__ import annotations

from gitswarm.store.index.connection import IndexBroken, IndexReplaced
from gitswarm.store.index.queries import (
    ArtifactMatch,
    ArtifactRow,
    ChangedTask,
    HeldLease,
    HolderRow,
    IndexQueries,
    LeaseRow,
)
from gitswarm.store.index.schema import INDEX_FORMAT, index_path
from gitswarm.store.index.sync import IndexSync

__all__ = [
    "INDEX_FORMAT",
    "ArtifactMatch",
    "ArtifactRow",
    "ChangedTask",
    "HeldLease",
    "HolderRow",
    "Index",
    "IndexBroken",
    "IndexReplaced",
    "LeaseRow",
    "index_path",
]


class Index(IndexQueries, IndexSync):
    """One connection to the index, kept in step with the refs, answering queries.

    With `create=False` and no index on disk yet, it is built in memory from
    the refs instead and nothing is written (see IndexConnection).
    """
