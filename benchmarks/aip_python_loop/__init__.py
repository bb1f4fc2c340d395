"""The AIP engine as it was while its per-event loop ran in Python (commit a7a3e9a),
frozen: the baseline that ``benchmarks/rules.py`` measures the Numba AIP against
(``aip_vs_python_loop``). It is not part of the package and is not maintained; only
its imports of its own modules were made relative.
"""
