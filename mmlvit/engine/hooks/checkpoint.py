"""mmengine's CheckpointHook made safe against kills during saving."""

import logging
import os
import os.path as osp
from collections import deque
from contextlib import nullcontext

from mmengine.dist import barrier, is_main_process
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log
from mmpretrain.registry import HOOKS

from mmlvit.checkpoint.atomic_files import atomic_write, leftover_temp_files
from mmlvit.checkpoint.best import BestCheckpointMixin
from mmlvit.checkpoint.preemption import (
    LAST_CHECKPOINT,
    PREEMPTED_EXIT_CODE,
    Preempted,
    StopOnSignalMixin,
)
from mmlvit.checkpoint.resume import newest_resumable, resume_candidates
from mmlvit.checkpoint.resume_state import check_resume_state
from mmlvit.checkpoint.sharded import clean_leftovers
from mmlvit.engine.resume_schedule import (
    finished_message,
    rebuild_schedule,
    schedule_changes,
)
from mmlvit.utils.logs import FILE_CLIENT_DEPRECATION, drop_messages

__all__ = ['PREEMPTED_EXIT_CODE', 'Preempted', 'SafeCheckpointHook']


@HOOKS.register_module()
class SafeCheckpointHook(
    StopOnSignalMixin, BestCheckpointMixin, CheckpointHook
):
    """mmengine's :class:`~mmengine.hooks.CheckpointHook` for runs that can
    be killed at any moment.

    Takes the same arguments and saves the same files, with these changes:

    - Every file is complete or absent. Checkpoints and ``last_checkpoint``
      are written to a temporary file in the same folder and renamed
      (:mod:`mmlvit.checkpoint.atomic_files`); temporary files of killed writes
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
      checkpoints are ordered by the iteration they were saved at. A
      sharded (FSDP) checkpoint folder is taken only when its write
      finished (:mod:`mmlvit.checkpoint.sharded`).
    - A signal in ``stop_signals`` (SIGTERM, which schedulers send before
      they kill a job, and SIGUSR1, Slurm's ``--signal`` warning) stops
      training after the current iteration: a resumable checkpoint
      ``iter_{N}.pth`` is saved, the log says so and the process exits with
      :data:`PREEMPTED_EXIT_CODE` (75). ``--resume`` continues with the
      next batch (:mod:`mmlvit.engine.runners.loops`); the file is deleted
      once a newer checkpoint is complete. In distributed runs the
      processes stop at the same iteration.

    Args:
        stop_signals (Sequence[str]): Names of the signals that stop
            training with a checkpoint. Defaults to
            ``('SIGTERM', 'SIGUSR1')``; ``()`` keeps the default actions.
        **kwargs: :class:`~mmengine.hooks.CheckpointHook`'s arguments.
    """

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
            for message in clean_leftovers(folder):
                print_log(message, logger='current', level=logging.WARNING)
        barrier()  # every process sees the folder as it is now
        if runner._resume and runner._load_from is None:
            try:
                epoch_length = len(runner.train_dataloader)
            except TypeError:  # a dataloader without a length
                epoch_length = None
            candidates = resume_candidates(
                folder, self.filename_tmpl, self.by_epoch, epoch_length
            )
            resume_from = newest_resumable(folder, candidates)
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

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        super().after_train_iter(runner, batch_idx, data_batch, outputs)
        self._stop_if_signalled(runner, batch_idx)

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

    def _remove(self, path):
        if self.file_backend.isfile(path):
            self.file_backend.remove(path)
        elif self.file_backend.isdir(path):  # sharded checkpoint folder
            self.file_backend.rmtree(path)
