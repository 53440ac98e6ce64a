"""GPU name -> compute capability, for any name an NVIDIA driver reports.

Two tables, in this order:

1. data/gpus.csv: curated rows, each sourced to NVIDIA's compute-capability pages (or a
   copy). A reported name matches the longest row whose words begin it, ignoring
   NVIDIA/Tesla/GeForce ('NVIDIA A100-SXM4-40GB' -> 'NVIDIA A100').
2. data/pci_gpus.csv: every NVIDIA display device named in the PCI ID database, resolved
   to a CC through its chip (tools/build_gpu_names.py, tools/facts/gpu_chips.csv). Loaded
   only when the curated table misses, and indexed once by a normalised key, so a lookup
   is a few dict probes.

The curated table wins whenever it matches (it is the one whose rows cite a CC directly).
A name that matches neither returns None; the caller turns that into 'uncertain'.
"""

from __future__ import annotations

import csv
import re
from functools import cache, lru_cache
from pathlib import Path

DATA = Path(__file__).with_name("data")

# -- curated table (the matching tables.gpu always did) ----------------------------------------

_VENDOR_WORDS = {"nvidia", "tesla", "geforce"}
_SPLIT = re.compile(r"[\s\-_]+")


def _tokens(name: str) -> list[str]:
    words = _SPLIT.split(name.lower().strip())
    return [w for w in words if w and w not in _VENDOR_WORDS]


def _same_word(reported: str, known: str) -> bool:
    # Kepler Tesla boards report a cooling suffix: 'Tesla K40m', 'Tesla K20c'. Only for K-series
    # model words: 'GeForce GTX 960M' is a laptop GM107 (5.0), not a GTX 960 (GM206, 5.2).
    return reported == known or (reported[:-1] == known and reported[-1] in "mc" and known[:1] == "k"
                                 and known[-1].isdigit())


_QUALIFIER = re.compile(r"\s*\([^)]*\)")


@cache
def _curated() -> tuple[tuple[dict, tuple[str, ...]], ...]:
    # A row name's parenthesised qualifier is not part of what drivers report: 'GeForce GTX TITAN X
    # (Maxwell)' must match 'GeForce GTX TITAN X' (else 'GeForce GTX TITAN', Kepler, would).
    with (DATA / "gpus.csv").open(newline="", encoding="utf-8") as handle:
        return tuple((row, tuple(_tokens(_QUALIFIER.sub("", row["name"])))) for row in csv.DictReader(handle))


def curated(name: str) -> dict | None:
    """The gpus.csv row for a reported name: the longest row name whose words begin it."""
    reported = _tokens(name)
    best, best_len = None, 0
    for row, words in _curated():
        if words and best_len < len(words) <= len(reported) and all(_same_word(r, w) for r, w in zip(reported, words)):
            best, best_len = row, len(words)
    return best


def words_begin(reported: str, known: str) -> int:
    """How many words `known` has where they begin `reported` (as `curated` matches a row: NVIDIA, Tesla
    and GeForce ignored, a parenthesised qualifier left out); 0 where they do not begin it."""
    have, want = _tokens(reported), _tokens(_QUALIFIER.sub("", known))
    return len(want) if want and len(want) <= len(have) and all(_same_word(r, w) for r, w in zip(have, want)) else 0


# -- PCI ID database names ---------------------------------------------------------------------

_NOISE = re.compile(r"\(r\)|\(tm\)|®|™")
_SEPARATORS = re.compile(r"[\s\-_/,]+")
_DROP = {"nvidia", "tesla", "corporation"}
# Phrases drivers and pci.ids spell differently, on the already split and lowered words.
_PHRASES = ((("with", "max", "q", "design"), ("max", "q")), (("max", "q", "design"), ("max", "q")),
            (("laptop", "gpu"), ("mobile",)), (("laptop",), ("mobile",)))
# Words that describe a board rather than the chip: a name ending in them still names the
# same GPU without them ('A800 SXM4 80GB' -> 'a800', 'H100 PCIe' -> 'h100').
_BOARD_WORD = re.compile(r"[0-9]+gb?|[0-9]+g|pcie|sxm[0-9]*|nvl[0-9]*|hbm[0-9]*e?|dgxs|fhhl|oem|mobile|max|q|lhr|active|passive", re.ASCII)


