"""``import mmlvit`` registers its modules; configs can import it too."""

import subprocess
import textwrap


def test_import_registers_modules():
    from mmpretrain.registry import MODELS

    import mmlvit

    assert mmlvit.__version__
    assert MODELS.get('SoftmaxAttention') is not None


def test_custom_imports_in_config(tmp_path, python):
    # A fresh interpreter that never imports mmlvit itself: the config's
    # custom_imports must register the modules.
    cfg = tmp_path / 'cfg.py'
    cfg.write_text(
        "custom_imports = dict(imports=['mmlvit'], "
        'allow_failed_imports=False)\n'
        "model = dict(type='SoftmaxAttention', embed_dims=8, num_heads=2)\n"
    )
    script = textwrap.dedent(f"""
        from mmengine.config import Config
        from mmengine.registry import init_default_scope
        from mmpretrain.registry import MODELS
        import sys
        assert 'mmlvit' not in sys.modules
        cfg = Config.fromfile({str(cfg)!r})
        assert 'mmlvit' in sys.modules
        init_default_scope('mmpretrain')
        print(type(MODELS.build(cfg.model)).__name__)
    """)
    out = subprocess.run(
        [python, '-c', script], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().endswith('SoftmaxAttention')
