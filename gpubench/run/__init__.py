"""Running a sweep: planning its points, a worker process per point (memory caps, timeouts,
crashes), run folders and resuming, Ctrl-C, and the max-batch search."""
