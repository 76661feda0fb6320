"""mmengine's CheckpointHook made safe against kills during saving."""

import logging
import os
import os.path as osp
import re
import signal
import threading
import time
from collections import deque
from contextlib import nullcontext

import numpy as np
import torch
from mmengine.dist import (
    all_reduce,
    barrier,
    get_world_size,
    is_main_process,
)
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log
from mmpretrain.registry import HOOKS

from mmlvit.checkpoint import CheckpointError, load_checkpoint_file
from mmlvit.engine.atomic_files import atomic_write, leftover_temp_files
from mmlvit.engine.logs import FILE_CLIENT_DEPRECATION, drop_messages
from mmlvit.engine.resume_schedule import (
    finished_message,
    rebuild_schedule,
    schedule_changes,
)

LAST_CHECKPOINT = 'last_checkpoint'
# The exit status of a run stopped by a signal after saving a resumable
# checkpoint: EX_TEMPFAIL of sysexits.h ("try again later").
PREEMPTED_EXIT_CODE = 75
PREEMPTION_TEMPLATE = 'iter_{}.pth'


class Preempted(SystemExit):
    """Training stopped on a signal after saving a resumable checkpoint;
    the process exits with :data:`PREEMPTED_EXIT_CODE`."""

    def __init__(self, message):
        super().__init__(PREEMPTED_EXIT_CODE)
        self.message = message


def missing_resume_state(checkpoint):
    """What a checkpoint lacks to continue training: the names of the
    missing parts (``meta.epoch``, ``meta.iter``, ``optimizer``); empty when
    it can be resumed."""
    meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    missing = [f'meta.{key}' for key in ('epoch', 'iter') if key not in meta]
    if not isinstance(checkpoint, dict) or 'optimizer' not in checkpoint:
        missing.append('optimizer')
    return missing


def _show(value):
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + '...'
    return f'{text} ({type(value).__name__})'


def _is_count(value):
    return (
        isinstance(value, (int, np.integer))
        and not isinstance(value, (bool, np.bool_))
        and value >= 0
    )


def malformed_resume_state(checkpoint):
    """Fields of a checkpoint that ``Runner.resume`` and the hooks read and
    that hold something else than what mmengine writes there: one phrase
    per field (``meta.epoch is 'abc' (a str), not ...``); empty when every
    field present is well-formed (missing fields:
    :func:`missing_resume_state`)."""
    if not isinstance(checkpoint, dict):
        return [f'the file holds {_show(checkpoint)}, not a checkpoint dict']
    if 'meta' not in checkpoint:
        return []
    meta = checkpoint['meta']
    if not isinstance(meta, dict):
        return [f'meta is {_show(meta)}, not a dict']
    problems = [
        f'meta.{key} is {_show(meta[key])}, not a non-negative integer'
        for key in ('epoch', 'iter')
        if key in meta and not _is_count(meta[key])
    ]
    if (
        not problems
        and {'epoch', 'iter'} <= meta.keys()
        and meta['iter'] < meta['epoch']
    ):
        problems.append(
            f'meta.iter ({meta["iter"]}) is smaller than meta.epoch '
            f'({meta["epoch"]}), but every epoch has at least one iteration'
        )
    seed = meta.get('seed')
    if seed is not None and not isinstance(seed, (int, np.integer)):
        problems.append(f'meta.seed is {_show(seed)}, not an integer')
    if 'config' in meta and not isinstance(meta['config'], str):
        problems.append(f'meta.config is {_show(meta["config"])}, not a str')
    position = checkpoint.get('epoch_position')
    if position is not None and not (
        isinstance(position, dict)
        and all(_is_count(position.get(k)) for k in ('batch', 'batches'))
        and position['batch'] <= position['batches']
    ):
        problems.append(
            f'epoch_position is {_show(position)}, not dict(batch=B, '
            'batches=N) with 0 <= B <= N'
        )
    saved = checkpoint.get('random_state')
    if saved is not None:
        if not isinstance(saved, dict):
            problems.append(f'random_state is {_show(saved)}, not a dict')
        else:
            problems += [
                f'random_state.{key} is {_show(saved.get(key))}, not a '
                'non-negative integer'
                for key in ('epoch', 'iter')
                if (key in saved or key == 'epoch')
                and not _is_count(saved.get(key))
            ]
            problems += [
                f'random_state.{key} is missing'
                for key in ('python', 'numpy', 'torch')
                if key not in saved
            ]
            if 'torch' in saved and not isinstance(
                saved['torch'], torch.Tensor
            ):
                problems.append(
                    f'random_state.torch is {_show(saved["torch"])}, not a '
                    'tensor'
                )
    return problems


