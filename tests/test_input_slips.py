"""The inputs that still slipped through (issue 30, "Inputs that still slip through"), each closed.

Every case is the real command as a user runs it (conftest's run_cli, an isolated store): its exit status, its one
sentence (asserted whole), no traceback, and nothing written or stored that was there before. Files a user names
are read as regular files with the bound counted while reading (devices, named pipes, sockets refused at once);
bundles are bounded uncompressed; text not in UTF-8 is said to be so.
"""

from __future__ import annotations

import gzip
import os
import shutil
import socket
import sqlite3
import zlib
from pathlib import Path

import pytest
from conftest import REPO, run_cli, write

from gpucompat import bundle
from gpucompat.sbatch_options import HOLDING_SBATCH
from gpucompat.errors import UserError

CURRENT = '[[stacks]]\nframework = "cuda-runtime"\nenv = "current"\n'
GPU = ("--cc", "8.0", "--driver", "535.104.05")


def refused(proc, expected: str) -> None:
    """Exit 2 and exactly `expected` as the one line on stderr, no traceback."""
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2, said
    assert "Traceback" not in said and "internal error" not in said, said
    assert proc.stderr.strip() == f"error: {expected}", said


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under folder with its content: what a refused command must leave as it was."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


# -- 1. every file a user names is a regular file, bounded while it is read -----------------------------------------

@pytest.fixture
def specials(tmp_path):
    """A named pipe and a socket (bound by this test), beside /dev/zero."""
    pipe, sock_path = tmp_path / "pipe", tmp_path / "sock"
    os.mkfifo(pipe)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    yield {"device": Path("/dev/zero"), "named pipe": pipe, "socket": sock_path}
    server.close()


KINDS = ["device", "named pipe", "socket"]


@pytest.mark.parametrize("kind", KINDS)
def test_explain_r_refuses_what_is_not_a_regular_file(isolated, specials, kind):
    before = tree(isolated)
    path = specials[kind]
    refused(run_cli("explain", "-r", str(path), *GPU, timeout=60),
            f"requirements or lock file {str(path)!r} is a {kind}, not a regular file.")
    assert tree(isolated) == before


@pytest.mark.parametrize("kind", KINDS)
def test_a_nested_r_line_refuses_what_is_not_a_regular_file(isolated, specials, kind):
    path = specials[kind]
    outer = write(isolated / "requirements.txt", f"torch==2.4.1\n-r {path}\n")
    refused(run_cli("explain", "-r", str(outer), *GPU, timeout=60),
            f"{outer}, line 2: -r {path}: requirements or lock file {str(path)!r} is a {kind}, not a regular file.")


@pytest.mark.parametrize("kind", KINDS)
def test_plans_bundles_and_stores_refuse_what_is_not_a_regular_file(isolated, specials, kind):
    path = specials[kind]
    refused(run_cli("sweep", str(path), "--dry-run", "--out", str(isolated / "out"), timeout=60),
            f"plan file {str(path)!r} is a {kind}, not a regular file.")
    refused(run_cli("import", str(path), timeout=60), f"the bundle {str(path)!r} is a {kind}, not a regular file.")
    refused(run_cli("results", "--db", f"sqlite:///{path}", timeout=60), f"the database {str(path)!r} is a {kind}, not a regular file.")
    assert not (isolated / "out").exists() and not (isolated / "gpucompat.db").exists()


def test_standard_input_is_bounded_while_it_is_read(isolated):
    with open("/dev/zero", "rb") as zero:
        proc = subprocess_with_stdin(["explain", "-r", "-", *GPU], zero)
    refused(proc, "standard input is larger than 4 MiB; pip freeze output is far smaller.")


def subprocess_with_stdin(args, stdin):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "gpucompat", *args], stdin=stdin, capture_output=True, text=True, timeout=60)


