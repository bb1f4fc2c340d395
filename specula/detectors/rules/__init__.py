"""TESLA-style rules: a rule model, a text syntax and a Python builder, and engines that
detect them (AIP automata, CDP columns on CPU, CDP columns on GPU)."""
