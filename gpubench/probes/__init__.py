"""Probes that observe a measurement without joining it: the torch allocator and host RSS
(memory.py), the memory breakdown (breakdown.py), NVML sampling on its own thread (nvml.py),
the FLOPs and bytes of one step outside the window, in one dispatch mode that keeps no tensor
(step_count.py, with the formulas of flops.py and bytes.py), and the matmul peak
(calibration.py)."""
