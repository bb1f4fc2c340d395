"""Load shedding: keep a detector's latency bound when its input overshoots its capacity.

Overload detection on a detector's inbox, and the strategies that decide what to drop:
eSPICE's utility-based input shedding for window-based operators, hybrid input and state
shedding over the rule engines' partial matches, and the papers' baselines.
"""

from specula.shedding._espice_tables import (
    UtilityModel,
    UtilityTable,
    compute_cdt,
    dropping_amount,
    partition_count,
    reference_range,
    utility_thresholds,
)
from specula.shedding.baseline import TypeUtilityShedder
from specula.shedding.espice import ESpiceShedder
from specula.shedding.windows import (
    AnyOf,
    ClosedWindows,
    Sequence,
    WindowAssigner,
    WindowOperator,
)

__all__ = ["AnyOf", "ClosedWindows", "ESpiceShedder", "Sequence", "TypeUtilityShedder",
           "UtilityModel", "UtilityTable", "WindowAssigner", "WindowOperator", "compute_cdt",
           "dropping_amount", "partition_count", "reference_range", "utility_thresholds"]
