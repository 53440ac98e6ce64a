"""A site's signing key and the keys it trusts: what lets an imported bundle say who sealed it (bundle.py signs and checks).

`gpucompat key` makes the site's Ed25519 key once, in the config directory (paths.config_dir(): $XDG_CONFIG_HOME/gpucompat,
else ~/.config/gpucompat; made 0700): `site-key.pem`, the private key (PKCS#8 PEM, mode 0600, written beside and linked in,
so never over another), and `site-key.pub`, the public key another site trusts: one line `gpucompat-ed25519 <base64 of its
32 bytes> <comment>`. Run again, it shows the key it has; `key --new` sets the old pair aside under its fingerprint
(`site-key.<fingerprint>.pem`) and makes another. A key is shown by its fingerprint: the first 16 hex digits of the sha256
of its 32 bytes, in groups of four; a key is compared whole, never by its fingerprint.

`trust add NAME KEYFILE` keeps a public key under a name (a site name's rules) in `trusted-keys.json` beside it (0600,
rewritten whole and swapped in), `trust remove NAME` takes it out, `trust list` lists them. Whoever can write that file
decides what import calls verified, so it is read as the private key is (_read_guarded: no link followed, owner and mode
read from the descriptor, its directory this user's and writable by no one else), and a name that reads as a trusted
one or a reserved word (site_skeleton: case, spacing, look-alike characters) is refused. The site's own key is trusted
as itself: a bundle it exported imports here as verified.

A bundle's signature is Ed25519 over SIGNED_PREFIX and the sha256 (hex) of every byte above its sha256 line: the digest
covers the content, the signature the digest.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import json
import os
import re
import shlex
import time
from pathlib import Path
from stat import S_ISREG

from .errors import UserError
from .paths import config_dir, read_user_file

PRIVATE = "site-key.pem"
PUBLIC = "site-key.pub"
TRUSTED = "trusted-keys.json"
KIND = "gpucompat-ed25519"  # the first word of a public key file
SIGNED_PREFIX = b"gpucompat-bundle-signature-1\n"  # what is signed: this, then the bundle's sha256 in hex
OWN = "this site"  # the site's own key among the trusted ones
SITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._@+-]{0,63}")
RESERVED_SITES = ("local", "imported")  # `--source` words, so no site (and no trusted key) may take them
MAX_KEY_FILE = 4 << 10
MAX_TRUSTED_FILE = 1 << 20


class BadSignature(Exception):
    """Why a bundle's signature does not verify (a few words)."""


# Characters a reader takes for one another in a site's name (Unicode's confusables for these ASCII ones: 0/o, 1/l/I,
# rn/m, vv/w), and the separators, which a glance does not tell apart. A name is ASCII (SITE_NAME), so a Cyrillic or
# Greek look-alike, a fullwidth letter or a zero-width space is refused before it is compared at all.
_LOOK_ALIKES = (("rn", "m"), ("vv", "w"), ("0", "o"), ("1", "l"), ("i", "l"), ("|", "l"), ("_", "-"), (".", "-"))


def site_skeleton(name) -> str:
    """The name as a reader sees it, for comparing names: NFKC, case folded, spaces collapsed and stripped, look-alike
    characters folded together. Two names of one skeleton are one name to a person."""
    import unicodedata

    text = " ".join(unicodedata.normalize("NFKC", str(name)).casefold().split())
    for seen, meant in _LOOK_ALIKES:
        text = text.replace(seen, meant)
    return text


_RESERVED_SKELETONS = {site_skeleton(word): word for word in (*RESERVED_SITES, OWN)}


def is_site_name(name) -> bool:
    """1 to 64 letters, digits, spaces or ._@+- starting with a letter or digit, one space between words, no space at
    its end, and not a --source word (nor one that reads as it: 'Local', 'l0cal', 'this  site')."""
    return (isinstance(name, str) and SITE_NAME.fullmatch(name) is not None and " ".join(name.split()) == name
            and site_skeleton(name) not in _RESERVED_SKELETONS)


def check_name(name, where: str) -> str:
    """A site's name (in a bundle, or a trusted key's): 1 to 64 letters, digits, spaces or ._@+-, not a --source word."""
    if not is_site_name(name):
        raise UserError(f"{where}: {str(name)[:70]!r} is not a site name: 1 to 64 ASCII letters, digits, single spaces or ._@+- starting "
                        f"with a letter or digit, and not {', '.join(RESERVED_SITES)} or {OWN!r} (nor a name that reads as one of them).")
    return name


