"""What a Triton kernel asks of a GPU multiprocessor, found without a GPU.

Triton's own compiler and the ``ptxas`` it ships compile a kernel for a
target architecture (no device needed); ``cuobjdump`` (shipped too) reads
the cubin's registers per thread, the stack a thread spills to (local
memory, a round trip through the caches for every spilled value), the
static shared memory and the machine code (SASS), whose loops it counts;
Triton's metadata gives the dynamic shared memory it launches the kernel
with. From the registers and the shared memory follows how many warps one
multiprocessor holds at once.

A kernel is compiled as Triton's launch specialises it for a ViT-B call
(:meth:`KernelCase.attributes`): every pointer 16-byte aligned, every
integer argument it specialises on a multiple of 16 (ViT-B's strides and
widths are), those of :attr:`KernelCase.ones` equal to 1 (a contiguous
axis's stride: a constant). What the compiler may assume of them decides
how wide its loads are (one element, or 16 bytes) and whether its loops
copy ahead asynchronously.
"""

import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from unittest import mock

# A multiprocessor of each architecture: 64 K 32-bit registers, given to a
# warp in units of 256 (8 per thread); at most ``warps`` resident warps;
# ``shared`` bytes of shared memory, of which every resident program also
# takes 1 KiB for the system and one program may have at most
# ``per_program`` (CUDA's opt-in limit; Triton refuses to launch a kernel
# over it).
REGISTERS_PER_SM = 65536
REGISTER_UNIT = 8
SHARED_PER_PROGRAM = 1024
MULTIPROCESSORS = {
    80: dict(warps=64, shared=164 * 1024, per_program=163 * 1024),  # A100
    86: dict(warps=48, shared=100 * 1024, per_program=99 * 1024),
    89: dict(warps=48, shared=100 * 1024, per_program=99 * 1024),  # L40S
    90: dict(warps=64, shared=228 * 1024, per_program=227 * 1024),  # H100
}

_USAGE = re.compile(r'REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)')
# One SASS instruction of ``cuobjdump -sass``: /*address*/ [@pred] OP...;
_INSTRUCTION = re.compile(r'/\*([0-9a-f]{4,})\*/\s+([^;]*);')
_BRANCH = re.compile(r'\bBRA\s+0x([0-9a-f]+)')
# A global load or store of one or two bytes: a tile moved element by
# element, not in vectors of up to 16 bytes.
_NARROW = re.compile(r'\b(?:LDG|STG)\.E\.[US](?:8|16)\b')
# Opcodes counted in a loop body, by what they cost.
OPCODES = {
    'barriers': ('BAR',),
    'shuffles': ('SHFL',),
    'mma': ('HMMA', 'WGMMA', 'HGMMA'),
    'special': ('MUFU',),  # exp2, reciprocal, ...
    'spill_accesses': ('LDL', 'STL'),
}


@dataclass
class KernelCase:
    """One kernel at one launch configuration.

    Args:
        name (str): How the table names it.
        fn: The ``@triton.jit`` function.
        pointers (dict): Pointer arguments and their element types, e.g.
            ``{'q_ptr': 'bf16'}``.
        constexprs (dict): Its compile-time arguments.
        num_warps (int): Warps per program.
        floats (tuple): Scalar float arguments (other scalars are i32).
        options (dict): Its other launch options (e.g. ``ptx_options``).
        ones (tuple): Integer arguments that are 1 at run time (the
            strides of contiguous axes), which Triton makes constants.
    """

    name: str
    fn: object
    pointers: dict
    constexprs: dict
    num_warps: int
    floats: tuple = ()
    options: dict = field(default_factory=dict)
    ones: tuple = ()

    def constants(self):
        """Its compile-time arguments, those of :attr:`ones` included."""
        return dict(self.constexprs, **dict.fromkeys(self.ones, 1))

    def signature(self):
        """Triton's signature: a type for every argument."""
        types = {}
        constants = self.constants()
        for arg in self.fn.arg_names:
            if arg in constants:
                types[arg] = 'constexpr'
            elif arg in self.pointers:
                types[arg] = '*' + self.pointers[arg]
            else:
                types[arg] = 'fp32' if arg in self.floats else 'i32'
        return types

    def attributes(self):
        """Triton's specialisation of a launch: 16-byte alignment of every
        pointer, divisibility by 16 of every i32 argument the kernel does
        not exclude (``do_not_specialize``)."""
        types = self.signature()
        divisible = [['tt.divisibility', 16]]
        return {
            (i,): divisible
            for i, param in enumerate(self.fn.params)
            if types[param.name].startswith('*')
            or (types[param.name] == 'i32' and not param.do_not_specialize)
        }


def parse_usage(text):
    """(registers, stack bytes, shared bytes) of the first function in
    ``cuobjdump --dump-resource-usage`` output."""
    match = _USAGE.search(text)
    if match is None:
        raise ValueError(f'No resource usage in cuobjdump output: {text!r}')
    return tuple(int(x) for x in match.groups())


