"""mpiddp's Python tools, one module per command, and what they share.

Commands (each a module with main(argv); scripts/<name> is its entry point):
    to_torch       scripts/to-torch       checkpoint weights -> PyTorch state_dict
    from_torch     scripts/from-torch     PyTorch weights -> model.init HDF5
    plot           scripts/plot           metrics.jsonl of runs -> one figure
    sweep          scripts/sweep          batch file -> Slurm job array
    sweep_summary  scripts/sweep-summary  a sweep's runs -> one table (and a plot)
    trace_merge    scripts/trace-merge    the ranks' timeline traces -> one file
    gpu_check      scripts/gpu-check      the one-run GPU check (scripts/gpu-check.sh calls it)

Shared:
    cli            a command line from the module's docstring (--help prints it)
    errors         `TOOL: error: ...` (exit 2) and `TOOL: note: ...` lines, printable(), missing modules
    files          atomic writes, never onto an input, never over an output without --force
    runs           a run's summary.json and metrics.jsonl, a sweep's runs.tsv
    plotting       matplotlib's pyplot without a display, or one error line
    binary         where the mpiddp binary is (MPIDDP, the installation, the checkout's build/, PATH)
    torch_layers   mpiddp's model.layers as torch.nn modules, as `mpiddp inspect layers --list` resolves them

The standard library only, except where a command needs h5py, numpy, torch or
matplotlib (Debian's python3-* packages, seen by /usr/bin/python3); each imports
them when it runs, so --help and the one-line "needs the Python module" error
work without them.
"""
