"""TESLA-style rules: a rule model, a text syntax and a Python builder, and engines that
detect them (AIP automata, CDP columns on CPU, CDP columns on GPU)."""

from specula.detectors.rules.ast import Rule, RuleError
from specula.detectors.rules.builder import (
    Avg,
    Count,
    Ev,
    Max,
    Min,
    P,
    RuleBuilder,
    Sum,
    eq,
    ge,
    gt,
    le,
    lt,
    ne,
    rule,
)
from specula.detectors.rules.detector import RuleDetector
from specula.detectors.rules.parser import RuleSyntaxError, parse_rule, parse_rules

__all__ = [
    "Avg",
    "Count",
    "Ev",
    "Max",
    "Min",
    "P",
    "Rule",
    "RuleBuilder",
    "RuleDetector",
    "RuleError",
    "RuleSyntaxError",
    "Sum",
    "eq",
    "ge",
    "gt",
    "le",
    "lt",
    "ne",
    "parse_rule",
    "parse_rules",
    "rule",
]
