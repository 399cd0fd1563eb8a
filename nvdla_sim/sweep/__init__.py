"""Design-space sweeps: many independent scenario runs over CBUF, SRAM, MAC array, bandwidth,
clock and network (`nvdla-sim sweep SWEEP.yaml`; docs/sweeps.md).

    spec.py         SWEEP.yaml: base scenario, fixed values, grid or explicit points -> Points
    feasibility.py  configurations the hardware cannot take or whose CBUF cannot hold a layer
    point.py        one point: scenario mapping in, result row out (the runner is injected)
    conv_chain.py   a small real runner for networks of convolutions
    backends.py     local process pool, Ray
    results.py      rows, CSV and JSON, resume by point key, the area proxy
    progress.py     console progress bar with ETA
    plots.py        latency vs CBUF, Pareto front of latency vs area, DRAM vs CVSRAM
    driver.py       run_sweep: all of the above
"""
