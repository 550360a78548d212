"""Where things live: ref names and paths inside a job's tree (format v1).

    refs/swarm/jobs/<job-id>            one ref per job
      job                               Job record
      state                             JobState record
      tasks.<fan>/<task-id>             Task record; fan = sha256(task-id)[:2]
      artifacts.<id[:2]>/<id>           artifact record; id = sha256(record)
      blobs.<oid[:2]>/<oid>             raw output an artifact points at

The fan-out directories sit in the root tree itself rather than under a
`tasks/` directory: a write then rewrites one tree fewer per kind of record,
and tree writes are most of what a transition costs.
"""

from __future__ import annotations

import hashlib

JOBS_PREFIX = "refs/swarm/jobs/"
NOTES_REF = "refs/notes/swarm"
JOB_PATH = "job"
STATE_PATH = "state"
TASKS_FANS = "tasks."
ARTIFACTS_FANS = "artifacts."
BLOBS_FANS = "blobs."
MEMORY_RECORDS_FANS = "records."  # refs/swarm/memory: records.<id[:2]>/<id> (store/memory.py)


BRANCHES_PREFIX = "refs/swarm/branches/"  # an implement task's head, pushed with its finish by `work --remote`


# A task's lease history on a shared remote (`work --remote`): its claims, renewals, expiries and finishes are
# pushed here rather than to the job's ref, so that machines claiming different tasks never race for one ref.
CLAIMS_PREFIX = "refs/swarm/claims/"


def claim_ref(job_id: str, task_id: str) -> str:
    return f"{CLAIMS_PREFIX}{job_id}/{task_id}"


def branch_ref(job_id: str, task_id: str) -> str:
    return f"{BRANCHES_PREFIX}{job_id}/{task_id}"


PATCHES_PREFIX = "refs/swarm/patches/"  # a patch's head, by the patch's id: `push` sends it with the state


def patch_ref(patch_id: str) -> str:
    return PATCHES_PREFIX + patch_id


def job_ref(job_id: str) -> str:
    return JOBS_PREFIX + job_id


def task_fan(task_id: str) -> str:
    return hashlib.sha256(task_id.encode()).hexdigest()[:2]


def task_path(task_id: str) -> str:
    return f"{TASKS_FANS}{task_fan(task_id)}/{task_id}"


def artifact_path(artifact_id: str) -> str:
    return f"{ARTIFACTS_FANS}{artifact_id[:2]}/{artifact_id}"


def blob_path(oid: str) -> str:
    return f"{BLOBS_FANS}{oid[:2]}/{oid}"
