"""explain -r offers a fix only where the set it leaves resolves (issue 40.3), checked with the real uv against a local
index, and says 'not checked' where uv could not ask."""

import json

from conftest import run_cli, write
from gpucompat.answers import fix_check
from gpucompat.answers.lockfiles import requirements_text
from test_knowledge_update import IndexServer, make_wheel

FILE = "torch==2.3.1\nnvidia-cudnn-cu11==8.9.6.50\n"


def _index(tmp_path):
    house = tmp_path / "house"
    house.mkdir()
    # torch 2.3.1's cu118 build pins its own cuDNN, as the real one does (nvidia-cudnn-cu11==8.7.0.84)
    make_wheel(house, "torch", "2.3.1+cu118", "py3-none-any", {}, ("nvidia-cudnn-cu11==8.7.0.84",))
    make_wheel(house, "torch", "2.3.1", "py3-none-any", {})
    for version in ("8.7.0.84", "8.9.6.50"):
        make_wheel(house, "nvidia-cudnn-cu11", version, "py3-none-any", {})
    return IndexServer(house)


def test_a_set_uv_cannot_resolve_is_not_offered_and_one_that_resolves_is(tmp_path, monkeypatch):
    server = _index(tmp_path)
    try:
        monkeypatch.setenv("UV_DEFAULT_INDEX", server.url)
        monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
        parsed = requirements_text(FILE, "requirements.txt", None)
        keep_cudnn = {"text": "or keep them and take torch's build for their CUDA: line 1 torch==2.3.1+cu118", "install": None,
                      "set": fix_check.changed_set(parsed, replace={1: "torch==2.3.1+cu118"})}
        drop_cudnn = {"text": "remove line 2 (nvidia-cudnn-cu11)", "install": None, "set": fix_check.changed_set(parsed, drop={2})}
        kept, notes = fix_check.checked([drop_cudnn, keep_cudnn], "3.11")
    finally:
        server.close()
    assert [(f["text"], f["checked"]) for f in kept] == [("remove line 2 (nvidia-cudnn-cu11)", "resolves")]
    assert len(notes) == 1 and notes[0].startswith("not offered: or keep them and take torch's build")
    assert "does not resolve" in notes[0] and "nvidia-cudnn-cu11" in notes[0]


def test_offline_the_fix_is_offered_marked_not_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("UV_DEFAULT_INDEX", "http://127.0.0.1:9/simple")  # nothing listens on the discard port
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    parsed = requirements_text(FILE, "requirements.txt", None)
    fix = {"text": "remove line 2", "install": None, "set": fix_check.changed_set(parsed, drop={2})}
    kept, notes = fix_check.checked([fix], "3.11")
    assert notes == [] and kept[0]["checked"].startswith("not checked:")


def test_explain_r_prints_a_fix_uv_could_not_check_as_not_checked(tmp_path):
    path = write(tmp_path / "requirements.txt", FILE)
    env = {"UV_DEFAULT_INDEX": "http://127.0.0.1:9/simple", "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "NO_COLOR": "1"}
    data = json.loads(run_cli("explain", "-r", str(path), "--gpu", "A100", "--driver", "550.54.14", "--python", "3.11", "--json",
                              env=env, check=0).stdout)
    assert data["fixes"] and all(f["checked"].startswith("not checked:") for f in data["fixes"])
    text = run_cli("explain", "-r", str(path), "--gpu", "A100", "--driver", "550.54.14", "--python", "3.11", env=env, check=0).stdout
    assert "(not checked:" in text
