"""One Slurm cluster with slurmplan's Slurm-side parts installed, shared by the integration tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from site_cluster import SiteCluster, unusable_reason


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SiteCluster]:
    reason = unusable_reason()
    if reason:
        pytest.skip(reason)
    # Not below pytest's 0700 temporary directory: one test submits as the unprivileged user `nobody`,
    # whose sbatch must read slurm.conf and the job script.
    root = Path(tempfile.mkdtemp(prefix="slurmplan-site-"))
    os.chmod(root, 0o755)
    # pytest keeps only its last few temporary directories and other sessions on this host run pytest too,
    # so the journal and plan files of a session-long cluster live in our own directory.
    (root / "files").mkdir()
    cluster = SiteCluster(root / "files", root / "cluster")
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()
        shutil.rmtree(root, ignore_errors=True)
