"""A discrete-event model of a DPM head node that writes a log and its ground truth.

    from dpmstream.simulator import SimConfig, simulate, scenario
    result = simulate(SimConfig(sthreads=70, seed=3), "out/run")
    result = simulate(scenario("dst-end"), "out/dst")
"""

from dpmstream.simulator.config import SimConfig
from dpmstream.simulator.run import SimResult, simulate
from dpmstream.simulator.scenarios import SCENARIOS, scenario
from dpmstream.simulator.service import Dist, ServiceTimes

__all__ = ["SimConfig", "SimResult", "simulate", "scenario", "SCENARIOS", "ServiceTimes", "Dist"]
