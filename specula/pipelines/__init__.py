"""Data pipelines around a detector graph: sources (the delay model, synthetic streams),
Spark ingestion, streaming and persistence, and the replay job that ties them to a
runtime. Knows no domain: a kind of log (e.g. :mod:`specula.soccer`) plugs in."""
