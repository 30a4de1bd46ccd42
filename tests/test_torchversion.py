"""ddpdemo.runtime.torchversion: the installed torch's version read
without importing torch, the floor pyproject.toml asks for, and the one
line an older torch gets, where the runtime is first imported."""
import pathlib
import subprocess
import sys
import textwrap
import tomllib

import pytest

import ddpdemo
from ddpdemo.runtime import torchversion

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(ddpdemo.__file__).parent.parent


def old_torch_message(version):
    return (f"ddpdemo needs torch>=2.12, but torch {version} is installed: "
            f"pip install 'torch>=2.12'")


def test_the_version_is_read_as_torch_gives_it():
    import torch
    assert torchversion.installed() == torch.__version__
    torchversion.check()                # the installed one is enough


def test_pyproject_asks_for_the_same_floor():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    torch = [d for d in project["dependencies"] if d.startswith("torch")]
    floor = ".".join(map(str, torchversion.FLOOR))
    assert torch == [f"torch>={floor}"] and floor == "2.12"


@pytest.mark.parametrize("version", ["2.11.0+cu128", "2.4.0", "1.13.1"])
def test_an_older_torch_gets_one_line_naming_both_versions(version):
    with pytest.raises(ImportError) as info:
        torchversion.check(version)
    assert str(info.value) == old_torch_message(version)


@pytest.mark.parametrize("version", ["2.12.0", "2.12.0+cu130",
                                     "2.13.0+cpu", "2.14.1", "3.0.0"])
def test_the_floor_and_newer_pass(version):
    torchversion.check(version)


def test_a_version_that_cannot_be_read_is_left_to_import_torch():
    assert torchversion.release("weird") is None
    torchversion.check("weird")


@pytest.fixture
def old_torch(tmp_path):
    """A stand-in torch 2.11.0 first on the path: its version.py, as a
    real torch has it, and an __init__ that fails if it is imported."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(
        "__version__ = '2.11.0+cu128'\n")
    (tmp_path / "torch" / "__init__.py").write_text(
        "raise AssertionError('torch was imported')\n")
    return tmp_path


def run_with(path, code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=120, cwd=path,
                          env={"PYTHONPATH": f"{path}:{ROOT}",
                               "PATH": "/usr/bin:/bin"})


def test_the_runtime_names_an_older_torch_before_importing_it(old_torch):
    """ddpdemo.Cluster, a rank's engine, `from ddpdemo import errors`:
    each reaches the runtime first, which says what is wrong in one line
    (ddpdemo.launch imports torch first, then the runtime says it)."""
    for code in ("import ddpdemo; ddpdemo.Cluster",
                 "import ddpdemo.runtime.engine",
                 "from ddpdemo import errors"):
        done = run_with(old_torch, code)
        assert done.returncode == 1, code
        assert done.stderr.splitlines()[-1] == (
            "ImportError: " + old_torch_message("2.11.0+cu128")), code


def test_importing_ddpdemo_alone_still_works_on_an_older_torch(old_torch):
    done = run_with(old_torch, textwrap.dedent("""
        import sys
        import ddpdemo
        print(sorted(m for m in sys.modules if m.startswith("ddpdemo")))
        """))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['ddpdemo']"
