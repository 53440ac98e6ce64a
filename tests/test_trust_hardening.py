"""The trust list is guarded like the key (issue 41 item 3). Whoever can write trusted-keys.json decides what import
calls verified, so it is read as the private key is: no link followed, owner and mode read from the descriptor, its
directory owned by this user and writable by no one else; site names are compared as a person reads them. Real keys,
real bundles, the real CLI; the tests run as root, where chmod stops nothing, so owner and mode are what is checked.
"""

from __future__ import annotations

import os
import shutil

import pytest

from bundle_forge import BENCH_DB, records, seal
from conftest import run_cli
from gpucompat import signing


@pytest.fixture
def sites(tmp_path, monkeypatch):
    """lab-a (a key, a store), here (trusts lab-a's key), mallory (a key of its own)."""
    monkeypatch.setenv("GPUCOMPAT_CACHE", str(tmp_path / "cache"))
    env = {name: {"XDG_CONFIG_HOME": str(tmp_path / name)} for name in ("lab-a", "here", "mallory")}
    for name in ("lab-a", "here", "mallory"):
        run_cli("key", env=env[name], check=0)
    run_cli("trust", "add", "lab-a", str(tmp_path / "lab-a" / "gpucompat" / "site-key.pub"), env=env["here"], check=0)
    shutil.copyfile(BENCH_DB, tmp_path / "lab-a.db")
    bundle = tmp_path / "lab-a.gz"
    run_cli("export", "--db", f"sqlite:///{tmp_path / 'lab-a.db'}", "--bundle", str(bundle), "--site", "lab-a", env=env["lab-a"], check=0)
    return env, bundle


def _refused(proc, *said: str) -> str:
    text = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert text.startswith("error: ") and "Traceback" not in text and "internal error" not in text and text.count("\n") == 0, text
    for part in said:
        assert part in text, (part, text)
    return text


def _trust_file(tmp_path):
    return tmp_path / "here" / "gpucompat" / signing.TRUSTED


def _attacks(tmp_path):
    trusted = _trust_file(tmp_path)

    def world_writable():
        os.chmod(trusted, 0o666)
        return ("may be written by others", "(mode 0666)", f"`chmod 600 {trusted}`")

    def another_owner():
        os.chown(trusted, 4242, 4242)
        return ("belongs to another user (uid 4242)", f"`chown {os.getuid()} {trusted}`")

    def open_directory():
        os.chmod(trusted.parent, 0o777)
        return ("is in a directory others may write (mode 0777)", f"`chmod 700 {trusted.parent}`")  # said of the key first

    def directory_of_another():
        os.chown(trusted.parent, 4242, 4242)
        return ("is in a directory that belongs to another user (uid 4242)",)

    def a_link():
        planted = tmp_path / "planted.json"
        shutil.copyfile(trusted, planted)
        trusted.unlink()
        trusted.symlink_to(planted)
        return ("it is a symbolic link, which gpucompat does not follow there",)

    return {"world-writable": world_writable, "another owner": another_owner, "0777 directory": open_directory,
            "directory of another user": directory_of_another, "a symlink": a_link}


@pytest.mark.parametrize("attack", ["world-writable", "another owner", "0777 directory", "directory of another user", "a symlink"])
def test_a_trust_list_others_could_write_is_refused_with_its_fix(tmp_path, sites, attack):
    env, bundle = sites
    said = _attacks(tmp_path)[attack]()
    text = _refused(run_cli("trust", "list", env=env["here"]), *said)
    if "directory" not in attack:  # a directory others may change is said of the first file read in it (the site's key)
        assert f"the trusted keys file {_trust_file(tmp_path)}" in text
    into = tmp_path / "here.db"
    _refused(run_cli("import", str(bundle), "--db", f"sqlite:///{into}", env=env["here"]), *said)
    assert not into.exists()  # nothing imported as verified, the store not even made


@pytest.mark.parametrize("name", ["lab-a ", " lab-a", "lab  a", "LOCAL", "l0cal", "Imported", "This Site", "this  site", "thi5 site",
                                  "l\u0430b-b", "\uff4cab-b", "lab\u200bb"])
def test_a_site_name_that_reads_as_a_reserved_word_or_is_not_plain_ascii_is_refused(tmp_path, sites, name):
    env, _ = sites
    mallory = str(tmp_path / "mallory" / "gpucompat" / "site-key.pub")
    if name == "thi5 site":  # a digit is no look-alike of s: a name like any other
        run_cli("trust", "add", name, mallory, env=env["here"], check=0)
        return
    _refused(run_cli("trust", "add", name, mallory, env=env["here"]), "is not a site name", "single spaces", "nor a name that reads as one")


@pytest.mark.parametrize("name", ["1ab-a", "Iab-a", "lab_a", "lab.a", "IAB-A"])
def test_a_name_that_reads_as_a_trusted_one_is_refused_at_trust_add_and_at_import(tmp_path, sites, name):
    env, bundle = sites
    mallory = str(tmp_path / "mallory" / "gpucompat" / "site-key.pub")
    _refused(run_cli("trust", "add", name, mallory, env=env["here"]), f"{name!r} reads as 'lab-a', which is trusted already")
    # a bundle from a key nobody trusts, naming itself and its sweeps as the look-alike: refused even with --untrusted
    body = records(bundle)
    body[0]["bundle"]["site"] = name
    for record in body:
        if "sweep" in record:
            record["sweep"]["site"] = name
    forged = seal(body, tmp_path / "lookalike.gz")
    into = tmp_path / "here.db"
    _refused(run_cli("import", str(forged), "--db", f"sqlite:///{into}", "--untrusted", env=env["here"]),
             f"names the site {name!r}, which reads as the trusted site 'lab-a' but is not it", "nothing was imported.")
    assert not into.exists()


def test_the_guarded_trust_list_still_verifies_what_it_trusts(tmp_path, sites):
    env, bundle = sites
    out = run_cli("import", str(bundle), "--db", f"sqlite:///{tmp_path / 'here.db'}", env=env["here"], check=0).stdout
    assert "stored verified" in out and "trusted as 'lab-a'" in out
    assert oct(_trust_file(tmp_path).stat().st_mode & 0o777) == "0o600"