def fingerprint(raw: bytes) -> str:
    """A public key as a person compares it: 'a1b2-c3d4-e5f6-0718'."""
    digest = hashlib.sha256(raw).hexdigest()[:16]
    return "-".join(digest[i:i + 4] for i in range(0, 16, 4))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _raw_public(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


# -- the site's own key ------------------------------------------------------------------------------------------------

def load_key():
    """The site's private key (Ed25519), or None where `gpucompat key` has made none; one sentence where it is damaged
    or others may read it."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = config_dir() / PRIVATE
    if not os.path.lexists(path):
        return None
    data = _read_guarded(path, "the site's private key", 16 << 10, 0o077, "may be read by others",
                         "move it away and run `gpucompat key` for a new one")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        key = None
    if not isinstance(key, Ed25519PrivateKey):
        raise UserError(f"the site's private key {path} is damaged or not one gpucompat wrote; move it away and run `gpucompat key` for a "
                        "new one (other sites must then trust its new public key).")
    return key


def _read_guarded(path: Path, what: str, limit: int, forbidden: int, forbidden_words: str, renew: str) -> bytes:
    """The bytes of a file only its owner may change, checked on what is read: its directory (as opened: owned by this
    user, writable by no one else), then the file, opened in that directory without following a link, its owner and
    mode read from the descriptor (no other file checked, none swapped in between). Past `limit` bytes: b"". One
    sentence, naming the file and the fix, for each check that fails. forbidden: the mode bits it may not have."""
    shown = shlex.quote(str(path))
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UserError(f"cannot open the config directory {path.parent} that holds {what}: {exc.strerror or exc}.") from None
    try:
        held = os.fstat(folder)
        if held.st_uid != os.getuid():
            raise UserError(f"{what} {path} is in a directory that belongs to another user (uid {held.st_uid}), who could replace it; "
                            f"`chown {os.getuid()} {shlex.quote(str(path.parent))}` or move the config elsewhere (XDG_CONFIG_HOME), then run again.")
        if held.st_mode & 0o022:
            raise UserError(f"{what} {path} is in a directory others may write (mode {held.st_mode & 0o777:04o}), so they could replace it; "
                            f"`chmod 700 {shlex.quote(str(path.parent))}`, then run again.")
        try:
            fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        except OSError as exc:
            link = " (it is a symbolic link, which gpucompat does not follow there: put the file itself in its place, not a link)" \
                if os.path.islink(path) else ""
            raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}{link}; {renew}.") from None
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as handle:
        stat = os.fstat(fd)
        if not S_ISREG(stat.st_mode):
            raise UserError(f"{what} {path} is not a regular file; {renew}.")
        if stat.st_uid != os.getuid():
            raise UserError(f"{what} {path} belongs to another user (uid {stat.st_uid}), who decides what it says; "
                            f"`chown {os.getuid()} {shown}` if it is yours, else {renew}.")
        mode = stat.st_mode & 0o777
        if mode & forbidden:
            raise UserError(f"{what} {path} {forbidden_words} (mode {mode:04o}); `chmod 600 {shown}`, then run again.")
        return handle.read(limit + 1) if stat.st_size <= limit else b""


def _partial(path: Path, data: bytes, mode: int) -> Path:
    """data in a new file beside path, with mode whatever the umask, flushed to disk: what is then linked or renamed in."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.part")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as out:
        os.fchmod(fd, mode)
        out.write(data)
        out.flush()
        os.fsync(fd)
    return partial


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """data into a new file at path, never over one that is there (linked in: FileExistsError where one is)."""
    partial = _partial(path, data, mode)
    try:
        os.link(partial, path)
    finally:
        partial.unlink()


def _replace(path: Path, data: bytes, mode: int) -> None:
    """data swapped in at path whole (renamed over it)."""
    os.replace(_partial(path, data, mode), path)


def _directory() -> Path:
    """The config directory, made (or set) 0700: it holds the private key."""
    directory = config_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(directory, 0o700)
    except OSError as exc:
        raise UserError(f"cannot make the config directory {directory} private (0700) for the site's key: {exc.strerror or exc}.") from None
    return directory


