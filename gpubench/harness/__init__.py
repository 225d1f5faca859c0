"""One point's measurement: the optimizer factory, the training step, the speed options
(torch.compile, channels-last, CUDA graphs), timing, failure classification, and measure_point,
which the sweep's workers and the pytest fixture both use."""