def sass_loops(sass):
    """The loops of a kernel's SASS (``cuobjdump -sass`` text), smallest
    first: one per backward branch, with the ``instructions`` of its body
    (inner loops included) and how many of them are of each kind of
    :data:`OPCODES`. A body's count times its trip count is what one warp
    executes (branches inside counted as taken).

    Returns:
        list[dict]: ``start`` / ``end`` (hex addresses), ``instructions``
        and one count per key of :data:`OPCODES`.
    """
    code = _code(sass)
    loops = []
    for address, words in code:
        branch = _BRANCH.search(' '.join(words))
        # Forward branches are no loops, nor is the branch to itself that
        # ends every kernel's code.
        if branch is None or int(branch.group(1), 16) >= address:
            continue
        start = int(branch.group(1), 16)
        body = [(a, w) for a, w in code if start <= a <= address]
        loop = dict(start=hex(start), end=hex(address), instructions=len(body))
        loops.append(dict(loop, **opcode_counts(body)))
    return sorted(loops, key=lambda loop: loop['instructions'])


def _code(sass):
    """(address, words) of each instruction of SASS text."""
    return [
        (int(address, 16), text.split())
        for address, text in _INSTRUCTION.findall(sass)
    ]


def opcode_counts(code):
    """How many instructions of ``code`` ((address, words) pairs) are of
    each kind of :data:`OPCODES` (a predicate ``@P0`` skipped)."""
    ops = [
        (w[1] if w[0].startswith('@') else w[0]).split('.')[0] for _, w in code
    ]
    return {
        kind: sum(op in names for op in ops) for kind, names in OPCODES.items()
    }


def resident_warps(registers, num_warps, shared_bytes=0, arch=90):
    """Warps of one kernel an sm_``arch`` multiprocessor holds at once:
    whole programs of ``num_warps`` within its registers and its shared
    memory (other limits left out); 0 when one program needs more shared
    memory than it may have (the kernel cannot launch)."""
    sm = MULTIPROCESSORS[arch]
    if shared_bytes > sm['per_program']:
        return 0
    per_thread = -(-registers // REGISTER_UNIT) * REGISTER_UNIT
    programs = REGISTERS_PER_SM // (per_thread * 32 * num_warps)
    by_shared = sm['shared'] // (shared_bytes + SHARED_PER_PROGRAM)
    return min(min(programs, by_shared) * num_warps, sm['warps'])


def _tool(name):
    import triton

    return os.path.join(
        os.path.dirname(triton.__file__), 'backends', 'nvidia', 'bin', name
    )


def kernel_resources(case, arch=90, loops=False):
    """Compile ``case`` for sm_``arch`` and read what it uses.

    Returns:
        dict: ``compile_s``, the seconds Triton took to compile it from an
        empty cache (this machine's CPU), ``registers`` per thread,
        ``spill_bytes`` (stack per thread),
        ``shared_bytes`` per program (static and dynamic),
        ``resident_warps`` per multiprocessor; with ``loops``, also the
        kernel's ``instructions``, their :func:`opcode_counts`
        (``opcodes``), its :func:`sass_loops` and its ``narrow_accesses``
        (global loads and stores of 1 or 2 bytes).
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source = ASTSource(
        fn=case.fn,
        signature=case.signature(),
        constexprs=case.constants(),
        attrs=case.attributes(),
    )
    with tempfile.TemporaryDirectory() as tmp:
        # An empty cache of its own: the compile is timed cold, as a
        # first launch on a fresh machine runs it.
        cache = dict(TRITON_CACHE_DIR=os.path.join(tmp, 'cache'))
        with mock.patch.dict(os.environ, cache):
            start = time.perf_counter()
            compiled = triton.compile(
                source,
                target=GPUTarget('cuda', arch, 32),
                options=dict(num_warps=case.num_warps, **case.options),
            )
            compile_s = time.perf_counter() - start
        path = os.path.join(tmp, 'kernel.cubin')
        with open(path, 'wb') as f:
            f.write(compiled.asm['cubin'])
        usage = _cuobjdump('--dump-resource-usage', path)
        sass = _cuobjdump('-sass', path) if loops else ''
    registers, stack, shared = parse_usage(usage)
    shared += compiled.metadata.shared
    used = dict(
        compile_s=compile_s,
        registers=registers,
        spill_bytes=stack,
        shared_bytes=shared,
        resident_warps=resident_warps(registers, case.num_warps, shared, arch),
    )
    if loops:
        code = _code(sass)
        used['instructions'] = len(code)
        used['opcodes'] = opcode_counts(code)
        used['loops'] = sass_loops(sass)
        used['narrow_accesses'] = len(_NARROW.findall(sass))
    return used


def _cuobjdump(option, path):
    command = [_tool('cuobjdump'), option, path]
    return subprocess.run(
        command, capture_output=True, text=True, check=True
    ).stdout
