"""Load shedding: keep a detector's latency bound when its input overshoots its capacity.

Overload detection on a detector's inbox (:mod:`.overload`: eSPICE's queue bound and the
hybrid paper's latency trigger), the interface every input shedder implements
(:mod:`.base`: :class:`InputShedder`, :class:`DropCommand`), and the strategies that
decide what to drop: the papers' baselines (:mod:`.baselines`: RI, and eSPICE's BL),
eSPICE's utility-based input shedding for window-based operators (:mod:`.espice`, its
tables in :mod:`._espice_tables`, the operator in :mod:`.windows`, the operator as a
detector that sheds inside itself in :mod:`.window_detector`), and (still to come)
hybrid input and state shedding over the rule engines' partial matches. A node asks for
shedding with ``Graph.add(..., shedding=Shedding(latency_bound_s=...))``; the runtimes
(:mod:`specula.actors`) run the detector and the shedder on the node's inbox.
"""

from specula.options import SHEDDING_STRATEGIES, SHEDDING_TRIGGERS, Shedding
from specula.shedding._espice_tables import (
    UtilityModel,
    UtilityTable,
    compute_cdt,
    dropping_amount,
    partition_count,
    reference_range,
    utility_thresholds,
)
from specula.shedding.base import (
    KEEP_ALL,
    DetectorShedding,
    DropCommand,
    InputShedder,
    SheddingDetector,
    make_shedder,
)
from specula.shedding.baselines import RandomInput, TypeUtilityShedder
from specula.shedding.espice import ESpiceShedder
from specula.shedding.overload import OverloadDetector
from specula.shedding.window_detector import WindowDetector
from specula.shedding.windows import (
    AnyOf,
    ClosedWindows,
    Sequence,
    WindowAssigner,
    WindowOperator,
)

__all__ = ["KEEP_ALL", "SHEDDING_STRATEGIES", "SHEDDING_TRIGGERS", "AnyOf", "ClosedWindows",
           "DetectorShedding", "DropCommand", "ESpiceShedder", "InputShedder",
           "OverloadDetector", "RandomInput", "Sequence", "Shedding", "SheddingDetector",
           "TypeUtilityShedder", "UtilityModel", "UtilityTable", "WindowAssigner",
           "WindowDetector", "WindowOperator", "compute_cdt", "dropping_amount",
           "make_shedder", "partition_count", "reference_range", "utility_thresholds"]
