"""Disjunctions under ``last`` and ``first``: one selection over every alternative.

``last (B(...) | C(...)) as x within W from a`` chooses the latest event that matches
*any* alternative (``first``: the earliest), as every step chooses among its candidates
(:mod:`~specula.detectors.rules.ast`). Expanding the alternatives into plain rules, as
``each`` disjunctions are, would choose the latest ``B`` in one rule and the latest
``C`` in another; a negation cannot say "and no later candidate of another alternative"
either (it neither sees predicates nor the order of equal time stamps).

So the engines run such a step as a step over one *derived type*, named ``(B | C) as
x`` (a name no rule text or registry user spells), whose events are the matches of the
alternatives: :class:`Merger` copies each event that matches an alternative (its type,
literal constraints, parameters repeated within it, and the predicates that read only
the event) into the batch right behind itself, with the derived type's id, the same
position and the same payload. The engine's ``last``/``first`` then selects among the
union of the alternatives' candidates, exactly as it selects among one type's, on every
engine (AIP, CDP, GPU CDP) with no engine change. The derived type lives in a registry
of the rule's own (:meth:`Merger.registry`), so the graph's registry never sees it.

What the derived pattern keeps, and so what the alternatives must share (checked when
the rule is built, :func:`check_selected`): each parameter bound to one attribute name
in every alternative, and the same predicates over other elements (or over parameters
bound before the step). Under ``ties nonstrict`` a copy and its event share a time
stamp and could both enter one match, so no other element of the sequence may match an
alternative's type there; and a consuming rule, whose consumed events are the inputs,
takes no such disjunction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from specula.detectors.rules.ast import (
    AttrRef,
    BinOp,
    Comparison,
    Constraint,
    Expr,
    Param,
    ParamRef,
    Pattern,
    Rule,
    RuleError,
)
from specula.detectors.rules.strings import encode
from specula.events import TypeRegistry

__all__ = ["Merger", "check_selected", "derived_name", "derived_rates", "engine_registry",
           "merged", "selected"]


def selected(rule: Rule) -> tuple[int, ...]:
    """The chain elements of ``rule`` that are ``last``/``first`` disjunctions."""
    return tuple(i for i, s in enumerate(rule.steps, start=1)
                 if s.selection != "each" and s.pattern.alternatives)


def derived_name(pattern: Pattern) -> str:
    """The derived type of the disjunction ``pattern``: ``(B | C) as x``."""
    return f"({' | '.join(pattern.types)}) as {pattern.alias}"


def _own(expr: Expr, element: int, binds: dict[str, str]) -> Expr | None:
    """``expr`` reading only the event of ``element`` (its parameters ``binds`` as the
    attributes that bind them), or None if it reads anything else."""
    if isinstance(expr, BinOp):
        left, right = _own(expr.left, element, binds), _own(expr.right, element, binds)
        return None if left is None or right is None else BinOp(expr.op, left, right)
    if isinstance(expr, ParamRef):
        return AttrRef(element, binds[expr.name]) if expr.name in binds else None
    if isinstance(expr, AttrRef):
        return expr if expr.element == element and not expr.item else None
    return expr


def _split(rule: Rule, element: int, option: Pattern
           ) -> tuple[tuple[Comparison, ...], tuple[Comparison, ...]]:
    """The predicates of an alternative: those over its event alone (parameters it binds
    read as its attributes), and the others."""
    binds = {c.value.name: c.attr for c in option.constraints if isinstance(c.value, Param)
             and rule.binder(c.value.name) == element}
    own, other = [], []
    for c in option.predicates:
        left, right = _own(c.left, element, binds), _own(c.right, element, binds)
        if left is None or right is None:
            other.append(c)
        else:
            own.append(Comparison(left, c.op, right))
    return tuple(own), tuple(other)


def _bindings(option: Pattern) -> dict[str, str]:
    """Parameter -> the first attribute of ``option`` bound to it."""
    out: dict[str, str] = {}
    for c in option.constraints:
        if isinstance(c.value, Param):
            out.setdefault(c.value.name, c.attr)
    return out


def check_selected(rule: Rule, element: int) -> None:
    """Raise :class:`RuleError` unless the ``last``/``first`` disjunction ``element``
    can run as one derived type (see the module's docstring)."""
    pattern = rule.chain[element]
    options = pattern.options()
    where = f"rule {rule.name}: the '{rule.steps[element - 1].selection}' disjunction " \
            f"{pattern.alias}"
    binds = [_bindings(o) for o in options]
    for name, attr in binds[0].items():
        others = sorted({b[name] for b in binds} - {attr})
        if others:
            raise RuleError(f"{where} binds ${name} to {attr} and to {', '.join(others)}; "
                            "bind it to one attribute name in every alternative",
                            near=(pattern.type,))
    outer = {_split(rule, element, o)[1] for o in options}
    if len(outer) > 1:
        raise RuleError(f"{where}: its alternatives compare with other elements (or "
                        "parameters bound before it) differently; give every alternative "
                        "the same such predicates, or use 'each'", near=(pattern.type,))
    if rule.consuming:
        raise RuleError(f"{where} does not mix with 'consuming'; use 'each'",
                        near=(pattern.type,))
    if rule.ties == "nonstrict":
        shared = [t for i, p in enumerate(rule.chain) if i != element for t in p.types
                  if t in pattern.types]
        if shared:
            raise RuleError(f"{where} shares the type {shared[0]} with another element "
                            "of the sequence, which under 'ties nonstrict' could choose "
                            "the same event; use 'ties strict' or 'each'",
                            near=(pattern.type,))


def merged(rule: Rule) -> Rule:
    """``rule`` with every ``last``/``first`` disjunction a pattern of its derived type:
    its parameters (one attribute each) and the predicates its alternatives share."""
    chosen = selected(rule)
    if not chosen:
        return rule
    steps = list(rule.steps)
    for i in chosen:
        pattern = rule.chain[i]
        keys = tuple(Constraint(attr, "=", Param(name))
                     for name, attr in _bindings(pattern).items())
        outer = _split(rule, i, pattern.options()[0])[1]
        steps[i - 1] = replace(steps[i - 1], pattern=Pattern(
            derived_name(pattern), keys, outer, pattern.alias))
    return replace(rule, steps=tuple(steps))


class Merger:
    """The copies that make the derived types of ``rule``'s ``last``/``first``
    disjunctions, and the registry that declares those types.

    ``rule`` is the rule as written (string literals as text); ``registry`` the graph's.
    """

    def __init__(self, rule: Rule, registry: TypeRegistry) -> None:
        # the engines' plans import the detector, which imports this module
        from specula.detectors.rules._aip_plan import Filter

        coded = encode(rule)
        self.registry = _private(registry)
        self._first_derived = len(self.registry) + 1
        self._filters: list[tuple[int, list[Any]]] = []  # derived id, Filter per option
        for i in selected(coded):
            pattern = coded.chain[i]
            for option in pattern.options():
                _check_fields(rule, i, option, registry)
            shared = [dict(registry[t].fields) for t in pattern.types]
            strings = set().union(*(registry[t].strings for t in pattern.types))
            fields = {f: (str if f in strings else dtype)
                      for f, dtype in registry[pattern.type].fields
                      if all(f in s for s in shared)}
            derived = self.registry.register(derived_name(pattern), **fields)
            self._filters.append((derived.id, [
                Filter.of(o, registry, _split(coded, i, o)[0]) for o in pattern.options()]))

    def add(self, events: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``events`` with the copies behind the events they copy, and for each row the
        row of ``events`` it is or copies (None when nothing was added or dropped).
        Events of types the graph registered after this registry are left out: the
        derived types may have their ids here."""
        of_type: dict[int, np.ndarray] = {}
        source = [np.flatnonzero(events["type"] < self._first_derived)]
        kinds = [np.zeros(len(source[0]), np.int64)]
        for type_id, filters in self._filters:
            mask = np.zeros(len(events), np.bool_)
            for f in filters:
                mask |= f.mask(events, of_type)
            source.append(np.flatnonzero(mask))
            kinds.append(np.full(len(source[-1]), type_id, np.int64))
        if len(source[0]) == len(events) and not any(len(s) for s in source[1:]):
            return events, None
        rows = np.concatenate(source)
        order = np.argsort(rows, kind="stable")  # each copy right behind its event
        origin, kind = rows[order], np.concatenate(kinds)[order]
        out = events[origin]
        copies = kind > 0
        out["type"][copies] = kind[copies]
        return out, origin


def engine_registry(rule: Rule, registry: TypeRegistry) -> TypeRegistry:
    """The registry the engines of ``rule`` read: ``registry``, or one that declares the
    derived types too (checking that the alternatives name attributes their types
    have)."""
    return Merger(rule, registry).registry if selected(rule) else registry


def derived_rates(rule: Rule, rates: Mapping[str, float]) -> dict[str, float]:
    """``rates`` (events per tick by type) with those of ``rule``'s derived types: the
    sums of their alternatives' rates (types ``rates`` lacks are left to the caller)."""
    out = dict(rates)
    for i in selected(rule):
        pattern = rule.chain[i]
        if all(t in rates for t in pattern.types):
            out[derived_name(pattern)] = sum(rates[t] for t in pattern.types)
    return out


def _private(registry: TypeRegistry) -> TypeRegistry:
    """A registry with the types of ``registry``, under the same ids."""
    own = TypeRegistry(ticks_per_second=registry.ticks_per_second)
    for t in registry.types():
        own.register(t.name, **dict(registry.field_specs(t)))
    return own


def _check_fields(rule: Rule, element: int, option: Pattern, registry: TypeRegistry
                  ) -> None:
    """The attributes an alternative (of chain ``element``) names in its constraints and
    reads of its own event exist."""
    if option.type not in registry:
        raise RuleError(f"rule {rule.name}: event type {option.type!r} is not registered; "
                        f"register it first (registry.register({option.type!r}, "
                        "attr=dtype, ...))", near=(option.type,))
    fields = registry[option.type].field_names
    refs = [c.attr for c in option.constraints]
    stack: list[Expr] = [x for c in option.predicates for x in (c.left, c.right)]
    while stack:
        expr = stack.pop()
        if isinstance(expr, BinOp):
            stack += [expr.left, expr.right]
        elif isinstance(expr, AttrRef) and expr.element == element and expr.attr != "ts":
            refs.append(expr.attr)
    for attr in refs:
        if attr not in fields:
            raise RuleError(f"rule {rule.name}: event type {option.type!r} has no attribute "
                            f"{attr!r}; its attributes are {', '.join(fields) or 'none'}",
                            near=(attr,))