def key(name: str) -> str:
    """A reported or pci.ids name as lowercase words: no NVIDIA/Tesla, '-' '_' '/' as spaces,
    'Laptop GPU' as 'mobile', 'with Max-Q Design' as 'max q'."""
    words = [w for w in _SEPARATORS.split(_NOISE.sub(" ", name.lower())) if w and w not in _DROP]
    for old, new in _PHRASES:
        if old[0] not in words:  # most names hold none of the phrases: every name of both tables is keyed at load
            continue
        n, i = len(old), 0
        while i + n <= len(words):
            if tuple(words[i:i + n]) == old:
                words[i:i + n] = new
            i += 1
    return " ".join(words)


def core(k: str) -> str:
    """A key without its trailing board words ('a800 sxm4 80gb' -> 'a800'); never empty."""
    words = k.split()
    while len(words) > 1 and _BOARD_WORD.fullmatch(words[-1]):
        words.pop()
    return " ".join(words)


@cache
def _pci_rows() -> tuple[dict, ...]:
    """pci_gpus.csv, read once for the name index and the device IDs its sources name."""
    path = DATA / "pci_gpus.csv"
    if not path.exists():
        return ()
    with path.open(newline="", encoding="utf-8") as handle:
        return tuple(csv.DictReader(handle))


@cache
def _pci_index() -> tuple[dict[str, dict], dict[str, dict]]:
    """(full key -> row, core key -> row); a core key shared by rows of different CC is left out."""
    full: dict[str, dict] = {}
    cores: dict[str, dict | None] = {}
    for row in _pci_rows():
        k = key(row["name"])
        full.setdefault(k, row)
        c = core(k)
        if c in cores and (cores[c] is None or cores[c]["cc"] != row["cc"]):
            cores[c] = None
        else:
            cores.setdefault(c, row)
    return full, {c: r for c, r in cores.items() if r is not None}


def _kepler_variants(k: str) -> list[str]:
    # 'tesla k40m' is in pci.ids, but 'k20xm'-style names may arrive as 'k20x' or the reverse.
    words = k.split()
    out = []
    for i, w in enumerate(words):
        if re.fullmatch(r"k[0-9]+x?[mcs]", w, re.ASCII):
            out.append(" ".join(words[:i] + [w[:-1]] + words[i + 1:]))
    return out


def pci(name: str) -> dict | None:
    """The pci_gpus.csv row for a reported name, or None."""
    full, cores = _pci_index()
    k = key(name)
    if not k:
        return None
    for candidate in (k, *_kepler_variants(k)):
        if candidate in full:
            return full[candidate]
        c = core(candidate)
        if c in full:
            return full[c]
        if c in cores:
            return cores[c]
    return None


# -- the lookup ------------------------------------------------------------------------------

def lookup(name: str) -> dict | None:
    """{name, cc, architecture, source, confidence, matched[, chip]} for a GPU name as a driver
    (nvidia-smi, torch, NVML, Kubernetes GPU feature discovery) reports it, or None.

    `name` is the table's name for the GPU; `matched` says which table: 'gpus.csv' (curated)
    or 'pci_gpus.csv' (pci.ids device name, CC through its chip)."""
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        return None
    found = _lookup(name)
    return dict(found) if found is not None else None


@lru_cache(maxsize=4096)  # the tables do not change while a process runs; a pool asks for the same few names many times
def _lookup(name: str) -> dict | None:
    if (device := pci_id(name)) is not None:  # a PCI ID ('10de:2783'): the name the drivers or pci.ids give it
        spelled = device_names(device) or [n for n, ids in _pci_ids_by_name().items() if device in ids]
        return _lookup(spelled[0]) if spelled else None
    row = curated(name)
    if row is not None:
        return {**row, "name": _precise(name, row["name"]), "matched": "gpus.csv"}
    row = pci(name)
    if row is not None:
        return {"name": _precise(name, row["name"]), "cc": row["cc"], "architecture": row["architecture"], "chip": row["chip"],
                "source": row["source"], "confidence": "medium", "matched": "pci_gpus.csv"}
    return None


def _precise(name: str, row_name: str) -> str:
    """The row's name, or where the reported name is a narrower product whose PCI device IDs the row's name does not
    say ('RTX 4070 SUPER' matched the row 'GeForce RTX 4070'; 'NVIDIA H100 80GB HBM3' the row 'NVIDIA H100'), the
    reported name (as the drivers' README spells it, where it does): the name the driver lists are read by."""
    ids = device_ids(name)
    if not ids or set(ids) == set(device_ids(row_name)):
        return row_name
    spelled = {n for i in ids for n in device_names(i) if _plain(n) == _plain(name)}
    return spelled.pop() if len(spelled) == 1 else name.strip()


