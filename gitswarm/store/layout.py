"""Where things live: ref names and paths inside a job's tree (format v1).

    refs/swarm/jobs/<job-id>            one ref per job
      job                               Job record
      state                             JobState record
      tasks/<fan>/<task-id>             Task record; fan = sha256(task-id)[:2]
      artifacts/<id[:2]>/<id>           artifact record; id = sha256(record)
      blobs/<oid[:2]>/<oid>             raw output an artifact points at
"""

from __future__ import annotations

import hashlib

JOBS_PREFIX = "refs/swarm/jobs/"
NOTES_REF = "refs/notes/swarm"
JOB_PATH = "job"
STATE_PATH = "state"
TASKS_DIR = "tasks"
ARTIFACTS_DIR = "artifacts"
BLOBS_DIR = "blobs"


def job_ref(job_id: str) -> str:
    return JOBS_PREFIX + job_id


def task_fan(task_id: str) -> str:
    return hashlib.sha256(task_id.encode()).hexdigest()[:2]


def task_path(task_id: str) -> str:
    return f"{TASKS_DIR}/{task_fan(task_id)}/{task_id}"


def artifact_path(artifact_id: str) -> str:
    return f"{ARTIFACTS_DIR}/{artifact_id[:2]}/{artifact_id}"


def blob_path(oid: str) -> str:
    return f"{BLOBS_DIR}/{oid[:2]}/{oid}"