def test_a_file_past_the_bound_is_refused(isolated):
    big = isolated / "requirements.txt"
    big.write_bytes(b"# padding\n" * ((4 << 20) // 10 + 1))
    refused(run_cli("explain", "-r", str(big), *GPU),
            f"requirements or lock file {str(big)!r} is larger than 4 MiB; a requirements or lock file is far smaller.")


# -- 9. text that is not UTF-8 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("encoding, why", [("utf-16", "it is UTF-16"), ("utf-16-le", "it holds NUL bytes: UTF-16?")])
def test_a_utf16_plan_or_requirements_file_is_not_utf8(isolated, encoding, why):
    plan = isolated / "plan.toml"
    plan.write_bytes(CURRENT.encode(encoding))
    refused(run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out")),
            f"plan file {str(plan)!r} is not UTF-8 text ({why}); save it as UTF-8.")
    requirements = isolated / "requirements.txt"
    requirements.write_bytes("torch==2.4.1\n".encode(encoding))
    refused(run_cli("explain", "-r", str(requirements), *GPU),
            f"requirements or lock file {str(requirements)!r} is not UTF-8 text ({why}); save it as UTF-8.")
    assert not (isolated / "out").exists() and not (isolated / "gpucompat.db").exists()


def test_latin1_is_not_utf8_and_a_utf8_bom_is_read(isolated):
    plan = isolated / "plan.toml"
    plan.write_bytes(b'name = "caf\xe9"\n' + CURRENT.encode())
    refused(run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out")),
            f"plan file {str(plan)!r} is not UTF-8 text; save it as UTF-8.")
    requirements = isolated / "requirements.txt"
    requirements.write_bytes(b"\xef\xbb\xbftorch==2.4.1\n")
    assert run_cli("explain", "-r", str(requirements), *GPU, "--json").returncode in (0, 1)


# -- 2. bundles bounded uncompressed, in bytes and in records -------------------------------------------------------

def _gzip_stream(path: Path, *parts: tuple[bytes, int]) -> Path:
    """A gzip file of each (chunk, times) in turn, compressed as it is made: small on disk, however large inside."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        for chunk, times in parts:
            block = chunk * max(1, (1 << 20) // len(chunk))
            whole, rest = divmod(times * len(chunk), len(block))
            for _ in range(whole):
                out.write(packer.compress(block))
            out.write(packer.compress(block[:rest]))
        out.write(packer.flush())
    return path


HEADER = b'{"bundle":{"format":"gpucompat-bundle","schema":1,"site":"bomb","sweeps":1}}\n'


@pytest.fixture
def store_with_a_sweep(isolated):
    """The store (GPUCOMPAT_DB) holds a GPU's sweep: a bundle's refusal must leave it row for row."""
    db = isolated / "gpucompat.db"
    shutil.copyfile(REPO / "docs" / "evidence" / "gpu-state-h100" / "gpu-state.db", db)
    return db, _dump(db)


def _dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


def test_a_gzip_bomb_of_one_long_line_is_refused(isolated, store_with_a_sweep):
    db, before = store_with_a_sweep
    bomb = _gzip_stream(isolated / "long.gpucompat.gz", (b'{"bundle":"', 1), (b"A", (64 << 20) + 1))
    assert bomb.stat().st_size < 200_000
    refused(run_cli("import", str(bomb), timeout=120),
            f"{bomb} holds a line longer than 64 MiB uncompressed, more than any record gpucompat writes (a gzip bomb?); "
            "nothing was imported.")
    assert _dump(db) == before


def test_a_gzip_bomb_of_many_short_lines_is_refused(isolated, store_with_a_sweep):
    db, before = store_with_a_sweep
    bomb = _gzip_stream(isolated / "many.gpucompat.gz", (HEADER, 1), (b'{"target":{}}\n', bundle.MAX_RECORDS))
    assert bomb.stat().st_size < 200_000
    refused(run_cli("import", str(bomb), timeout=120),
            f"{bomb} holds more than 1,000,000 records, the most a bundle may hold; nothing was imported.")
    assert _dump(db) == before


def test_the_uncompressed_size_is_bounded_while_it_is_read(tmp_path, monkeypatch):
    """The byte bound (4 GiB) at a size a test can make: the same code with a smaller bound, in process."""
    monkeypatch.setattr(bundle, "MAX_BUNDLE_BYTES", 1 << 20)
    bomb = _gzip_stream(tmp_path / "wide.gpucompat.gz", (HEADER, 1), (b'{"target":{"ref":1}}\n', (1 << 20) // 21 + 1))
    with pytest.raises(UserError) as raised:
        bundle.verify(bomb)
    assert str(raised.value) == f"{bomb} is larger than 1 MiB uncompressed, the most a bundle may hold; nothing was imported."
    assert gzip.decompress(bomb.read_bytes()).count(b"\n") > 40_000  # what was not read to its end


# -- 4. numbers in versions ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("framework, versions, expected", [
    ("torch", "[2.10]", 'versions: 2.1 is a number, not a version string; quote it: versions = ["2.1"] (a TOML number loses its '
                        'trailing zeros: 2.10 is read as 2.1).'),
    ("cuda-runtime", "[12.4]", 'versions: 12.4 is a number, not a version string; quote it: versions = ["12.4"] (a TOML number loses '
                               'its trailing zeros: 2.10 is read as 2.1).'),
    ("torch", '["2.4.1", 2]', 'versions: 2 is a number, not a version string; quote it: versions = ["2"].'),
])
def test_a_number_in_versions_is_refused_with_quote_it(isolated, framework, versions, expected):
    plan = write(isolated / "plan.toml", f'[[stacks]]\nframework = "{framework}"\nversions = {versions}\n')
    refused(run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out")), f"{plan}: [[stacks]] #1 {expected}")
    assert not (isolated / "out").exists() and not (isolated / "gpucompat.db").exists()


# -- 7. extra_sbatch options that hold or block the submission ------------------------------------------------------

SLURM = 'executor = "slurm"\n[slurm]\nextra_sbatch = ["--exclusive", "{option}"]\n[[targets]]\nname = "A100"\ncc = "8.0"\n' + CURRENT


@pytest.mark.parametrize("option, why", [
    ("--wait", "would make sbatch return only when the array has ended, so gpucompat would hang on submit"),
    ("-W", "(sbatch reads it as --wait) would make sbatch return only when the array has ended, so gpucompat would hang on submit"),
    ("--depend=afterok:1", "(sbatch reads it as --dependency) would hold the array until other jobs end"),
    ("--begin=now+1hour", "would hold the array until the time it names"),
    ("--dependency=afterok:1", "would hold the array until other jobs end"),
    ("--hold", "would hold the array until someone releases it"),
])
def test_extra_sbatch_that_holds_or_blocks_the_submission_is_refused(isolated, option, why):
    plan = write(isolated / "plan.toml", SLURM.format(option=option))
    refused(run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out")),
            f"{plan}: [slurm] extra_sbatch {option!r} {why}; remove it: gpucompat submits the array and waits for it itself.")
    assert not (isolated / "out").exists()


def test_extra_sbatch_ntasks_names_what_it_overlaps_and_short_forms_are_read_as_sbatch_reads_them(isolated):
    plan = write(isolated / "plan.toml", SLURM.format(option="--ntasks=4"))
    refused(run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out")),
            f"{plan}: [slurm] extra_sbatch '--ntasks=4' would override --ntasks, which gpucompat sets as [bench] nodes x scale, one task "
            "per GPU (through --nodes and --ntasks-per-node); remove it.")
    for short, long in (("-b now", "--begin"), ("-d afterok:1", "--dependency"), ("-H", "--hold")):
        plan = write(isolated / "plan.toml", SLURM.format(option=short))
        refused(run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out")),
                f"{plan}: [slurm] extra_sbatch {short!r} (sbatch reads it as {long}) {HOLDING_SBATCH[long]}; remove it: gpucompat "
                "submits the array and waits for it itself.")
    # an option that only starts like one of them is the site's own, and written
    plan = write(isolated / "plan.toml", SLURM.format(option="--wait-all-nodes=1"))
    run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out"), check=0)
    assert "#SBATCH --wait-all-nodes=1\n" in (isolated / "out" / "array-0.sh").read_text()


# -- 8. a stack's container image, checked as [kubernetes] image is ---------------------------------------------------

@pytest.mark.parametrize("image", ["docker://nvcr.io/nvidia/$(id):1", "nvcr.io/nvidia/pytorch`id`", "o'brien/pt:1", 'a\\"b',
                                   "/images/pt$HOME.sif", "oras://ghcr.io/x;y:1"])
def test_a_container_image_with_shell_syntax_is_refused(isolated, image):
    plan = write(isolated / "plan.toml", f'[[stacks]]\nframework = "torch"\nenv = "container"\nimage = "{image}"\n')
    shown = repr(image.replace('\\"', '"'))
    refused(run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out")),
            f"{plan}: [[stacks]] #1: {shown} is not a container image like 'docker://nvcr.io/nvidia/pytorch:24.08-py3' or a .sif path "
            "(letters, digits and ./:@_+=,%~- only; no $, backticks or quotes).")
    assert not (isolated / "out").exists()


@pytest.mark.parametrize("image", ["docker://nvcr.io/nvidia/pytorch:25.01-py3", "/shared/images/pt-25.01.sif", "localhost:5000/pt:1",
                                   "oras://ghcr.io/org/pt:1", "ubuntu@sha256:" + "0" * 64])
def test_real_images_still_pass(isolated, image):
    plan = write(isolated / "plan.toml", f'[[stacks]]\nframework = "torch"\nenv = "container"\nimage = "{image}"\n')
    run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out"), check=0)


# -- 5. --dry-run --out DIR --force never writes through a link out of DIR -------------------------------------------

def test_force_never_follows_a_link_out_of_out(isolated):
    outside = isolated / "outside"
    outside.mkdir()
    victim, victim_dir, shared = outside / "precious.txt", outside / "folder", outside / "shared.bin"
    victim.write_text("keep me\n")
    victim_dir.mkdir()
    (victim_dir / "note").write_text("keep me too\n")
    shared.write_bytes(b"hard-linked\n")
    out = isolated / "out"
    out.mkdir()
    (out / "array-0.sh").symlink_to(victim)  # the file the Slurm dry run writes first
    (out / "cell-1").symlink_to(victim_dir, target_is_directory=True)  # a cell's folder
    os.link(shared, out / "probe.pyz")  # the same file under two names
    before = tree(outside)
    plan = write(isolated / "plan.toml", SLURM.format(option="--exclusive"))
    proc = run_cli("sweep", str(plan), "--dry-run", "--out", str(out), "--force", check=0)
    assert "Traceback" not in proc.stderr
    assert tree(outside) == before and sorted(p.name for p in victim_dir.iterdir()) == ["note"]
    assert not (out / "array-0.sh").is_symlink() and (out / "array-0.sh").read_text().startswith("#!/bin/bash\n#SBATCH")
    assert not (out / "cell-1").is_symlink() and (out / "cell-1" / "run.sh").is_file()
    assert os.stat(out / "probe.pyz").st_ino != os.stat(shared).st_ino


# -- 3. what a probe or a scheduler says is printed without escape sequences or bidirectional overrides ---------------

HOSTILE = "boom \\x1b]0;PWNED\\x07 \\x1b[2J cleared \\x1b[31mred\\x1b[0m \\u202eevil\\u202c end"


def _unprintable(text: str) -> list[str]:
    """The escape sequences' and bidirectional overrides' characters left in text that a terminal would act on."""
    return sorted({c for c in text if c in "\x1b\x07\x9b\x9d\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"})


def test_a_stacks_error_text_is_printed_clean_on_every_path(isolated):
    fakes = isolated / "fakes"
    (fakes / "torch").mkdir(parents=True)
    (fakes / "torch" / "__init__.py").write_text(f'raise ImportError("{HOSTILE}")\n')
    plan = write(isolated / "plan.toml", '[[stacks]]\nframework = "torch"\nenv = "current"\n')
    env = {"PYTHONPATH": str(fakes), "COLUMNS": "400"}  # wide: each reason on one line of its table
    swept = run_cli("sweep", str(plan), env=env, check=0, timeout=300)  # the live output: a line per cell, then the tables
    checked = run_cli("check", "torch", "--env", "current", env=env, timeout=300)  # the early probe's path
    shown = {"sweep": swept.stdout + swept.stderr, "check": checked.stdout + checked.stderr}
    for name, args in (("results", []), ("cells", ["--cells"]), ("json", ["--json"]), ("md", ["--format", "md"]),
                       ("csv", ["--format", "csv"]), ("junit", ["--format", "junit"])):
        shown[name] = run_cli("results", *args, env={"COLUMNS": "400"}, check=0).stdout
    run_cli("report", "-o", str(isolated / "report.html"), check=0)
    shown["report"] = (isolated / "report.html").read_text()
    run_cli("report", "--site", str(isolated / "site"), check=0)
    shown["site"] = "".join(p.read_text() for p in (isolated / "site").rglob("*.html"))
    for name, text in shown.items():
        assert "internal error" not in text, (name, text)  # the reports keep the probe's traceback as evidence, JSON-escaped
        assert _unprintable(text) == [], (name, text)
    # what the error said is still there, each escape sequence taken out whole (no "]0;PWNED", no "[2J")
    for name in ("sweep", "check", "cells", "csv"):
        said = " ".join(shown[name].split())
        assert "ImportError: boom cleared red evil end" in said, (name, said)
        assert "PWNED" not in said and "[2J" not in said, (name, said)


def test_printable_takes_each_escape_sequence_out_whole():
    from gpucompat.quoting import printable

    assert printable("a\x1b]0;title\x07b\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\c") == "ablinkc"  # OSC ended by BEL or ESC \
    assert printable("a\x1b[1;31mb\x1b[0m\x1b[2Jc\x9b2Kd") == "abcd"  # CSI, and its 8-bit form
    assert printable("x\u202ey\u2066z\rw\x00v") == "x y z w v"  # bidirectional overrides and other controls: a space
    assert printable("unended \x1b]0;title\nnext", lines=True) == "unended \nnext"  # an OSC never ended runs to the line's end
    assert printable("plain text, unchanged: 12.4 ≥ 12.0") == "plain text, unchanged: 12.4 ≥ 12.0"


# -- 6. the fat-binary reader survives a file truncated under it ----------------------------------------------------

TRUNCATE_ON_FIRST_READ = '''
import os
_pread, _target = os.pread, os.environ["GPUCOMPAT_TEST_TRUNCATE"]
def pread(fd, count, at):
    """The first read of the file: it is cut to half first, as `cp` over it in place would, after it was opened."""
    if os.path.exists(_target) and os.readlink("/proc/self/fd/%d" % fd) == _target and os.path.getsize(_target) > 1024:
        os.truncate(_target, os.path.getsize(_target) // 2)
    return _pread(fd, count, at)
os.pread = pread
'''


def _library(path: Path) -> Path:
    from test_inspect import SYNTHETIC  # an ELF with a .nv_fatbin section of SASS and PTX entries, as nvcc lays it out

    path.write_bytes(SYNTHETIC + b"\0" * 4096)  # the section table stays where the header says, inside the first half
    return path


def test_inspect_of_a_library_cut_short_under_it_is_one_sentence(isolated):
    """The real command, with the file truncated between its open and its first read (sitecustomize on PYTHONPATH):
    the mapped reader died of SIGBUS here with no message; the reader by offset says what happened."""
    hooks = isolated / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(TRUNCATE_ON_FIRST_READ)
    library = _library(isolated / "libcut.so")
    whole = library.stat().st_size
    proc = run_cli("inspect", str(library), env={"PYTHONPATH": str(hooks), "GPUCOMPAT_TEST_TRUNCATE": str(library)})
    assert library.stat().st_size == whole // 2, "the file was cut while inspect read it"
    refused(proc, f"{str(library)!r} became shorter while it was read (copied over or truncated meanwhile); inspect it again once it is whole.")


def test_the_probes_reader_reads_by_offset_and_names_a_file_that_shrank(tmp_path, monkeypatch):
    from gpucompat.probe import fatbin

    library = _library(tmp_path / "lib.so")
    assert fatbin.read_file(str(library)).sass == {"sm_80", "sm_90a"}  # whole: its kernels
    real = os.pread

    def cut_first(fd, count, at):
        if os.path.getsize(library) > 1024:
            os.truncate(library, 200)  # the ELF header survives, the section table it points to does not
        return real(fd, count, at)

    monkeypatch.setattr(os, "pread", cut_first)
    with pytest.raises(fatbin.Shrank):
        fatbin.read_file(str(library))
    monkeypatch.setattr(os, "pread", real)
    assert "mmap" not in Path(fatbin.__file__).read_text()  # nothing maps a file: a mapping dies of SIGBUS when it shrinks
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(ValueError, match="not a regular file"):  # opened without waiting for a writer
        fatbin.read_file(str(pipe))