# -- names people type: spacing, typos, other vendors' GPUs -------------------------------------

# 'RTX4090' -> 'RTX 4090', '4090Ti' -> '4090 Ti': a word of two or more letters run into digits, or digits into
# two or more letters. One letter stays joined ('A100', 'H100', 'L40S', 'RTX 6000D' are names as they are).
_LETTERS_THEN_DIGITS = re.compile(r"(?<=[A-Za-z]{2})(?=[0-9])", re.ASCII)
_DIGITS_THEN_LETTERS = re.compile(r"(?<=[0-9])(?=[A-Za-z]{2})", re.ASCII)


def respelled(name: str) -> tuple[str, dict] | None:
    """(the name as read, its row) for a name that matches only once its words are spaced ('RTX4090' ->
    'RTX 4090'); None where no spacing matches, or where two spacings match GPUs of different compute capability."""
    spaced = {_LETTERS_THEN_DIGITS.sub(" ", name), _DIGITS_THEN_LETTERS.sub(" ", name),
              _DIGITS_THEN_LETTERS.sub(" ", _LETTERS_THEN_DIGITS.sub(" ", name))} - {name}
    found = [(text, row) for text in sorted(spaced, key=len) if (row := lookup(text)) is not None]
    if not found or len({row["cc"] for _, row in found}) > 1:
        return None
    return found[0]


def _plain(name: str) -> str:
    """A name compared for closeness: its key without vendor words ('NVIDIA GeForce RTX 4090' -> 'rtx 4090')."""
    return " ".join(w for w in key(_QUALIFIER.sub("", name)).split() if w not in _VENDOR_WORDS)


@cache
def _known_names() -> dict[str, str]:
    """Every name the tables hold, as compared (_plain) -> as shown; the curated table's spelling first."""
    names: dict[str, str] = {}
    for row, _words in _curated():
        names.setdefault(_plain(row["name"]), _QUALIFIER.sub("", row["name"]).strip())
    for row in _pci_index()[0].values():  # pci_gpus.csv as lookup() read it, one row per spelling
        names.setdefault(_plain(row["name"]), row["name"])
    names.pop("", None)
    return names


def suggestions(name: str, n: int = 3) -> list[str]:
    """The GPU names the tables hold that are closest to a name they do not, best first: those that hold its words
    as they are ('RTX 6000' -> 'Quadro RTX 6000', 'RTX 6000 Ada Generation'), then those within a small edit
    distance (difflib's ratio >= 0.8: 'RTX 4909' -> 'GeForce RTX 4090')."""
    import difflib

    misread = _digits_misread(name)
    if misread != name and (row := lookup(misread)) is not None:  # 'A1OO' -> A100: letters typed for digits
        return [row["name"]]
    known = _known_names()
    typed = _plain(_DIGITS_THEN_LETTERS.sub(" ", _LETTERS_THEN_DIGITS.sub(" ", name)))
    if not typed or typed in known:  # a name the tables hold that names chips of different CC: no typo to correct
        return []
    holding = sorted((k for k in known if f" {typed} " in f" {k} "), key=len)
    close = difflib.get_close_matches(typed, list(known), n=n, cutoff=0.8)
    return [known[k] for k in dict.fromkeys(holding + close)][:n]


_MISREAD = str.maketrans({"O": "0", "o": "0", "I": "1", "l": "1"})


def _digits_misread(name: str) -> str:
    """A name with the letters people type for digits read as digits, in the words that hold a digit: 'A1OO' -> 'A100',
    'RTX 4O9O' -> 'RTX 4090', 'H1OO' -> 'H100' (a word with no digit, 'TITAN' or 'Tesla', is left as it is)."""
    return re.sub(r"[A-Za-z0-9]+", lambda m: m.group(0).translate(_MISREAD) if any(c.isdigit() for c in m.group(0))
                  else m.group(0), name)


