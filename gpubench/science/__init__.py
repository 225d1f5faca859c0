"""Learning, not just speed: convergence runs on real data, the gradient noise scale, learning-rate
scaling, learning curves, and the batch-size analysis of a convergence sweep."""