def malformed_message(filename, problems):
    return (
        f'{filename} cannot be resumed: {"; ".join(problems)}. The file was '
        'not written by this training code or was edited. Resume from '
        'another checkpoint of the run (--resume without a path takes the '
        'newest one that is intact), or start a new run from its weights '
        f'with --cfg-options load_from={filename} (without --resume).'
    )


def check_resume_state(checkpoint, filename):
    """Raise :class:`CheckpointError` naming ``filename`` and the field
    when ``checkpoint`` lacks the training state or holds malformed
    metadata; nothing of it has been applied yet when this is called
    (``after_load_checkpoint``)."""
    problems = malformed_resume_state(checkpoint)
    if problems:
        raise CheckpointError(malformed_message(filename, problems))
    missing = missing_resume_state(checkpoint)
    if missing:
        raise CheckpointError(not_resumable_message(filename, missing))


def not_resumable_message(filename, missing):
    return (
        f'{filename} cannot be resumed: it holds no {", ".join(missing)} '
        '(best_*.pth files and weights-only checkpoints keep the model '
        'weights only, so the optimizer and the learning-rate schedule would '
        'silently start over). Resume from an epoch_*.pth/iter_*.pth file '
        'of the run, or start a new run from these weights with '
        f'--cfg-options load_from={filename} (without --resume).'
    )


