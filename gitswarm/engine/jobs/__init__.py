"""Running a job: the supervisor keeps leased workers busy until the job is done.

`run`: `work` and `run`; `supervisor`: forked workers, reaped and replaced;
`worker`: claim, run the adapter while renewing, finish; `steering`: guidance
delivered at a safe point; `followup`: continue a finished delegation;
`delegate`: one implement task as its own job; `summary`: the stitched
summary of a finished job.
"""