# Names of GPUs that are not NVIDIA's, as their vendors and drivers (rocm-smi, xpu-smi, hl-smi) write them.
# None of these words is in an NVIDIA product name (tests/test_gpu_names.py checks every name the tables hold).
_OTHER_VENDORS = (
    ("AMD", re.compile(r"\b(amd|ati|radeon|instinct|firepro|mi[0-9]{2,3}[a-z]?|rx ?[0-9]{3,4}[a-z]*|vega|navi)\b", re.ASCII)),
    ("Intel", re.compile(r"\b(intel|arc|gaudi[0-9]*|ponte vecchio|iris|(data center gpu )?(max|flex) [0-9]{3,4}[a-z]*|xe|uhd graphics)\b",
                         re.ASCII)),
    ("Apple", re.compile(r"\bapple\b", re.ASCII)),
)


def other_vendor(name: str) -> str | None:
    """'AMD', 'Intel' or 'Apple' for a name of another vendor's GPU ('MI250X', 'Instinct MI300X', 'Max 1550',
    'Arc A770', 'Gaudi 2'); None for any other name."""
    text = " ".join(_SEPARATORS.split(_NOISE.sub(" ", name.lower()))).strip()
    return next((vendor for vendor, words in _OTHER_VENDORS if words.search(text)), None)


# -- which driver releases list a PCI device ID ------------------------------------------------
# data/driver_devices.csv (tools/build_driver_devices.py): per PCI device ID, the runs of read driver releases
# (NVIDIA/open-gpu-kernel-modules README.md, Compatible GPUs, R515 onward) that list it; data/driver_readmes.csv:
# the releases read. A driver binds only the device IDs its release knows.

_PCI_ID = re.compile(r"(?:pci\s*)?(?:10de\s*[:_ -]\s*|0x)([0-9a-f]{4})", re.ASCII | re.IGNORECASE)
_ID_IN_SOURCE = re.compile(r"10de:([0-9a-f]{4})", re.ASCII)


@lru_cache(maxsize=4096)  # the driver lists name a few hundred releases, each in many rows
def _release(text: str) -> tuple[int, ...] | None:
    parts = (text or "").strip().split(".")
    return tuple(int(p) for p in parts) if len(parts) >= 2 and all(p.isdigit() and len(p) < 6 for p in parts) else None


@cache
def _driver_devices() -> tuple[dict, tuple, dict]:
    """(device ID -> [(first, last or None, row)], the read releases [(version, release, commit)] oldest first,
    plain README name -> device IDs)."""
    runs: dict[str, list] = {}
    names: dict[str, list[str]] = {}
    read: list = []
    if not (DATA / "driver_devices.csv").exists():
        return {}, (), {}
    with (DATA / "driver_devices.csv").open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            runs.setdefault(row["device"], []).append((_release(row["first"]), _release(row["last"]), row))
            for name in row["names"].split("; "):
                ids = names.setdefault(_plain(name), [])
                if row["device"] not in ids:
                    ids.append(row["device"])
    with (DATA / "driver_readmes.csv").open(newline="", encoding="utf-8") as handle:
        read = sorted((_release(r["release"]), r["release"], r["commit"]) for r in csv.DictReader(handle))
    return runs, tuple(read), names


@cache
def _pci_ids_by_name() -> dict[str, list[str]]:
    """plain pci.ids name -> device IDs (from pci_gpus.csv's sources: 'pci.ids ... 10de:2783 ...')."""
    found: dict[str, list[str]] = {}
    for row in _pci_rows():
        ids = found.setdefault(_plain(row["name"]), [])
        ids += [i.upper() for i in _ID_IN_SOURCE.findall(row["source"]) if i.upper() not in ids]
    return found


_OTHER_PART = {"mobile", "max", "q", "embedded"}


def pci_id(name: str) -> str | None:
    """'2783' for a GPU named by its PCI ID ('10de:2783', '10DE 2783', '0x2783'), else None."""
    match = _PCI_ID.fullmatch((name or "").strip())
    return match.group(1).upper() if match else None


def device_ids(name: str | None) -> list[str]:
    """The PCI device IDs a GPU name may be, for the driver lists: a PCI ID as it is; else the names the drivers'
    README spells (nvidia-smi's names) and pci.ids names, matched whole ('RTX 4070 SUPER' -> 2783), else those
    the name begins ('H100 SXM5' -> the four H100 SXM5 boards). [] where nothing matches."""
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        return []
    return list(_device_ids(name))


@lru_cache(maxsize=4096)  # a pool's nearest yes asks whether a driver drives its GPU thousands of times for a few names
def _device_ids(name: str) -> tuple[str, ...]:
    return tuple(_find_device_ids(name))


