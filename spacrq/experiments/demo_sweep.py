"""A simulated instrument sweep: the demo experiment (``python -m spacrq.experiments.demo_sweep``).

Steps a simulated source through ``points`` set-points between ``start`` and
``stop`` and, at each, dwells, then averages ``readings`` noisy detector
readings of a resonance (a Lorentzian on a sloped background).  It stands in
for a real measurement everywhere a real one would be needed: the demo
workspace, the end-to-end tests, the benchmark.  ``glitch_rate`` makes the
simulated detector fail now and then, to show a step being retried.
"""
from __future__ import annotations

import math
import random
import sys
from typing import Any, Mapping

from spacrq.experiments.authoring import Field, Step, StepExperiment

__all__ = ["InstrumentSweep"]


class InstrumentSweep(StepExperiment):
    """A set-point sweep of a simulated source with a noisy detector."""

    module = "spacrq.experiments.demo_sweep"
    title = "Simulated instrument sweep"
    name = "sweep"
    max_retries = 3
    retry_pause = 0.05
    fields = (
        Field("points", "int", 50, min_value=2, max_value=100_000,
              description="How many set-points the sweep steps through."),
        Field("start", "float", 0.0, unit="mV", min_value=-5000.0, max_value=5000.0,
              description="First set-point of the source."),
        Field("stop", "float", 1000.0, unit="mV", min_value=-5000.0, max_value=5000.0,
              description="Last set-point of the source."),
        Field("dwell", "float", 0.1, unit="s", min_value=0.0, max_value=600.0,
              description="Settling time at each set-point before reading."),
        Field("readings", "int", 4, min_value=1, max_value=1000, group="detector",
              description="Readings averaged per set-point."),
        Field("noise", "float", 0.02, unit="a.u.", min_value=0.0, max_value=10.0, group="detector",
              description="Standard deviation of one reading's noise."),
        Field("mode", "str", "photodiode", options=("photodiode", "pmt"), group="detector",
              description="Which simulated detector reads the signal."),
        Field("glitch_rate", "float", 0.0, min_value=0.0, max_value=0.5, group="detector",
              description="Chance that one reading fails (the step is retried)."),
        Field("seed", "int", 7, min_value=0, description="Seed of the simulated noise."),
    )

    def plan(self, config: Mapping[str, Any]) -> list[Step]:
        n = int(config["points"])
        start, stop = float(config["start"]), float(config["stop"])
        return [Step(f"point[{i:05d}]", {"setpoint_mV": start + (stop - start) * i / (n - 1)},
                     op="measure_point") for i in range(n)]

    def _signal(self, setpoint: float, config: Mapping[str, Any]) -> float:
        start, stop = float(config["start"]), float(config["stop"])
        centre = (start + stop) / 2
        width = max(abs(stop - start) / 12, 1e-9)
        gain = 8.0 if config["detector"]["mode"] == "pmt" else 1.0
        peak = 1.0 / (1.0 + ((setpoint - centre) / width) ** 2)
        return gain * (0.1 + 0.05 * (setpoint - start) / max(abs(stop - start), 1e-9) + peak)

    def run_step(self, step: Step, config: Mapping[str, Any]) -> dict[str, Any]:
        det = config["detector"]
        setpoint = float(step.params["setpoint_mV"])
        index = int(step.id[6:-1])
        rng = random.Random(f"{config['seed']}:{index}")
        glitch = random.Random()
        self.progress(0, det["readings"] + 1, "settling")
        self.sleep(float(config["dwell"]))
        values = []
        for k in range(det["readings"]):
            if det["glitch_rate"] and glitch.random() < det["glitch_rate"]:
                raise RuntimeError(f"detector timed out at {setpoint:.1f} mV")
            values.append(self._signal(setpoint, config) + rng.gauss(0.0, det["noise"]))
            self.progress(k + 1, det["readings"] + 1, f"reading {k + 1}/{det['readings']}")
        mean = sum(values) / len(values)
        spread = math.sqrt(sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1))
        return {"step": index, "setpoint_mV": round(setpoint, 6), "signal": mean,
                "stderr": spread / math.sqrt(len(values)), "readings": len(values),
                "detector": det["mode"]}


if __name__ == "__main__":
    sys.exit(InstrumentSweep().main())
