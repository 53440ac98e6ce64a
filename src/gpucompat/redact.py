"""What a bundle leaves out unless told to keep it (`gpucompat export --keep-hosts`): host names, user
names, paths and environment values, wherever the store keeps them.

The store holds them in the probe's raw JSON (system.hostname, the executable, cuda_env and env values,
the mapped libraries' paths, the log's host and pids, the GPU's other processes with their pids and
command names), in the evidence (the GPU's node, stderr tails, tracebacks), in targets (nodes) and in
plans and run options (wheelhouse, work directories). Two rules cover them:

- by key: a value under `hostname`, `host`, `node` or `nodes` becomes `<host>`, a `pid` is dropped, and
  the values of an environment (`cuda_env`, `env` when it is a mapping) become `<redacted>`, keys kept;
  the stable names a verdict is made of (code, stage, cause, framework...) are kept as they are;
- in every string: an absolute path keeps its last part only (`<path>/libcublas.so.12`: the library and
  its version still say what was loaded), `user:password@` in a URL becomes `<redacted>@`, and each host
  and user name learned from the data (and this machine's) becomes `<host>` or `<user>` as a whole word.

`Redactor.learn` must see every record before `Redactor.apply` redacts any, so that a host named in a
later record is also taken out of an earlier one's text.
"""

from __future__ import annotations

import getpass
import os
import re
import socket

HOST, USER, PATH_MARK, REDACTED = "<host>", "<user>", "<path>", "<redacted>"
HOST_KEYS = frozenset({"hostname", "host", "node", "nodes"})
DROPPED_KEYS = frozenset({"pid"})
ENV_KEYS = frozenset({"cuda_env", "env"})
# stable names a verdict is made of: never taken for a host's name (a node may be called "compute")
KEPT_KEYS = frozenset({"code", "stage", "cause", "verdict", "framework", "variant", "kind", "status", "current_stage", "resolve_cause",
                       "measurement", "dtype", "unit", "better", "cc", "driver", "cuda_runtime", "cudnn"})

# an absolute path's directories: after start, space, quote or bracket (not inside a URL or a word), or after file://
_PATH = re.compile(r"(?:(?<=file://)|(?<![\w.:/~$-]))/(?:[^\s/'\"`()\[\]{},;:=<>|]+/)+")
_CREDENTIALS = re.compile(r"(?<=://)[^/\s@'\"]+@")
_HOME = re.compile(r"/(?:home|Users|users|u)/([A-Za-z0-9._-]{2,64})/")
_WORD = r"(?<![\w.-])({})(?![\w-])"


class Redactor:
    """Learn the host and user names a set of records holds, then redact records with them."""

    def __init__(self) -> None:
        self.hosts: set[str] = set()
        self.users: set[str] = set()
        self._words: re.Pattern | None = None
        for learn, value in ((self._host, lambda: socket.gethostname()), (self.users.add, getpass.getuser),
                             (self.users.add, lambda: os.environ.get("USER") or ""), (self.users.add, lambda: os.environ.get("LOGNAME") or "")):
            try:
                name = value()
            except (OSError, KeyError, ImportError):  # getpass without a password entry or $USER
                continue
            if name:
                learn(name)

    def _host(self, name: str) -> None:
        name = name.strip()
        if len(name) >= 2:
            self.hosts.add(name)
            short = name.split(".")[0]
            if len(short) >= 2:
                self.hosts.add(short)

    def learn(self, value, key: str | None = None) -> None:
        """Remember the host names under host keys and the users of home directories, anywhere in value."""
        if key in HOST_KEYS:
            for name in value if isinstance(value, list) else [value]:
                if isinstance(name, str):
                    self._host(name)
        elif isinstance(value, dict):
            for k, v in value.items():
                self.learn(v, k)
        elif isinstance(value, list):
            for v in value:
                self.learn(v)
        elif isinstance(value, str) and "/" in value:
            self.users.update(m for m in _HOME.findall(value) if len(m) >= 2)
        self._words = None

    def _pattern(self) -> re.Pattern | None:
        if self._words is None:
            names = sorted((self.hosts | self.users) - {""}, key=len, reverse=True)
            self._words = re.compile(_WORD.format("|".join(map(re.escape, names)))) if names else re.compile(r"(?!)")
        return self._words

    def text(self, text: str) -> str:
        if "/" in text:
            text = _CREDENTIALS.sub(REDACTED + "@", _PATH.sub(PATH_MARK + "/", text))
        return self._pattern().sub(lambda m: HOST if m.group(1) in self.hosts else USER, text)

    def apply(self, value, key: str | None = None):
        """value with every host, user, path and environment value redacted (a new object; value is not changed)."""
        if key in HOST_KEYS and value is not None:
            return [HOST for _ in value] if isinstance(value, list) else HOST
        if key in DROPPED_KEYS:
            return None
        if key in ENV_KEYS and isinstance(value, dict):
            return {k: REDACTED for k in value}
        if key in KEPT_KEYS and isinstance(value, str):
            return value
        if isinstance(value, dict):
            return {k: self.apply(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.apply(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value
