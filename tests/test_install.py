"""README.md's install and test commands, as .ci/run runs them: the CPU
command takes the torch that requirements.txt pins from PyTorch's CPU
index, .ci/run installs the same way, and its last line is exactly the
README's test command. (Whether pip then installs is CI's fresh run.)
And what the book's build overrides is pinned, at what is installed."""
import importlib.metadata
import pathlib
import re
import shlex

import pytest

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def bash_blocks(text):
    return re.findall(r"```bash\n(.*?)\n```", text, re.S)


def pip_installs(line):
    """The argument lists of each `pip install` in a shell line."""
    commands = [shlex.split(part) for part in line.split("&&")
                if "pip install" in part]
    return [words[words.index("install") + 1:] for words in commands
            if words[0].endswith("pip")]


def test_the_cpu_command_pins_requirements_torch_from_the_cpu_index():
    pinned = re.search(r"^torch==\S+$",
                       (ROOT / "requirements.txt").read_text(), re.M)[0]
    first = bash_blocks((ROOT / "README.md").read_text())[0]
    installs = pip_installs(first)
    assert installs[0] == [pinned, "--index-url", CPU_INDEX]
    assert installs[1] == ["-r", "requirements.txt"]


def test_ci_installs_as_the_readme_does_and_runs_its_test_command():
    readme = bash_blocks((ROOT / "README.md").read_text())
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    ci_installs = [args for line in ci for args in pip_installs(line)
                   if args[:2] != ["-q", "--upgrade"]]
    assert [[a for a in args if a != "-q"] for args in ci_installs] == \
        pip_installs(readme[0])
    assert ci[-1] == readme[1] == ".venv/bin/python -m pytest"


# What ddpdemo/book/lightpages.py overrides or trims (a template of the
# theme, its icon fonts) and the extension API it uses.
BOOK_BUILD = ("sphinx", "docutils", "pydata-sphinx-theme",
              "sphinx-book-theme")


def test_what_the_book_build_overrides_is_pinned_at_what_is_installed():
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$",
                           (ROOT / "requirements.txt").read_text(), re.M))
    for name in BOOK_BUILD:
        assert name in pins, f"{name} is not pinned in requirements.txt"
        assert importlib.metadata.version(name) == pins[name], name
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert ("pins the book's build (Sphinx, docutils, pydata-sphinx-theme "
            "and sphinx-book-theme)") in readme
