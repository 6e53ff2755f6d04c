"""A discrete-event model of a DPM head node that writes a log and its ground truth.

    from dpmstream.simulator import SimConfig, simulate, scenario
    result = simulate(SimConfig(sthreads=70, seed=3), "out/run")
    result = simulate(scenario("dst-end"), "out/dst")

The names below are imported on first use (PEP 562): `whatif` and `report` run the
compiled model and never need the Python one (run.py and the daemons, ~0.1 s of
imports), yet import submodules of this package.
"""

import importlib

_HOMES = {
    "SimConfig": "config", "SimResult": "run", "simulate": "run",
    "SCENARIOS": "scenarios", "scenario": "scenarios",
    "ServiceTimes": "service", "Dist": "service",
}

__all__ = ["SimConfig", "SimResult", "simulate", "scenario", "SCENARIOS", "ServiceTimes", "Dist"]


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