def _public_text(raw: bytes) -> bytes:
    return f"{KIND} {_b64(raw)} gpucompat-site-key-{datetime.date.today().isoformat()}\n".encode()


def site_key(new: bool = False) -> dict:
    """`gpucompat key`: the site's key, made where there is none (or, with new, after setting the old pair aside), else shown."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    directory = _directory()
    private, public = directory / PRIVATE, directory / PUBLIC
    key, retired = load_key(), None
    try:
        if key is not None and new:
            old = fingerprint(_raw_public(key))
            retired = directory / f"site-key.{old}.pem"
            os.link(private, retired)  # never over an earlier one
            private.unlink()
            if public.exists():
                os.replace(public, directory / f"site-key.{old}.pub")
            key = None
        created = key is None
        if created:
            key = Ed25519PrivateKey.generate()
            _write_new(private, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()), 0o600)
        raw = _raw_public(key)
        if created or _read_public(public) != raw:  # the public file follows the private key (written anew if gone or changed)
            _replace(public, _public_text(raw), 0o644)
    except FileExistsError as exc:
        raise UserError(f"{exc.filename} is there already (another `gpucompat key` at the same time?); run `gpucompat key` again to see the key.") from None
    except OSError as exc:
        raise UserError(f"cannot write the site's key into {directory}: {exc.strerror or exc}.") from None
    return {"private": str(private), "public": str(public), "fingerprint": fingerprint(raw), "created": created,
            "retired": str(retired) if retired else None}


def _read_public(path: Path) -> bytes | None:
    try:
        return public_key_of(path)
    except UserError:
        return None


# -- public key files ----------------------------------------------------------------------------------------------------

def public_key_of(path) -> bytes:
    """The 32 bytes of a public key file `gpucompat key` wrote (site-key.pub); one sentence for any other file."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data = read_user_file(path, "the key file", MAX_KEY_FILE, "a public key file `gpucompat key` writes is one short line.")
    shown = repr(str(path)[:200])
    if b"PRIVATE KEY" in data:
        raise UserError(f"the key file {shown} holds a private key: give the other site's public key file (the site-key.pub that "
                        "`gpucompat key` names there), and keep private keys where they are.")
    raw = None
    try:
        words = data.decode("ascii").split()
        if len(words) >= 2 and words[0] == KIND:
            raw = base64.b64decode(words[1], validate=True)
            Ed25519PublicKey.from_public_bytes(raw)
    except (UnicodeDecodeError, ValueError, binascii.Error):
        raw = None
    if raw is None or len(raw) != 32:
        raise UserError(f"the key file {shown} is not a gpucompat public key (one line `{KIND} KEY ...`, as `gpucompat key` writes "
                        "site-key.pub).")
    return raw


# -- the keys this site trusts -----------------------------------------------------------------------------------------

def _trusted_entries() -> list[dict]:
    path = config_dir() / TRUSTED
    if not os.path.lexists(path):
        return []
    # whoever can write this file decides what import calls verified: guarded as the private key is (others may read it)
    data = _read_guarded(path, "the trusted keys file", MAX_TRUSTED_FILE, 0o022, "may be written by others, who would decide what is verified",
                         "remove it and `gpucompat trust add` each site's key again")
    if len(data) > MAX_TRUSTED_FILE or not data:
        raise UserError(f"the trusted keys file {path} is empty or larger than {MAX_TRUSTED_FILE >> 20} MiB; remove it and `gpucompat trust add` "
                        "each site's key again.")
    try:
        entries = json.loads(data)["keys"]
        for entry in entries:
            raw = base64.b64decode(entry["key"], validate=True)
            if not (isinstance(entry["name"], str) and SITE_NAME.fullmatch(entry["name"]) and len(raw) == 32):
                raise ValueError(entry)
            entry["fingerprint"] = fingerprint(raw)
    except (ValueError, KeyError, TypeError, RecursionError, binascii.Error):
        raise UserError(f"the trusted keys file {path} is damaged; remove it and `gpucompat trust add` each site's key again.") from None
    return entries


def trusted() -> list[dict]:
    """The keys this site trusts, each {name, key (base64), fingerprint, added_at}: its own key first (named OWN) where it has one."""
    own = load_key()
    first = [{"name": OWN, "key": _b64(_raw_public(own)), "fingerprint": fingerprint(_raw_public(own)), "added_at": None}] if own else []
    return first + _trusted_entries()


