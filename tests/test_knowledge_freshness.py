"""The packaged tables are as new as the index (issue 35, item 5): newest_releases.csv names, per framework, the
newest PyPI release the tables include (tools/build_newest_releases.py). Online, a release PyPI has had for more than
60 days that the tables lack fails; offline, every release the file names has rows in its framework's tables."""

from __future__ import annotations

import csv
import datetime
import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from packaging.version import InvalidVersion, Version

DATA = Path(__file__).resolve().parent.parent / "src" / "gpucompat" / "knowledge" / "data"
FRAMEWORKS = ("torch", "jax", "tensorflow", "cupy")
BEHIND_DAYS = 60
REGENERATE = ("read the new release's CUDA wheels with `gpucompat inspect WHEEL --json` (docs/evidence/wheels/README.md), then "
              "`python tools/build_python_wheels.py && python tools/build_knowledge.py && python tools/build_install_checks.py` "
              "(tools/build_knowledge.py ends with tools/build_newest_releases.py, which rewrites newest_releases.csv)")


def packaged(name: str) -> list[dict]:
    """A packaged table as shipped (not tables.table(), which puts a user's learned rows first)."""
    with (DATA / f"{name}.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def series(text: str) -> str:
    return ".".join(text.split(".")[:2])


def key(text: str) -> tuple:
    return tuple(int(p) for p in re.findall(r"[0-9]+", text))


NEWEST = packaged("newest_releases")


def test_each_framework_names_its_newest_release_and_when():
    assert sorted(r["framework"] for r in NEWEST) == sorted(FRAMEWORKS)
    for row in NEWEST:
        assert row["newest"] == series(row["release"]), row
        assert row["source"].startswith(f"https://pypi.org/pypi/{row['package']}/json ("), row
        uploaded, checked = (datetime.date.fromisoformat(row[c]) for c in ("uploaded", "checked"))
        assert uploaded <= checked, row


@pytest.mark.parametrize("row", NEWEST, ids=lambda r: r["framework"])
def test_the_newest_release_named_has_rows_in_its_tables(row):
    """Offline: the release is on PyPI's file list the tables were built from, and its framework's build tables describe it."""
    framework, release = row["framework"], row["release"]
    wheels = [r for r in packaged("python_wheels") if r["package"] == row["package"] and r["version"] == release]
    assert wheels and wheels[0]["pythons"], f"python_wheels.csv lacks {row['package']} {release}"
    if framework == "torch":
        default = [r for r in packaged("torch_pypi_default") if r["release"] == series(release)]
        assert default, f"torch_pypi_default.csv lacks torch {series(release)}"
        builds = [r for r in packaged("torch_builds") if r["release"] == series(release) and r["variant"] == default[0]["variant"]]
        assert builds and builds[0]["sass"], f"torch_builds.csv lacks torch {series(release)} {default[0]['variant']}"
    elif framework == "jax":
        for variant in ("cuda12", "cuda13"):  # the rows in force for it (they hold from their version on)
            rows = [r for r in packaged("jax_builds") if r["variant"] == variant and key(r["from_version"]) <= key(release)
                    and (not r["to_version"] or key(release) <= key(r["to_version"]))]
            assert rows and max(rows, key=lambda r: key(r["from_version"]))["sass"], f"jax_builds.csv has no {variant} row for jax {release}"
        checks = {r["variant"] for r in packaged("install_checks") if r["framework"] == "jax" and r["release"] == release}
        assert {"cuda12", "cuda13"} <= checks, f"install_checks.csv lacks jax[cuda12]/[cuda13]=={release}"
    elif framework == "tensorflow":
        rows = [r for r in packaged("tensorflow_builds") if r["release"] == series(release)]
        assert rows and rows[0]["sass"], f"tensorflow_builds.csv lacks tensorflow {series(release)}"
    else:
        major = release.split(".")[0]
        assert any(r["series"].split(".")[0] == major for r in packaged("cupy_archs")), f"cupy_archs.csv lacks CuPy {major}"
        assert any(r["series"] == major and key(r["last_version"]) >= key(release) for r in packaged("cupy_packages"))
    if framework != "jax":
        assert any(r["framework"] == framework and r["release"] == release for r in packaged("install_checks")), \
            f"install_checks.csv lacks {framework} {release}"


def releases_on_pypi(package: str) -> list[tuple[Version, datetime.date]]:
    """PyPI's final releases of the package that have a file not yanked, each with the day its first file was uploaded."""
    request = urllib.request.Request(f"https://pypi.org/pypi/{package}/json", headers={"User-Agent": "gpucompat-tests"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            data = json.loads(response.read())
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
        pytest.skip(f"PyPI cannot be reached ({exc}): whether the packaged tables are more than {BEHIND_DAYS} days behind it is not checked")
    found = []
    for text, files in data.get("releases", {}).items():
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        times = [f.get("upload_time_iso_8601") or f.get("upload_time") or "" for f in files if not f.get("yanked")]
        times = [t for t in times if t]
        if not (version.is_prerelease or version.is_devrelease) and times:
            found.append((version, datetime.date.fromisoformat(min(times)[:10])))
    return sorted(found)


@pytest.mark.parametrize("row", NEWEST, ids=lambda r: r["framework"])
def test_the_tables_are_not_more_than_60_days_behind_pypi(row):
    """Fails once a release newer than the tables' newest has been on PyPI for more than 60 days (the first such
    release, so a newer one out only lately does not hide an older one the tables also lack)."""
    found = releases_on_pypi(row["package"])
    assert found, f"PyPI lists no final release of {row['package']}"
    today = datetime.date.today()
    newer = [(version, day) for version, day in found if version > Version(row["release"])]
    late = [(version, day) for version, day in newer if (today - day).days > BEHIND_DAYS]
    if late:
        first, day = min(late, key=lambda item: item[1])
        pytest.fail(f"{row['package']} {first} has been on PyPI since {day} ({(today - day).days} days; newest {newer[-1][0]}), but the "
                    f"packaged tables stop at {row['framework']} {row['release']} (newest_releases.csv, checked {row['checked']}): "
                    f"{REGENERATE}")


def test_a_learned_newest_releases_file_from_before_the_new_columns_is_still_read(tmp_path):
    """An overlay an earlier gpucompat wrote has newest_releases.csv with framework,newest,source only: it is read, the
    added columns empty; a row that fills them must fill them with a version, a package and dates."""
    from gpucompat.knowledge import overlay

    (tmp_path / "newest_releases.csv").write_text("framework,newest,source\njax,0.13,learned from PyPI on 2027-01-05 (jaxlib 0.13.0 on the index)\n")
    found, _about = overlay._read(tmp_path)
    assert found["newest_releases"] == ({"framework": "jax", "newest": "0.13", "source": "learned from PyPI on 2027-01-05 (jaxlib 0.13.0 on the index)",
                                         "release": "", "package": "", "uploaded": "", "checked": ""},)
    columns = ",".join(next(csv.reader(open(DATA / "newest_releases.csv", encoding="utf-8"))))
    (tmp_path / "newest_releases.csv").write_text(f"{columns}\njax,0.13,learned from PyPI,0.13.0,jaxlib,,5 Jan 2027\n")
    with pytest.raises(overlay.Damaged, match="checked '5 Jan 2027' is not a date"):
        overlay._read(tmp_path)
