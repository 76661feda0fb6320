"""When interpreter_run starts the interpreter scripts."""

import interpreter_run


def recording(monkeypatch):
    """The scripts ``interpreter_run.start`` is asked to start, in order
    (each gets a fresh stand-in process)."""
    started = []

    def start(script):
        started.append(script)
        return object()

    monkeypatch.setattr(interpreter_run, 'start', start)
    return started


def test_one_pytest_process_starts_a_script_at_collection(monkeypatch):
    started = recording(monkeypatch)
    monkeypatch.delenv('PYTEST_XDIST_WORKER', raising=False)
    process = interpreter_run.starter('a_interpreter.py')
    assert started == ['a_interpreter.py']
    assert process() is process()
    assert started == ['a_interpreter.py']


def test_an_xdist_worker_starts_a_script_when_first_needed(monkeypatch):
    """Every worker collects every module: starting at collection would
    run each script once per worker (eight times in gpu_report's CUDA
    tests, which need none of them)."""
    started = recording(monkeypatch)
    monkeypatch.setenv('PYTEST_XDIST_WORKER', 'gw1')
    process = interpreter_run.starter('a_interpreter.py')
    assert started == []
    assert process() is process()
    assert started == ['a_interpreter.py']
