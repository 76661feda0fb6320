"""The best checkpoints (``save_best``) of :class:`SafeCheckpointHook`:
the previous best file is deleted only after the new one is complete, and
a resumed run takes its best score and file from the best files on disk."""

import logging
import os
import os.path as osp
import re

from mmengine.dist import is_main_process
from mmengine.logging import print_log

from .loading import CheckpointError, load_checkpoint_file


class BestCheckpointMixin:
    """The ``save_best`` part of :class:`SafeCheckpointHook`, mixed in
    before mmengine's ``CheckpointHook``."""

    def _rule(self, key):
        """'greater' or 'less' for a key indicator (mmengine's inference
        from ``greater_keys``/``less_keys`` when no rule is given)."""
        index = (
            self.key_indicators.index(key) if key in self.key_indicators else 0
        )
        rule = self.rules[index] if index < len(self.rules) else None
        if rule is not None:
            return rule
        lower = key.lower()
        greater = [k.lower() for k in self.greater_keys]
        less = [k.lower() for k in self.less_keys]
        if lower in greater:
            return 'greater'
        if lower in less:
            return 'less'
        if any(k in lower for k in greater):
            return 'greater'
        if any(k in lower for k in less):
            return 'less'
        return None

    def _best_files(self, key, template):
        """Best checkpoints of ``key`` in ``out_dir``: (path, key as in the
        file name, step)."""
        name = re.escape(template).replace(r'\{\}', r'(\d+)')
        prefix = (
            r'best_(.+)_'
            if key == 'auto'
            else re.escape(f'best_{key}_'.replace('/', '_')) + '()'
        )
        pattern = re.compile(prefix + name + '$')
        found = []
        folder = self.out_dir
        for entry in os.listdir(folder) if osp.isdir(folder) else []:
            match = pattern.match(entry)
            if match:
                found.append((osp.join(folder, entry), match.group(1)))
        return found

    def _reconcile_best(self, runner):
        """Make the resumed run's best score and best file those of the best
        checkpoints on disk.

        After a new best score, the best file is saved first, then
        ``epoch_N.pth`` is saved again to record it, then the previous best
        file is deleted. A kill or a failed write in between leaves an
        ``epoch_N.pth`` that names the previous best: resumed from it, the
        run would log a wrong best and keep two best files. Every best file
        records its own score (its message hub), so the truth is on disk:
        the best of the files saved up to the resumed iteration is taken
        and the others are deleted, with a log line.
        """
        if not self.save_best:
            return
        hub = runner.message_hub
        single = len(self.key_indicators) == 1
        template = 'epoch_{}.pth' if self.by_epoch else 'iter_{}.pth'
        for key in self.key_indicators:
            score_key = 'best_score' if single else f'best_score_{key}'
            ckpt_key = 'best_ckpt' if single else f'best_ckpt_{key}'
            scored = []
            for path, named_key in self._best_files(key, template):
                try:
                    saved = load_checkpoint_file(path)
                    info = saved['message_hub']['runtime_info']
                    score = float(info[score_key])
                    position = int(saved['meta']['iter'])
                except (
                    CheckpointError,
                    OSError,
                    KeyError,
                    TypeError,
                    ValueError,
                ) as err:
                    print_log(
                        f'Best checkpoint {path} does not record its score '
                        f'({type(err).__name__}: {err}); left as it is.',
                        logger='current',
                        level=logging.WARNING,
                    )
                    continue
                if position <= runner.iter:
                    scored.append((score, position, path, named_key))
            if not scored:
                continue
            rule = self._rule(scored[0][3] if key == 'auto' else key)
            if rule is None:
                continue
            sign = 1 if rule == 'greater' else -1
            score, _, path, _ = max(scored, key=lambda s: (sign * s[0], s[1]))
            recorded = (hub.get_info(score_key), hub.get_info(ckpt_key))
            hub.update_info(score_key, score)
            hub.update_info(ckpt_key, path)
            if single:
                self.best_ckpt_path = path
            else:
                self.best_ckpt_path_dict[key] = path
            if recorded != (score, path):
                print_log(
                    f'The resumed checkpoint records the best score '
                    f'{recorded[0]} in {recorded[1]}, but {path} holds '
                    f'{score} (a save after that best score was killed or '
                    f'failed): continuing with {path} as the best '
                    'checkpoint.',
                    logger='current',
                    level=logging.WARNING,
                )
            for other_score, _, other, _ in scored:
                if other != path and is_main_process():
                    self._remove(other)
                    print_log(
                        f'Removed {other} (score {other_score}): superseded '
                        f'by the best checkpoint {path} ({score}).',
                        logger='current',
                        level=logging.WARNING,
                    )

    # Stopping on a signal ------------------------------------------------

    def _save_best_checkpoint(self, runner, metrics):
        """mmengine deletes the previous best checkpoint before it saves the
        new one; here the deletion waits until the new one is complete."""
        backend = self.file_backend
        self.file_backend = _DeferredRemoval(backend)
        try:
            with self._unused_file_client():
                super()._save_best_checkpoint(runner, metrics)
        finally:
            deferred, self.file_backend = self.file_backend, backend
        current = {self.last_ckpt, getattr(self, 'best_ckpt_path', None)}
        current |= set(getattr(self, 'best_ckpt_path_dict', {}).values())
        for path in deferred.paths:
            if path not in current:
                self._remove(path)


class _DeferredRemoval:
    """A file backend whose ``remove``/``rmtree`` only note the path."""

    def __init__(self, backend):
        self._backend = backend
        self.paths = []

    def remove(self, path):
        self.paths.append(path)

    rmtree = remove

    def __getattr__(self, name):
        return getattr(self._backend, name)
