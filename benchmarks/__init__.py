"""Side-by-side benchmarks of rshmem against NVSHMEM, NCCL and PyTorch symmetric memory.

Run from the repository root (see docs/benchmarks.md):

    torchrun --nproc-per-node 2 -m benchmarks.run --suite all --out bench-out

Layout: ``run`` is the entry point (it drives) and ``worker`` what each job's processes run;
``harness/`` is the machinery (``table``: the jobs, ``launch``: a job as its own group of
processes, ``env``, ``common``: the recorder and helpers); ``jobs/`` has one module per (suite,
library) that measures, with each suite's shared helpers (``putlib``, ``latlib``, ``aglib``,
``fusedlib``); ``kernels/`` the Triton kernels they launch, the compile check and the CUDA
micro-benchmarks; ``reporting/`` turns ``results.json`` into Markdown and PNGs. ``host_profile``
and ``numba_vs_triton`` are stand-alone measurements.
Every job runs in fresh processes so that one library's crash, hang or global setting (torch's
symmetric-memory backend is fixed per process) cannot spoil another's numbers.
"""
