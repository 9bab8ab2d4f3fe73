"""WorkflowThread and what it is made of: sub-threads, execution state, step log, cuts."""
