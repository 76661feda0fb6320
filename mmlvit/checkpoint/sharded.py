"""Sharded checkpoint folders (FSDP's ``epoch_N.pth/rank{i}.pth``) written
as a whole or not at all.

mmengine's ``FSDPStrategy`` writes every process's shard into the final
folder: a kill during the save leaves a folder with some shards missing, or
old and new shards mixed when a folder is saved again (the rewrite of
``epoch_N.pth`` after a new best score). Here every process writes its
shard into a hidden temporary folder next to it
(``.epoch_N.pth.sharded.tmp``); once all have written, rank 0 adds the
completion marker :data:`COMPLETE_MARKER` (the number of shards) and renames
the folder to its final name. A folder being replaced is first renamed to
``.epoch_N.pth.replaced.tmp`` and deleted after the new one is in place;
a kill between the two renames leaves both hidden folders, and
:func:`clean_leftovers` (called when the next run starts) puts the complete
one back under the final name.
"""

import json
import os
import os.path as osp
import shutil
import zipfile

from mmengine.dist import barrier, get_world_size, is_main_process

from .atomic_files import TEMP_SUFFIX, atomic_write, sync_folder

COMPLETE_MARKER = 'complete.json'
WRITING, REPLACED = '.sharded', '.replaced'


def hidden_folder(path, kind):
    """``folder/.name<kind>.tmp``: the temporary folder of ``path``."""
    folder, name = osp.split(osp.abspath(path))
    return osp.join(folder, f'.{name}{kind}{TEMP_SUFFIX}')


def save_sharded(write, path):
    """Write a sharded checkpoint folder atomically; every process calls it.

    Args:
        write (Callable[[str], None]): Writes this process's shard into the
            folder it is given.
        path (str): The checkpoint folder's final name.
    """
    writing = hidden_folder(path, WRITING)
    if is_main_process() and osp.isdir(writing):
        shutil.rmtree(writing)
    barrier()
    write(writing)
    barrier()
    if is_main_process():
        marker = json.dumps(dict(shards=get_world_size()))
        atomic_write(osp.join(writing, COMPLETE_MARKER), marker)
        replaced = None
        if osp.isdir(path):
            replaced = hidden_folder(path, REPLACED)
            if osp.isdir(replaced):
                shutil.rmtree(replaced)
            os.rename(path, replaced)
        os.rename(writing, path)
        sync_folder(osp.dirname(osp.abspath(path)))
        if replaced is not None:
            shutil.rmtree(replaced)
    barrier()


def folder_problem(path):
    """Why the sharded checkpoint folder ``path`` cannot be resumed (its
    write did not finish, a shard is missing or truncated), or None when it
    is complete."""
    marker = osp.join(path, COMPLETE_MARKER)
    try:
        with open(marker) as file:
            shards = json.load(file)['shards']
    except FileNotFoundError:
        return (
            f'no {COMPLETE_MARKER}: its write did not finish, or it was '
            'written without completion marker'
        )
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f'{COMPLETE_MARKER} is unreadable ({err})'
    damaged = [
        f'rank{rank}.pth'
        for rank in range(shards)
        if not zipfile.is_zipfile(osp.join(path, f'rank{rank}.pth'))
    ]
    if damaged:
        return (
            f'{len(damaged)} of {shards} shards are missing or truncated: '
            + ', '.join(damaged)
        )
    return None


def clean_leftovers(folder):
    """Remove the temporary folders of sharded writes that were killed, or
    put a complete one back under its final name when that name is missing
    (a kill between the two renames of a replacement).

    Returns:
        list[str]: One log line per folder removed or restored.
    """
    messages = []
    leftovers = [
        osp.join(folder, name)
        for name in sorted(os.listdir(folder) if osp.isdir(folder) else [])
        for kind in (WRITING, REPLACED)
        if name.startswith('.') and name.endswith(kind + TEMP_SUFFIX)
    ]
    # A finished new folder is preferred to the one it was replacing.
    leftovers.sort(key=lambda p: not p.endswith(WRITING + TEMP_SUFFIX))
    for path in leftovers:
        name = osp.basename(path)[1:].rsplit('.', 2)[0]
        final = osp.join(folder, name)
        if not osp.exists(final) and folder_problem(path) is None:
            os.rename(path, final)
            messages.append(
                f'Restored {final} from {path}: a complete checkpoint folder '
                'whose rename was killed.'
            )
        else:
            shutil.rmtree(path)
            messages.append(
                f'Removed {path}: a checkpoint folder write that was killed '
                'before it finished.'
            )
    return messages
