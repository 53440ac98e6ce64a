"""Each framework's rules in its own module behind a registry (issue 40 section 8), as the probe's adapters are:
`knowledge/frameworks.RULES` names every framework, `rules.py` dispatches through it and names none itself."""

from __future__ import annotations

import ast
import subprocess
import sys

from conftest import REPO

from gpucompat.knowledge import frameworks, rules
from gpucompat.model import FRAMEWORKS

RULES_PY = REPO / "src" / "gpucompat" / "knowledge" / "rules.py"


def test_the_registry_names_every_framework_and_each_module_has_the_whole_interface():
    assert tuple(frameworks.RULES) == FRAMEWORKS
    for framework, entry in frameworks.RULES.items():
        module_name, function = entry.split(":")
        module = frameworks.rules_module(framework)
        assert module.__name__ == f"gpucompat.knowledge.frameworks.{module_name}"
        assert callable(getattr(module, function)), framework
        assert callable(module.wheel_package) and callable(module.suggest), framework
        assert isinstance(module.JUDGES_PRERELEASES, bool) and isinstance(module.LISTS_EVERY_BUILD, bool), framework
        reasons, resolved = module.rules("1.0", "default", "9.0", "580.65.06")
        assert reasons and all(isinstance(r, rules.Reason) for r in reasons) and isinstance(resolved, dict), framework
    assert frameworks.rules_module("mxnet") is None


def test_rules_py_holds_no_branch_on_a_framework_name():
    """No `framework == "torch"`, `framework in ("torch", ...)` or {"torch": ...} in rules.py: a framework's own rule
    goes in its module. Any string constant that is a framework's name would be such a branch."""
    tree = ast.parse(RULES_PY.read_text())
    named = [(node.lineno, node.value) for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in FRAMEWORKS]
    assert named == [], f"rules.py names frameworks at lines {named}: put that rule in knowledge/frameworks/<name>.py"


def test_a_question_imports_only_its_own_framework_rules():
    code = ("import sys; from gpucompat.knowledge.rules import predict_stack\n"
            "predict_stack('torch', '2.4.1', 'cu121', '9.0', '550.54.15', '3.12')\n"
            "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('gpucompat.knowledge.frameworks.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['torch']"


def test_a_framework_rule_is_reached_through_predict_stack_and_suggest_fix():
    """The modules' rules are the ones predict_stack, never_built and suggest_fix use (not a copy left behind)."""
    assert "no cu999 build" in rules.never_built("torch", "2.4.1", "cu999")
    assert rules.never_built("tensorflow", "2.15.0", "gpu") is None  # its tables do not list every build
    blackwell = rules.predict_stack("torch", "2.6.0", "default", "12.0", "575.64.05", "3.12", gpu="NVIDIA GeForce RTX 5090")
    assert blackwell.verdict == rules.FAIL
    assert rules.suggest_fix("torch", "2.6.0", "12.0", "575.64.05", blackwell).startswith("pip install 'torch==")
    assert rules.wheel_package("cupy", "cuda12x[ctk]") == "cupy-cuda12x" and rules.wheel_package("cuda-runtime", "default") is None
