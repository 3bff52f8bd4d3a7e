"""Shared test set-up."""

import sys

import pytest


@pytest.fixture(autouse=True)
def _close_shared_pools():
    """Each test starts without the pipelines' shared worker pools and leaves none running (a
    default ``DAG.run()`` starts one per root, and most tests use a root of their own)."""
    yield
    dag = sys.modules.get("attune.pipelines.dag")
    if dag is not None:
        dag.close_shared_pools()
