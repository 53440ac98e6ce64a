"""The headline says what blocks (issue 40 section 6): the fact the user cannot change, else what fails first."""

from gpucompat.answers.explain import answer_requirements
from gpucompat.answers.asked import read


def test_a_set_pip_cannot_install_is_env_unresolvable_even_where_it_also_mixes_cuda_majors(tmp_path):
    """torch 2.3.1 pins nvidia-cudnn-cu12==8.9.2.26; the file pins 9.1.0.70 (pip cannot install both) and a CUDA 11 cuBLAS:
    it fails at resolve before anything could mix majors at import."""
    path = tmp_path / "requirements.txt"
    path.write_text("torch==2.3.1\nnvidia-cudnn-cu12==9.1.0.70\nnvidia-cublas-cu11==11.11.3.6\n")
    result = answer_requirements(read(None, str(path), None, "A100", None, "550.54.14", "3.11"))
    assert {r["rule"] for r in result["set"] if r["verdict"] == "fail"} == {"one CUDA major", "torch's own pin of nvidia-cudnn-cu12"}
    assert (result["verdict"], result["code"], result["stage"]) == ("fail", "ENV_UNRESOLVABLE", "resolve")
