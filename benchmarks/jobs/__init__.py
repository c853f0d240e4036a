"""The measurements, one module per job and library (rshmem and its baselines), and their shared helpers."""
