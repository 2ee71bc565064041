"""The harness that runs kernels and writes the logs the reports read: the generated GPU suites,
the pytest plugin and stage logs, GPU workers, sweeps, the model check, the environment's
fingerprint and doctor, the scaffold. May import tilekit.reports and tilekit.runtime
(tilekit/__init__.py has the map)."""
