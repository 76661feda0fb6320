"""The data tools' --help: the whole first paragraph of their docstring and
a help text for every option."""

import re
import subprocess

import pytest

TOOLS = {
    'tools/data/prepare_fashion_mnist.py': ['--src', '--dst'],
    'tools/data/prepare_dense_fashion_mnist.py': [
        '--src',
        '--out',
        '--num-train',
        '--num-test',
        '--canvas',
        '--seed',
        '--items',
        '--scale',
    ],
}


def words(text):
    return ' '.join(text.split())


@pytest.mark.parametrize('tool', sorted(TOOLS))
def test_help_says_what_the_tool_and_each_option_do(
    tool, repo_root, python, load_tool
):
    out = subprocess.run(
        [python, tool, '--help'],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    text = words(out.stdout)
    summary = words(load_tool(tool).__doc__.split('\n\n')[0])
    assert summary.endswith('.')
    # argparse may break a hyphenated word at the line end.
    assert summary.replace('-', '') in text.replace('- ', '').replace('-', '')
    options = text.split('options:')[1]
    for option in TOOLS[tool]:
        match = re.search(rf'{option} [A-Z_]+(?: [A-Z_]+)* (\S+)', options)
        assert match and not match.group(1).startswith('-'), option
