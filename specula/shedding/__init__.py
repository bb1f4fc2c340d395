"""Load shedding: keep a detector's latency bound when its input overshoots its capacity.

Overload detection on a detector's inbox (:mod:`.overload`: eSPICE's queue bound and the
hybrid paper's latency trigger), the interface every input shedder implements
(:mod:`.base`: :class:`InputShedder`, :class:`DropCommand`), and the strategies that
decide what to drop: the papers' baselines (:mod:`.baselines`: RI, eSPICE's BL, and the
learned per-type ``type-rate``), eSPICE's utility-based input shedding for window-based
operators (:mod:`.espice`, its tables in :mod:`._espice_tables`, the operator in
:mod:`.windows`, the operator as a detector that sheds inside itself in
:mod:`.window_detector`), and the hybrid paper's input and state shedding over the rule
engines' partial matches (:mod:`.hybrid`, its cost model in :mod:`._hybrid_model`, the
knapsack in :mod:`.knapsack`, what it needs of a detector in :mod:`.state`; the state
baselines RS and SS and the input baseline SI in :mod:`.baselines`). A node asks for
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
    threshold_fractions,
    utility_levels,
    utility_thresholds,
)
from specula.shedding._hybrid_model import HybridModel, TreeTable, learn
from specula.shedding.base import (
    KEEP_ALL,
    DetectorShedding,
    DropCommand,
    InputShedder,
    SheddingDetector,
    make_shedder,
)
from specula.shedding.baselines import (
    RandomInput,
    RandomState,
    SelectivityState,
    TypeUtilityShedder,
    selectivity_input,
)
from specula.shedding.espice import ESpiceShedder
from specula.shedding.hybrid import HybridShedder
from specula.shedding.knapsack import min_cover_dp, min_cover_greedy, shedding_set
from specula.shedding.overload import OverloadDetector
from specula.shedding.state import PartialMatchHolder, PartialMatchView, StateShedder
from specula.shedding.window_detector import WindowDetector
from specula.shedding.windows import (
    AnyOf,
    ClosedWindows,
    Sequence,
    WindowAssigner,
    WindowOperator,
)

__all__ = ["KEEP_ALL", "SHEDDING_STRATEGIES", "SHEDDING_TRIGGERS", "AnyOf", "ClosedWindows",
           "DetectorShedding", "DropCommand", "ESpiceShedder", "HybridModel",
           "HybridShedder", "InputShedder", "OverloadDetector", "PartialMatchHolder",
           "PartialMatchView", "RandomInput", "RandomState", "SelectivityState", "Sequence",
           "Shedding", "SheddingDetector", "StateShedder", "TreeTable", "TypeUtilityShedder",
           "UtilityModel", "UtilityTable", "WindowAssigner", "WindowDetector",
           "WindowOperator", "compute_cdt", "dropping_amount", "learn", "make_shedder",
           "min_cover_dp", "min_cover_greedy", "partition_count", "reference_range",
           "selectivity_input", "shedding_set", "threshold_fractions", "utility_levels",
           "utility_thresholds"]
