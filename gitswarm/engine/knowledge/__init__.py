"""What a task's prompt packet carries instead of a transcript.

The packet itself (`packet`: the job's shared prefix, the task, what its
dependencies left), the skills chosen for it (`skills`), the memory section
(`memory_section`) drawn from memory (`memory`: remember, forget, promotion),
which rests on results a counted verdict accepted (`accepted`), and the
section a follow-up attempt adds (`followup_section`).
"""
