"""Looking after an installation: `doctor`, the end-to-end `demo`, and `errorlog`,
the report an internal error leaves behind."""
