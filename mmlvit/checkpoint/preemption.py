"""Stopping training on a signal (SIGTERM, SIGUSR1) with a resumable
checkpoint: the part of :class:`SafeCheckpointHook` that handles
``stop_signals``."""

import logging
import os.path as osp
import signal
import threading
import time

import torch
from mmengine.dist import all_reduce, barrier, get_world_size, is_main_process
from mmengine.logging import print_log

from .atomic_files import atomic_write

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


class StopOnSignalMixin:
    """Stop after the current iteration on a signal of ``stop_signals``,
    save ``iter_{N}.pth`` and exit with :data:`PREEMPTED_EXIT_CODE`; mixed
    in before mmengine's ``CheckpointHook`` (arguments: see
    :class:`SafeCheckpointHook`).
    """

    def __init__(self, *args, stop_signals=('SIGTERM', 'SIGUSR1'), **kwargs):
        super().__init__(*args, **kwargs)
        self.stop_signals = [
            getattr(signal, name) for name in stop_signals or ()
        ]
        self._received = None  # (signal number, time.time()) of a stop
        self._old_handlers = {}
        self._preemption_ckpt = None

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

    def _stop_if_signalled(self, runner, batch_idx):
        """Stop now when a process received a stop signal (called after
        every training iteration)."""
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
