"""What a run's log says: no lines a reader has to skip, words that fit
the machine.

mmengine and its dependencies log a few things on every run that say
nothing about it:

- the optimizer constructor warns once per frozen parameter
  ("teacher.backbone.pos_embed is skipped since its requires_grad=False"),
  56 lines for the frozen teacher of the tiny Fashion-MNIST distillation;
  :func:`hide_frozen_teacher_notes` drops these for the teacher's
  parameters only (a frozen student parameter is still reported);
- ``CheckpointHook`` builds a ``FileClient`` it never uses, and warns that
  ``FileClient`` and ``HardDiskBackend`` are deprecated;
- reading a config whose ``_base_`` names ``mmpretrain::`` imports
  setuptools' ``pkg_resources``, which warns that it is deprecated
  (:func:`read_config` reads without that warning);
- ``BaseModule.init_weights`` outside a runner prints every tensor's
  init ("value is the same before and after calling `init_weights`"),
  about 1,400 lines for a ViT (:data:`INIT_DUMP`);
- the environment block counts processes as "GPU number" on machines
  without a GPU (:class:`mmlvit.engine.runners.Runner` says "Processes"
  there);
- the environment block, the full config, the hook order table and the
  optimizer constructor's per-parameter options (about 380 lines for the
  tiny distillation) come before the first progress line:
  :func:`keep_details_in_file` leaves them to the log file in the work dir
  (the console gets a one-line environment summary).
"""

import logging
import re
import warnings
from contextlib import contextmanager

from mmengine.config import Config
from mmengine.logging import MMLogger

FILE_CLIENT_DEPRECATION = (
    r'^"FileClient" will be deprecated',
    r'^"HardDiskBackend" is the alias of "LocalBackend"',
)
# Records the console leaves to the log file (keep_details_in_file).
FILE_ONLY = (
    r'^\n-+\nSystem environment:',
    r'^Config:\n',
    r'^Hooks will be executed in the following order',
    r'^paramwise_options -- ',
)
# BaseModule._dump_init_info: '\n{name} - {shape}: \n{init info} \n '.
INIT_DUMP = r'^\n\S+ - torch\.Size\('


class DropMessages(logging.Filter):
    """Drop log records whose message matches one of ``patterns``
    (regular expressions, ``re.search``); let the others through."""

    def __init__(self, *patterns):
        super().__init__()
        self.patterns = [re.compile(p) for p in patterns]

    def filter(self, record):
        message = record.getMessage()
        return not any(p.search(message) for p in self.patterns)


@contextmanager
def drop_messages(*patterns, logger=None):
    """Within the block, ``logger`` (default: mmengine's current logger)
    drops records whose message matches one of ``patterns``."""
    logger = logger or MMLogger.get_current_instance()
    dropped = DropMessages(*patterns)
    logger.addFilter(dropped)
    try:
        yield
    finally:
        logger.removeFilter(dropped)


class FrozenTeacherNotes(DropMessages):
    """The optimizer constructor's note about each frozen parameter whose
    name starts with ``prefix``."""

    def __init__(self, prefix):
        super().__init__(
            rf'^{re.escape(prefix)}\S+ is skipped since its '
            r'requires_grad=False$'
        )
        self.prefix = prefix


def hide_frozen_teacher_notes(prefix='teacher.', logger=None):
    """Make ``logger`` (default: mmengine's current logger, the runner's
    while it builds the model) drop the optimizer constructor's
    per-parameter notes about the frozen teacher under ``prefix``. Adding
    it twice adds one filter."""
    logger = logger or MMLogger.get_current_instance()
    if not any(
        isinstance(f, FrozenTeacherNotes) and f.prefix == prefix
        for f in logger.filters
    ):
        logger.addFilter(FrozenTeacherNotes(prefix))


def read_config(path):
    """``Config.fromfile(path)`` without setuptools' ``pkg_resources``
    deprecation warning (mmengine imports ``pkg_resources`` to find the
    package of an ``mmpretrain::`` base file)."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            'ignore', 'pkg_resources is deprecated', UserWarning
        )
        return Config.fromfile(path)


class FileOnlyDetails(DropMessages):
    """The :data:`FILE_ONLY` records, dropped by a console handler."""

    def __init__(self):
        super().__init__(*FILE_ONLY)


def keep_details_in_file(logger):
    """Make the console handlers of ``logger`` drop the :data:`FILE_ONLY`
    records; its file handler (the log in the work dir) keeps them. Calling
    it twice adds one filter per handler."""
    for handler in logger.handlers:
        console = isinstance(handler, logging.StreamHandler) and not (
            isinstance(handler, logging.FileHandler)
        )
        if console and not any(
            isinstance(f, FileOnlyDetails) for f in handler.filters
        ):
            handler.addFilter(FileOnlyDetails())
