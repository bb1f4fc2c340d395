"""What an input shedder is: the command it gets for a batch, and the one method it has.

A node with :class:`~specula.options.Shedding` configured has an overload detector
(:mod:`specula.shedding.overload`) and an input shedder on its inbox. For every batch the
node's processing loop takes from its inbox, the detector issues a :class:`DropCommand`
(how much to drop now, and the measurements it decided from), and the shedder answers
which events of the batch to keep. RI, BL, the inbox-level eSPICE and the hybrid paper's
input shedding implement :class:`InputShedder`.

A detector can also shed inside itself (:class:`SheddingDetector`): eSPICE proper decides
per (event, window) pair, which only the window operator can
(:class:`~specula.shedding.window_detector.WindowDetector`). A node configured with
``Shedding(strategy="detector")`` then gets :class:`DetectorShedding` on its inbox, which
keeps every event and hands each command to the node's detector.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from specula.options import Shedding


@dataclass(frozen=True)
class DropCommand:
    """The overload detector's decision for one batch taken from an inbox.

    ``share`` is what matters to most shedders; the measurements behind it are there for
    those that spread the drops themselves (eSPICE drops x = share · p_size events from
    every partition of every window, with p_size from ``q_max`` and its ``f``).
    """

    #: The fraction, in [0, 1], of the batch's plain events (flags == 0) to drop; 0 when
    #: the node is not overloaded. eSPICE's trigger asks for δ / R = x / p_size (or more,
    #: to shorten a queue beyond f·q_max: :func:`~.overload.backlog_share`), the hybrid
    #: paper's for (μ - θ) / μ.
    share: float
    #: Events (rows) in the inbox when the batch was taken, the batch included (q_size).
    q_size: int = 0
    #: Events the latency bound allows in the inbox, LB / l(p); inf until measured.
    q_max: float = math.inf
    #: Measured arrival rate R, events per second (0 until measured).
    rate_in: float = 0.0
    #: Measured throughput th = 1 / l(p), events per second (inf until measured).
    throughput: float = math.inf
    #: The node's f (shedding starts at f·q_max): eSPICE's partitions per window,
    #: rho = ceil(ws / (q_max - f·q_max)), need it.
    f: float = 0.8

    @property
    def overloaded(self) -> bool:
        """Does the detector ask for any drop at all?"""
        return self.share > 0


#: The command for a node that is not overloaded.
KEEP_ALL = DropCommand(0.0)


@runtime_checkable
class InputShedder(Protocol):
    """Decides which events of a batch taken from a node's inbox its detector gets.

    One copy per detector instance (the runtime deep-copies the prototype given as
    :attr:`Shedding.strategy <specula.options.Shedding.strategy>`, or builds the named
    one with :func:`make_shedder`); on Ray it travels into the instance's actor pickled.

    The runtime calls :meth:`keep` from the instance's processing loop, one thread, on
    **every** batch it takes from the inbox, in arrival order, overloaded or not (then
    ``command.share == 0``): a shedder with state (eSPICE's positions of events in their
    windows) sees the whole stream, dropped events included.
    """

    def keep(self, batch: np.ndarray, command: DropCommand) -> np.ndarray:
        """The keep-mask of ``batch``: a boolean array of ``len(batch)``, True = keep.

        Parameters
        ----------
        batch
            The events taken from the inbox, in arrival order: a structured array of the
            node's input dtype (core fields and its input types' payload columns; ``type``
            holds ids of the graph's registry). Read it, never change it.
        command
            How much to drop (:attr:`DropCommand.share` of the batch's plain events,
            those with ``flags == 0``) and the measurements behind it.

        Returns
        -------
        numpy.ndarray
            ``bool`` of ``len(batch)``. With ``command.share == 0`` it must keep every
            event. Rows with ``flags != 0`` (punctuations, retractions, updates,
            revocations) are kept by the runtime whatever the mask says, and only plain
            events count as shed.

        Notes
        -----
        It runs on a node that is already overloaded, so it must cost O(1) per event
        and be vectorised (NumPy or Numba, no Python loop over events); and it must be
        deterministic, a function of the events it has seen and the commands it got
        (seeded hashes, :func:`specula.events.hashing.uniform`, not a clock or an unseeded
        generator), so that in-process runs repeat exactly.

        A shedder whose decision is a function of the event and the share alone, an
        event kept at a share also kept at any lower one (RI's hashed draw), may say so
        with a class attribute ``sheds_held = True``: when the share rises, the runtime
        then also asks it about the events the node's ordering unit holds and has not
        handed on (:meth:`specula.actors.inbox.Gate.admit`), so that its drops act at
        once and not K later.
        """
        ...


@runtime_checkable
class SheddingDetector(Protocol):
    """A detector that sheds inside itself, told how much by its node's overload detector.

    The runtime calls :meth:`on_drop_command` from the instance's processing thread for
    every batch taken from the inbox, before the batch goes to the ordering unit: the
    command holds until the next one (eSPICE's LS keeps ``x`` until told otherwise).
    """

    def on_drop_command(self, command: DropCommand) -> None:
        """Drop ``command.share`` of the work from now on (0: drop nothing)."""
        ...

    def pairs_shed(self) -> dict[str, int]:
        """What it dropped so far, by input type name: (event, window) pairs for a
        window operator. A counter of the run, not state: snapshots leave it alone."""
        ...

    def work_done(self) -> int:
        """The work it did so far (every :class:`~specula.detectors.Detector` says)."""
        ...


class DetectorShedding:
    """The inbox side of ``Shedding(strategy="detector")``: keeps every event and hands
    each command to the node's detector (a :class:`SheddingDetector`)."""

    def __init__(self, detector: Any) -> None:
        if not isinstance(detector, SheddingDetector):
            raise TypeError(f"strategy 'detector' needs a detector that sheds inside itself "
                            f"(on_drop_command and pairs_shed, e.g. WindowDetector); "
                            f"{type(detector).__name__} has not")
        self.detector = detector

    def keep(self, batch: np.ndarray, command: DropCommand) -> np.ndarray:
        """Tell the detector the command; keep the whole batch."""
        self.detector.on_drop_command(command)
        return np.ones(len(batch), bool)

    def pairs_shed(self) -> dict[str, int]:
        """What the detector dropped inside itself, by type name."""
        return self.detector.pairs_shed()

    def work(self) -> tuple[int, int]:
        """The detector's work so far: units processed (``work_done``) and shed."""
        return self.detector.work_done(), sum(self.detector.pairs_shed().values())


def make_shedder(config: Shedding, detector: Any = None) -> InputShedder:
    """A fresh shedder for one instance of a node configured with ``config``;
    ``detector`` is the instance's own (the one its ordering unit drives), which
    ``strategy="detector"`` needs.

    >>> make_shedder(Shedding(latency_bound_s=1.0, seed=3))
    RandomInput(seed=3)
    """
    from specula.shedding.baselines import RandomInput

    if not isinstance(config.strategy, str):
        return copy.deepcopy(config.strategy)
    if config.strategy == "detector":
        return DetectorShedding(detector)
    named = {"random": lambda: RandomInput(seed=config.seed)}
    return named[config.strategy]()