def trust_add(name: str, keyfile) -> dict:
    """`trust add NAME KEYFILE`: trust another site's public key under a name (each name and each key once)."""
    check_name(name, "trust add NAME")
    raw = public_key_of(keyfile)
    key, shown = _b64(raw), fingerprint(raw)
    entries = _trusted_entries()
    own = load_key()
    if own is not None and _raw_public(own) == raw:
        raise UserError(f"{keyfile} is this site's own public key ({shown}), which is trusted already.")
    for entry in entries:
        if entry["name"].lower() == name.lower():
            raise UserError(f"a key named {entry['name']!r} is trusted already ({entry['fingerprint']}); "
                            f"`gpucompat trust remove {shlex.quote(entry['name'])}` first to replace it.")
        if site_skeleton(entry["name"]) == site_skeleton(name):
            raise UserError(f"{name!r} reads as {entry['name']!r}, which is trusted already ({entry['fingerprint']}): a person could not tell "
                            "their sweeps apart; choose a name that differs in more than case, spacing or look-alike characters.")
        if entry["key"] == key:
            raise UserError(f"that key ({shown}) is trusted already, as {entry['name']!r}.")
    entries.append({"name": name, "key": key, "fingerprint": shown, "added_at": time.time()})
    _save(entries)
    return {"name": name, "fingerprint": shown, "file": str(config_dir() / TRUSTED)}


def looks_like_trusted(name) -> str | None:
    """The trusted site's name that `name` reads as without being it (another case is the same name), or None."""
    if not isinstance(name, str):
        return None
    return next((e["name"] for e in trusted() if e["name"] != OWN and e["name"].casefold() != name.casefold()
                 and site_skeleton(e["name"]) == site_skeleton(name)), None)


def trust_remove(name: str) -> dict:
    """`trust remove NAME`: trust that site's key no longer (sweeps imported under it keep their mark)."""
    entries = _trusted_entries()
    gone = [e for e in entries if e["name"].lower() == str(name).lower()]
    if not gone:
        raise UserError(f"no key named {str(name)[:70]!r} is trusted; `gpucompat trust list` shows the trusted keys.")
    _save([e for e in entries if e not in gone])
    return {"name": gone[0]["name"], "fingerprint": gone[0]["fingerprint"], "file": str(config_dir() / TRUSTED)}


def _save(entries: list[dict]) -> None:
    directory = _directory()
    text = json.dumps({"keys": [{k: e[k] for k in ("name", "key", "fingerprint", "added_at")} for e in entries]}, indent=1)
    try:
        _replace(directory / TRUSTED, text.encode() + b"\n", 0o600)
    except OSError as exc:
        raise UserError(f"cannot write the trusted keys file {directory / TRUSTED}: {exc.strerror or exc}.") from None


# -- signatures ----------------------------------------------------------------------------------------------------------

def sign(key, digest: str) -> dict:
    """A bundle's signature record over its sha256 (hex): the key's fingerprint, the public key itself, the signature."""
    raw = _raw_public(key)
    return {"algorithm": "ed25519", "fingerprint": fingerprint(raw), "public_key": _b64(raw),
            "value": _b64(key.sign(SIGNED_PREFIX + digest.encode("ascii")))}


def check(record, digest: str) -> dict:
    """The signer of a bundle whose content has this sha256: {fingerprint, public_key (base64)}; BadSignature where the
    record is not a signature or does not verify."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if not isinstance(record, dict) or record.get("algorithm") != "ed25519":
        raise BadSignature("it is not an Ed25519 signature as gpucompat writes one")
    try:
        raw = base64.b64decode(record.get("public_key"), validate=True)
        value = base64.b64decode(record.get("value"), validate=True)
    except (TypeError, ValueError, binascii.Error):
        raise BadSignature("its key or its value is not base64") from None
    if len(raw) != 32 or len(value) != 64:
        raise BadSignature("its key or its value has the wrong length")
    if record.get("fingerprint") != fingerprint(raw):
        raise BadSignature("the fingerprint it names is not its key's")
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(value, SIGNED_PREFIX + digest.encode("ascii"))
    except (InvalidSignature, ValueError):
        raise BadSignature("the signature does not match the content") from None
    return {"fingerprint": fingerprint(raw), "public_key": _b64(raw)}
