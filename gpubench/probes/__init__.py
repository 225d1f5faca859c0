"""Probes that observe a measurement without joining it: the torch allocator and host RSS
(memory.py), the memory breakdown (breakdown.py), NVML sampling on its own thread (nvml.py),
FLOP counting of one step outside the window (flops.py), and the matmul peak (calibration.py)."""
