"""Load shedding: keep a detector's latency bound when its input overshoots its capacity.

Overload detection on a detector's inbox, and the strategies that decide what to drop:
eSPICE's utility-based input shedding for window-based operators, hybrid input and state
shedding over the rule engines' partial matches, and the papers' baselines.
"""