def _find_device_ids(name: str) -> list[str]:
    if (device := pci_id(name)) is not None:
        return [device]
    readme, pci_names = _driver_devices()[2], _pci_ids_by_name()
    plain = _plain(name)
    if not plain:
        return []
    for table in (readme, pci_names):
        if plain in table:
            if plain != core(plain):  # a board's own name ('H100 80GB HBM3'): that board
                return list(table[plain])
            # a family's name ('H100', 'RTX 4070'): every board of it, not other products ('RTX 4070 SUPER')
            # (a laptop or embedded part is another product: 'RTX 5050 Laptop GPU' came before the desktop 'RTX 5050')
            asked = set(plain.split())
            return list(dict.fromkeys(i for t in (readme, pci_names) for known, ids in t.items()
                                      if core(known) == plain and not (set(known.split()) - asked) & _OTHER_PART for i in ids))
    found: list[str] = []
    for table in (readme, pci_names):
        for known, ids in table.items():
            if f"{known} ".startswith(f"{plain} "):
                found += [i for i in ids if i not in found]
    return found


def device_names(device: str) -> list[str]:
    """The names the drivers' README gives a device ID ('2783' -> ['NVIDIA GeForce RTX 4070 SUPER'])."""
    runs = _driver_devices()[0].get(device) or []
    return runs[0][2]["names"].split("; ") if runs else []


def lists(device: str, release: tuple[int, ...]) -> dict | None:
    """The driver_devices.csv row whose run holds a read release, or None where that release does not list the device."""
    for first, last, row in _driver_devices()[0].get(device, ()):
        if first <= release and (last is None or release <= last):
            return row
    return None


def driver_lists(device: str, driver: str) -> tuple[str, str, str]:
    """Whether a driver release lists a PCI device ID: ('yes' | 'no' | 'unknown', confidence, what was read).
    A driver's device table only grows: a device that a read release up to this one (in version order) lists is
    driven ('yes'; a later README that leaves it out, as 550.54.14's leaves out the H200 550.40.65 named, left it out
    of its README, not of the driver). A release older than every release that lists the device does not drive it
    ('no': high where its own list was read, medium where a read release after it still does not list it); else
    'unknown': the caller then keeps the architecture's branches, never a FAIL from a list not read."""
    _runs, read, _names = _driver_devices()
    asked = _release(driver)
    if asked is None or not read or device not in _runs:
        return "unknown", "low", "no driver list read names it"
    exact = next((r for r in read if r[0] == asked), None)
    listing = [r for r in read if lists(device, r[0])]
    earlier = [r for r in listing if r[0] <= asked]
    if exact is not None and lists(device, asked):
        return "yes", "high", f"{exact[1]}'s list of compatible GPUs (commit {exact[2][:12]})"
    if earlier:
        first = earlier[0]
        return "yes", "high", (f"{first[1]}'s list of compatible GPUs (commit {first[2][:12]}), a release before {driver}: a driver's "
                               f"device table only grows" + (f" ({exact[1]}'s README leaves it out)" if exact else ""))
    if exact is not None:
        return "no", "high", f"{exact[1]}'s list of compatible GPUs (commit {exact[2][:12]})"
    # a later release of the same branch that still does not list it (another branch may have added it by then: not asked)
    after = [r for r in read if r[0][0] == asked[0] and asked < r[0]]
    if after and not any(lists(device, r[0]) for r in after):  # where a later one lists it, this one may have already
        return "no", "medium", f"{after[-1][1]}'s list of compatible GPUs (commit {after[-1][2][:12]}), a later R{asked[0]} release that still does not list it ({driver}'s own was not read)"
    return "unknown", "low", f"{driver}'s own list of compatible GPUs was not read"


def nearest_listing(devices: list[str], driver: str) -> str | None:
    """The read release nearest after a driver (else before it) that lists one of these device IDs: the one to name."""
    _runs, read, _names = _driver_devices()
    asked = _release(driver) or ()
    later = [r for r in read if r[0] > asked and any(lists(d, r[0]) for d in devices)]
    earlier = [r for r in read if r[0] < asked and any(lists(d, r[0]) for d in devices)]
    return later[0][1] if later else earlier[-1][1] if earlier else None


def first_listing(device: str) -> dict | None:
    """The device's first driver_devices.csv row: its `first` is the first release that lists it."""
    runs = _driver_devices()[0].get(device)
    return runs[0][2] if runs else None
