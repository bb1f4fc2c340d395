import os

import pytest


@pytest.fixture(scope="session")
def spark():
    """One Spark session (``local[2]``) for every test that calls the pipelines in this
    process: starting one takes seconds. The tests' logs are small."""
    from specula.cluster.spark import spark_session

    with spark_session("local[2]", small_input=True) as session:
        yield session


@pytest.fixture(scope="module")
def ray_address():
    """A local Ray cluster the watches join (Ray on Spark would add ~25 s a run),
    without token authentication, which a joining process has no token for here."""
    ray = pytest.importorskip("ray")
    mode = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # the watches inherit it
    try:
        context = ray.init(num_cpus=2, include_dashboard=False, configure_logging=False,
                           log_to_driver=False)
        yield context.address_info["gcs_address"]
        ray.shutdown()
    finally:
        if mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = mode
