"""The store on a real PostgreSQL server (Debian's postgresql, started by the tests)."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
from glob import glob
from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import REPO, have_torch, run_cli
from gpucompat.errors import UserError
from gpucompat.store import SCHEMA_VERSION, Store, meta

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent / "postgres"


@pytest.fixture(scope="module")
def postgres_url():
    if not glob("/usr/lib/postgresql/*/bin/initdb"):
        pytest.skip("PostgreSQL is not installed here (.ci/run installs Debian's postgresql)")
    pytest.importorskip("psycopg", reason="psycopg is part of the test extra")
    if os.geteuid() == 0 and not shutil.which("su"):
        pytest.skip("no su to start the server as the postgres user")
    # not under pytest's own tmp dir: its parents are private to root, and the server runs as postgres
    directory = Path(tempfile.mkdtemp(prefix="gpucompat-pg-", dir="/tmp"))
    directory.chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run([str(HERE / "start-server.sh"), str(directory / "server"), str(port)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    yield proc.stdout.strip().splitlines()[-1]
    subprocess.run([str(HERE / "stop-server.sh"), str(directory / "server")], timeout=60)
    shutil.rmtree(directory, ignore_errors=True)


def test_a_sweep_stored_in_postgresql(postgres_url, isolated):
    run_cli("sweep", str(REPO / "examples" / "plans" / "quick.toml"), "--db", postgres_url, check=0)
    data = json.loads(run_cli("results", "--db", postgres_url, "--json", "--cells", check=0).stdout)
    codes = sorted(r["code"] for r in data["invalid"])
    if have_torch():  # the interpreter's own torch is probed: a CPU build has no GPU
        assert codes == ["ENV_UNRESOLVABLE", "NO_DEVICE"]  # the CPU build fails on any node; the runtimes could not be tested here
        current = next(r for r in data["invalid"] if r["variant"] == "installed")
        assert current["version"] != "installed"  # the probe facts were read back through PostgreSQL's JSON operators
    else:  # nothing to probe: no verdict, and never an invalid combination
        assert codes == ["ENV_UNRESOLVABLE"]
        assert ("torch", "UNTESTED", "not-installed") in [(r["framework"], r["code"], r["cause"]) for r in data["untested"]]
    assert sorted(r["cause"] for r in data["untested"] if r["framework"] == "cuda-runtime") == ["no-gpu"] * 3
    # what reports show of the raw probe JSON is extracted by PostgreSQL's JSON operators: each probed runtime's Python
    probed = [r for r in Store(postgres_url).result_rows(None) if r["framework"] == "cuda-runtime"]
    assert len(probed) == 3 and all((r["probe_python"] or "").startswith("3.") for r in probed), probed
    assert "## Invalid combinations" in run_cli("results", "--db", postgres_url, "--format", "md", check=0).stdout
    assert run_cli("diff", "latest", "latest", "--db", postgres_url).returncode == 0


def test_one_verdict_per_cell_and_the_schema_guard(postgres_url):
    store = Store(postgres_url)
    from gpucompat.model import Outcome, ResolvedStack, Stack, Target

    sweep = store.create_sweep("guard", "sweep", "", None, {}, [Target("NVIDIA A100", "8.0", count=1)],
                               [ResolvedStack(Stack("torch", "2.4.1", "default", "3.11", "uv"), True)], lambda r, t: {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []})
    cell = store.cells_of(sweep)[0]
    assert store.record_result(cell.id, Outcome("PASS", "compute", "ran"), None)
    assert not store.record_result(cell.id, Outcome("PASS", "compute", "again"), None)
    with store.engine.begin() as conn:
        conn.execute(meta.update().where(meta.c.key == "schema_version").values(value=str(SCHEMA_VERSION + 1)))
    with pytest.raises(UserError, match="newer than this gpucompat understands"):
        Store(postgres_url)
    with store.engine.begin() as conn:
        conn.execute(meta.update().where(meta.c.key == "schema_version").values(value=str(SCHEMA_VERSION)))
        assert conn.execute(sa.text("SELECT count(*) FROM results")).scalar() >= 1
