"""Side-by-side benchmarks of rshmem against NVSHMEM, NCCL and PyTorch symmetric memory.

Run from the repository root (see docs/benchmarks.md):

    torchrun --nproc-per-node 2 -m benchmarks.run --suite all --out bench-out

Layout: ``run`` is the entry point (it drives), ``launch`` starts each job as its own group of
processes, ``worker`` is what those processes run, ``jobs`` lists the jobs, one module per
(suite, library) measures, ``report`` and ``plots`` turn ``results.json`` into Markdown and PNGs.
Every job runs in fresh processes so that one library's crash, hang or global setting (torch's
symmetric-memory backend is fixed per process) cannot spoil another's numbers.
"""
