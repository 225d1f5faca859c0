"""What a run leaves behind: the result row's schema, the append-only results store, the captured
environment (env.json), and rows read from pytest-benchmark JSON."""
