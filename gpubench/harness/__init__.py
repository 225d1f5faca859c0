"""One point's measurement: the training step, its speed options, timing, failure
classification, and measure_point (the sweep's workers' and the pytest fixture's)."""
