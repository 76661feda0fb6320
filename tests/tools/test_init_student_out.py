"""tools/init_student.py checks --out before it does any work."""

import importlib.util
import os.path as osp

import pytest


def load_tool(repo_root):
    path = osp.join(repo_root, 'tools', 'init_student.py')
    spec = importlib.util.spec_from_file_location('init_student', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('case', ['parent_is_a_file', 'is_a_folder'])
def test_unwritable_out_is_named_before_work(case, tmp_path, repo_root):
    tool = load_tool(repo_root)
    blocker = tmp_path / 'blocker'
    if case == 'parent_is_a_file':
        blocker.write_text('')
        out = blocker / 'student.pth'
        reason = f'{blocker} is a file, not a folder'
    else:
        blocker.mkdir()
        out = blocker
        reason = 'Is a directory'
    # Neither the config nor the checkpoint exists: only the --out check
    # can produce this message, so it runs before any loading.
    missing = str(tmp_path / 'missing')
    with pytest.raises(SystemExit) as err:
        tool.main([missing + '.py', missing + '.pth', '--out', str(out)])
    assert str(err.value) == (
        f'Cannot save the student to --out {out}: {reason}. '
        'Choose a file in a writable folder.'
    )


def test_writable_out_is_left_untouched(tmp_path, repo_root):
    tool = load_tool(repo_root)
    out = tmp_path / 'new' / 'student.pth'
    tool.check_out(str(out))
    assert out.parent.is_dir() and not out.exists()
