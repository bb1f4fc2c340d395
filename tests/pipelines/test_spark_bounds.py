"""What a long watch would pile up in Spark's JVMs is bounded in every session: the
history of finished work and the SQL thread pools."""

from __future__ import annotations

from specula.cluster.spark import _BOUNDED_HISTORY, _BOUNDED_THREADS


def test_a_session_starts_with_bounded_history_and_thread_pools(spark):
    conf = spark.sparkContext.getConf()
    for name, value in {**_BOUNDED_HISTORY, **_BOUNDED_THREADS}.items():
        assert conf.get(name) == value, name
    # static SQL settings reach the session's SQL configuration too
    assert spark.conf.get("spark.sql.shuffleExchange.maxThreadThreshold") == "8"