@HOOKS.register_module()
class SafeCheckpointHook(CheckpointHook):
    """mmengine's :class:`~mmengine.hooks.CheckpointHook` for runs that can
    be killed at any moment.

    Takes the same arguments and saves the same files, with these changes:

    - Every file is complete or absent. Checkpoints and ``last_checkpoint``
      are written to a temporary file in the same folder and renamed
      (:mod:`mmlvit.engine.atomic_files`); temporary files of killed writes
      are removed at the next start.
    - Old checkpoints (``max_keep_ckpts``, the previous ``best_*.pth``) are
      deleted only after the new one is complete, so a kill in between
      never leaves nothing to resume.
    - Resuming with another training length (e.g. a larger
      ``train_cfg.max_epochs``) rebuilds the learning-rate schedule for the
      new length (:mod:`mmlvit.engine.resume_schedule`), with a warning;
      resuming a finished run logs that there is nothing to train.
    - Automatic resume (``--resume`` without a path) takes the newest
      checkpoint of the work directory that loads and holds the training
      state, with a warning naming any it skipped, instead of trusting
      ``last_checkpoint`` alone; it refuses to start over when checkpoints
      exist but none can be resumed. Resuming a file without optimizer
      state (a ``best_*.pth``, a weights-only file) is an error that points
      to ``load_from``; so is malformed metadata (``meta`` not a dict, a
      negative or non-integer ``meta.epoch``/``meta.iter``, ...), checked
      before anything of the file is applied. Epoch and iteration
      checkpoints are ordered by the iteration they were saved at.
    - A signal in ``stop_signals`` (SIGTERM, which schedulers send before
      they kill a job, and SIGUSR1, Slurm's ``--signal`` warning) stops
      training after the current iteration: a resumable checkpoint
      ``iter_{N}.pth`` is saved, the log says so and the process exits with
      :data:`PREEMPTED_EXIT_CODE` (75). ``--resume`` continues with the
      next batch (:mod:`mmlvit.engine.loops`); the file is deleted once a
      newer checkpoint is complete. In distributed runs the processes stop
      at the same iteration.

    Args:
        stop_signals (Sequence[str]): Names of the signals that stop
            training with a checkpoint. Defaults to
            ``('SIGTERM', 'SIGUSR1')``; ``()`` keeps the default actions.
        **kwargs: :class:`~mmengine.hooks.CheckpointHook`'s arguments.
    """

    def __init__(self, *args, stop_signals=('SIGTERM', 'SIGUSR1'), **kwargs):
        super().__init__(*args, **kwargs)
        self.stop_signals = [
            getattr(signal, name) for name in stop_signals or ()
        ]
        self._received = None  # (signal number, time.time()) of a stop
        self._old_handlers = {}
        self._preemption_ckpt = None

    def before_run(self, runner):
        folder = self._checkpoint_folder(runner)
        if is_main_process():
            for path in leftover_temp_files(folder):
                os.remove(path)
                print_log(
                    f'Removed {path}: a checkpoint write that was killed '
                    'before it finished.',
                    logger='current',
                    level=logging.WARNING,
                )
        if runner._resume and runner._load_from is None:
            resume_from = self._newest_resumable(folder, runner)
            if resume_from is not None:
                runner._load_from = resume_from

    def _unused_file_client(self):
        """Without ``file_client_args`` mmengine still builds a
        ``FileClient`` (before training and at every save) that it does not
        use, and warns that ``FileClient`` is deprecated: drop that
        warning."""
        if self.file_client_args is not None:
            return nullcontext()
        return drop_messages(*FILE_CLIENT_DEPRECATION)

    def before_train(self, runner):
        with self._unused_file_client():
            super().before_train(runner)
        self._preemption_ckpt = runner.message_hub.runtime_info.pop(
            'preemption_ckpt', None
        )
        self._install_stop_handlers()
        resumed, self._resumed = getattr(self, '_resumed', None), None
        if resumed is None:
            return
        self._reconcile_best(runner)
        filename, changes = resumed
        if changes:
            rebuild_schedule(runner, changes)
        finished = finished_message(runner, filename)
        if finished:
            print_log(finished, logger='current')

    def after_train(self, runner):
        super().after_train(runner)
        self._restore_handlers()

    # The best checkpoint after a resume ------------------------------------

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

    def _install_stop_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in self.stop_signals:
            self._old_handlers[signum] = signal.signal(signum, self._on_signal)

    def _restore_handlers(self):
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)
        self._old_handlers = {}

    def _on_signal(self, signum, frame):
        # Only note it: the training step in progress finishes first.
        if self._received is None:
            self._received = (signum, time.time())

    def _agreed_stop(self):
        """The signal that stops training now, agreed by every process
        (the largest signal number any process received; 0: none)."""
        signum = self._received[0] if self._received else 0
        if get_world_size() > 1:
            flag = torch.tensor([signum], dtype=torch.int64)
            all_reduce(flag, op='max')
            signum = int(flag.item())
        return signum

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        super().after_train_iter(runner, batch_idx, data_batch, outputs)
        if not self.stop_signals:
            return
        signum = self._agreed_stop()
        if signum:
            self._stop(runner, batch_idx, signum)

    def _stop(self, runner, batch_idx, signum):
        step = runner.iter + 1
        name = PREEMPTION_TEMPLATE.format(step)
        path = self.file_backend.join_path(self.out_dir, name)
        if path != self.last_ckpt:  # else saved at this iteration already
            runner.message_hub.update_info('preemption_ckpt', path)
            with self._unused_file_client():
                runner.save_checkpoint(
                    self.out_dir,
                    name,
                    self.file_client_args,
                    save_optimizer=True,
                    save_param_scheduler=True,
                    meta=dict(epoch=runner.epoch, iter=step),
                    by_epoch=False,
                    backend_args=self.backend_args,
                    **self.args,
                )
            runner.message_hub.runtime_info.pop('preemption_ckpt', None)
            if is_main_process():
                atomic_write(osp.join(runner.work_dir, LAST_CHECKPOINT), path)
            self._remove_preemption_ckpt(keep=path)
            self._preemption_ckpt = path
        name = signal.Signals(signum).name
        waited = (
            f' {time.time() - self._received[1]:.1f} s ago'
            if self._received and self._received[0] == signum
            else ' by another process'
        )
        message = (
            f'Received {name}{waited}: stopped training after iteration '
            f'{step} (epoch {runner.epoch + 1}, batch {batch_idx + 1} of '
            f'{len(runner.train_dataloader)}) and saved {path}. Run the same '
            f'command with --resume to continue from the next batch. '
            f'Exiting with code {PREEMPTED_EXIT_CODE}.'
        )
        print_log(message, logger='current', level=logging.WARNING)
        # No process exits before the file is complete (a launcher such as
        # torchrun sends SIGTERM to the others once one exits); after that
        # the stop signals are ignored while the process exits with 75.
        barrier()
        if self._old_handlers:
            for signum in self.stop_signals:
                signal.signal(signum, signal.SIG_IGN)
        raise Preempted(message)

    def _remove_preemption_ckpt(self, keep=None):
        """Delete the checkpoint of an earlier stop once a newer one is
        complete."""
        old = self._preemption_ckpt
        if old and old != keep and is_main_process():
            self._remove(old)
        self._preemption_ckpt = None

    def after_load_checkpoint(self, runner, checkpoint):
        # Runner.resume() reads meta['epoch'] and the optimizer right after
        # this call: a file without them fails there with a bare KeyError
        # or, for best_*.pth, silently restarts the schedule; a malformed
        # meta.epoch is logged as 'resumed epoch: abc' and then fails.
        if getattr(runner, '_resume', False) and not getattr(
            runner, '_has_loaded', True
        ):
            check_resume_state(checkpoint, runner._load_from)
            # The runner's schedulers are still those built for this run's
            # length; the checkpoint's state replaces them next.
            self._resumed = (
                runner._load_from,
                schedule_changes(
                    checkpoint.get('param_schedulers'),
                    runner.param_schedulers,
                ),
            )

    def _checkpoint_folder(self, runner):
        """The folder checkpoints go to (``before_train`` sets ``out_dir``
        the same way)."""
        if self.out_dir is None or self.out_dir == runner.work_dir:
            return runner.work_dir
        return osp.join(
            self.out_dir, osp.basename(runner.work_dir.rstrip(osp.sep))
        )

    def _candidates(self, folder, runner):
        """Epoch and iteration checkpoints (``filename_tmpl`` and
        ``iter_{N}.pth``) in ``folder``, newest first: ordered by the
        iteration they were saved at (``epoch_N.pth`` at N epochs of the
        training dataloader; the epoch file first when both are at the same
        iteration)."""
        try:
            per_epoch = len(runner.train_dataloader) if self.by_epoch else 1
        except TypeError:  # a dataloader without a length
            per_epoch = None
        templates = [(self.filename_tmpl, per_epoch, int(self.by_epoch))]
        if self.filename_tmpl != PREEMPTION_TEMPLATE:
            templates.append((PREEMPTION_TEMPLATE, 1, 0))
        steps = {}
        names = os.listdir(folder) if osp.isdir(folder) else []
        for template, scale, is_epoch in templates:
            pattern = re.compile(
                re.escape(template).replace(r'\{\}', r'(\d+)') + '$'
            )
            for name in names:
                match = pattern.match(name)
                if match is None:
                    continue
                step = int(match.group(1))
                if scale is None:  # unknown length: epoch files first
                    position = (float('inf'), step, 1)
                else:
                    position = (step * scale, 0, is_epoch)
                steps[osp.join(folder, name)] = position
        return sorted(steps, key=steps.get, reverse=True)

    def _newest_resumable(self, folder, runner):
        candidates = self._candidates(folder, runner)
        skipped = []
        for path in candidates:
            if osp.isdir(path):  # sharded (FSDP/DeepSpeed) checkpoint folder
                chosen = path
                break
            try:
                checkpoint = load_checkpoint_file(path)
            except (CheckpointError, OSError) as err:
                skipped.append(f'{path} ({err})')
                continue
            malformed = malformed_resume_state(checkpoint)
            if malformed:
                skipped.append(f'{path} ({"; ".join(malformed)})')
                continue
            missing = missing_resume_state(checkpoint)
            if missing:
                skipped.append(f'{path} (no {", ".join(missing)})')
                continue
            chosen = path
            break
        else:
            if skipped:
                raise CheckpointError(
                    f'--resume found checkpoints in {folder} but none can be '
                    'resumed, so training would start over and overwrite '
                    'them: ' + '; '.join(skipped) + '. Move them away to '
                    'start a new run, or pass --resume PATH / load_from=PATH '
                    'with a file that loads.'
                )
            return None
        if skipped:
            print_log(
                f'Resuming from {chosen}; skipped newer checkpoints that '
                'cannot be resumed: ' + '; '.join(skipped),
                logger='current',
                level=logging.WARNING,
            )
        return chosen

    def _save_checkpoint_with_step(self, runner, step, meta):
        """mmengine's order is: delete the oldest kept checkpoint, save the
        new one, write ``last_checkpoint``. Here the deletion comes last,
        and ``last_checkpoint`` is written atomically."""
        outdated = []
        if self.max_keep_ckpts > 0:
            # Until they are deleted, outdated steps stay in the list that
            # the checkpoint records: a run resumed after a kill between
            # saving and deleting deletes them (CheckpointHook.before_train).
            kept = list(self.keep_ckpt_ids)
            if not kept or kept[-1] != step:
                kept.append(step)
            outdated = kept[: -self.max_keep_ckpts]
            runner.message_hub.update_info('keep_ckpt_ids', kept)

        ckpt_filename = self.filename_tmpl.format(step)
        self.last_ckpt = self.file_backend.join_path(
            self.out_dir, ckpt_filename
        )
        runner.message_hub.update_info('last_ckpt', self.last_ckpt)
        with self._unused_file_client():
            runner.save_checkpoint(
                self.out_dir,
                ckpt_filename,
                self.file_client_args,
                save_optimizer=self.save_optimizer,
                save_param_scheduler=self.save_param_scheduler,
                meta=meta,
                by_epoch=self.by_epoch,
                backend_args=self.backend_args,
                **self.args,
            )
        if is_main_process():
            atomic_write(
                osp.join(runner.work_dir, LAST_CHECKPOINT), self.last_ckpt
            )
        self._remove_preemption_ckpt(keep=self.last_ckpt)
        if is_main_process():
            for old_step in outdated:
                self._remove(
                    self.file_backend.join_path(
                        self.out_dir, self.filename_tmpl.format(old_step)
                    )
                )
        if self.max_keep_ckpts > 0:
            self.keep_ckpt_ids = deque(kept, self.max_keep_ckpts)
            runner.message_hub.update_info(
                'keep_ckpt_ids', list(self.keep_ckpt_ids)
            )

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

    def _remove(self, path):
        if self.file_backend.isfile(path):
            self.file_backend.remove(path)
        elif self.file_backend.isdir(path):  # sharded checkpoint folder
            self.file_backend.rmtree(path)


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
