"""Load shedding: keep a detector's latency bound when its input overshoots its capacity.

Overload detection on a detector's inbox (:mod:`.overload`: eSPICE's queue bound and the
hybrid paper's latency trigger), the interface every input shedder implements
(:mod:`.base`: :class:`InputShedder`, :class:`DropCommand`), and the strategies that
decide what to drop: the papers' baselines (:mod:`.baselines`: RI), eSPICE's
utility-based input shedding for window-based operators and hybrid input and state
shedding over the rule engines' partial matches. A node asks for shedding with
``Graph.add(..., shedding=Shedding(latency_bound_s=...))``; the runtimes
(:mod:`specula.actors`) run the detector and the shedder on the node's inbox.
"""

from specula.options import SHEDDING_STRATEGIES, SHEDDING_TRIGGERS, Shedding
from specula.shedding.base import KEEP_ALL, DropCommand, InputShedder, make_shedder
from specula.shedding.baselines import RandomInput
from specula.shedding.overload import OverloadDetector

__all__ = ["KEEP_ALL", "SHEDDING_STRATEGIES", "SHEDDING_TRIGGERS", "DropCommand",
           "InputShedder", "OverloadDetector", "RandomInput", "Shedding", "make_shedder"]
