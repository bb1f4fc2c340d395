import pytest


@pytest.fixture(scope="session")
def spark():
    """One Spark session (``local[2]``) for every test that calls the pipelines in this
    process: starting one takes seconds. The tests' logs are small."""
    from specula.cluster.spark import spark_session

    with spark_session("local[2]", small_input=True) as session:
        yield session
