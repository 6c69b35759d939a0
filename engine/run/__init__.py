"""A run from start to summary: create/resume/branch, its set-up, state, summary, admin, lease, analysis, snapshot and history."""
