"""The monitor: reward hacking caught while a run trains (docs/monitoring.md).

Per-sample hack detectors (the audit's strategies that have a structural signature), a second,
independent checker on a sample of live completions, honeypot tasks with a planted loophole,
and the actions a run takes on what they find (log, screen flagged samples out of the
gradient, stop).

    from rlvr.monitor import list_detectors, register_detector, register_second_opinion
"""
from .detectors import (Detector, Sample, UnknownDetectorError, detect, detectors_for,
                        get_detector, list_detectors, make_sample, register_detector)
from .monitor import ACTIONS, DISAGREEMENTS, Monitor, MonitorSettings, Watch
from .second_opinion import compare, register_second_opinion, second_opinion_for

__all__ = ["Detector", "Sample", "UnknownDetectorError", "detect", "detectors_for",
           "get_detector", "list_detectors", "make_sample", "register_detector", "ACTIONS",
           "DISAGREEMENTS", "Monitor", "MonitorSettings", "Watch", "compare",
           "register_second_opinion", "second_opinion_for"]
