"""Packaging for mmlvit, an MMPretrain plugin for linear-attention ViTs."""

import os
import os.path as osp
import shutil
import sys

from setuptools import find_packages, setup

ROOT = osp.dirname(osp.abspath(__file__))


def read_version():
    namespace = {}
    with open(osp.join(ROOT, 'mmlvit', 'version.py')) as f:
        exec(f.read(), namespace)
    return namespace['__version__']


def parse_requirements(fname):
    """Read a requirements file, following ``-r`` includes."""
    requirements = []
    with open(osp.join(ROOT, fname)) as f:
        for line in f:
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            if line.startswith('-r '):
                included = osp.join(osp.dirname(fname), line[3:].strip())
                requirements += parse_requirements(included)
            else:
                requirements.append(line)
    return requirements


MIM_FILES = ('configs', 'tools', 'checkpoints', 'model-index.yml')


def add_mim_extension():
    """Put configs/, tools/, checkpoints/ (the shipped tiny teacher that
    configs name by a relative path) and model-index.yml under mmlvit/.mim,
    where ``mim`` looks for them: copies in wheels and sdists, relative
    symbolic links in an editable install (so they never go stale).

    Other commands (metadata, egg_info) leave mmlvit/.mim as it is.
    """
    if 'develop' in sys.argv or 'editable_wheel' in sys.argv:
        mode = 'symlink'
    elif 'bdist_wheel' in sys.argv or 'sdist' in sys.argv:
        mode = 'copy'
    else:
        return
    mim_path = osp.join(ROOT, 'mmlvit', '.mim')
    os.makedirs(mim_path, exist_ok=True)
    for name in MIM_FILES:
        src = osp.join(ROOT, name)
        dst = osp.join(mim_path, name)
        if osp.islink(dst) or osp.isfile(dst):
            os.remove(dst)
        elif osp.isdir(dst):
            shutil.rmtree(dst)
        if not osp.exists(src):
            continue
        if mode == 'symlink':
            os.symlink(osp.relpath(src, mim_path), dst)
        elif osp.isdir(src):
            shutil.copytree(src, dst)
        else:
            shutil.copyfile(src, dst)


if __name__ == '__main__':
    add_mim_extension()
    setup(
        name='mmlvit',
        version=read_version(),
        description='Linear-attention Vision Transformers initialised from '
        'softmax ViTs: copy the MLPs, distill the attention '
        '(MMPretrain plugin)',
        long_description=open(osp.join(ROOT, 'README.md')).read(),
        long_description_content_type='text/markdown',
        license='Apache License 2.0',
        packages=find_packages(
            exclude=('configs', 'tools', 'tests', 'lab', 'lab.*')
        ),
        include_package_data=True,
        python_requires='>=3.10',
        install_requires=parse_requirements('requirements/runtime.txt'),
        extras_require=dict(
            # mmcv: `lite` for classification, or the full mmcv 2.1.0 with
            # ops for `dense` (built by tools/setup/build_mmcv_wheel.sh).
            lite=parse_requirements('requirements/mmcv-lite.txt'),
            dense=parse_requirements('requirements/dense.txt'),
            mim=parse_requirements('requirements/mim.txt'),
            tests=parse_requirements('requirements/tests.txt'),
        ),
        zip_safe=False,
    )
