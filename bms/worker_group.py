"""Celery workers (and gunicorn) forked from one process that has loaded Django, the tasks and
the web application once.

Each is its own process, exactly as if started alone: a worker with its own queues, prefork
pool, time limits and remote-control name; gunicorn with its master and workers. They only
share, copy-on-write, the pages of the code the parent loaded (70-120 MB each otherwise:
docs/BENCHMARKS.md, "Footprint"). The small-box shape of scripts/run-site.sh starts the web,
control and ingest workers this way.

    python -m bms.worker_group gunicorn -c python:bms.gunicorn_conf bms.wsgi:application \\
        -- -Q control -c 1 -n control@%h -l INFO \\
        -- BMS_BEAT_THREAD=1 -Q ingest,commit -c 1 -n ingest@%h -l INFO

Groups are separated by `--`: `gunicorn` and its options, or `celery worker` options; leading
NAME=VALUE words set that process's environment. SIGTERM and SIGINT are passed on to every worker; when one worker exits,
the others are stopped and this process exits with the first one's status, so a supervisor
(run-site.sh's `wait -n`) sees the failure.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time

STOP_GRACE_S = 30  # a worker finishing its task on SIGTERM; then SIGKILL


def groups(argv: list[str]) -> list[tuple[dict[str, str], list[str]]]:
    """[(environment, worker options)] from the command line split at `--`."""
    out, current = [], []
    for word in [*argv, "--"]:
        if word != "--":
            current.append(word)
            continue
        if current:
            env = {}
            while current and "=" in current[0] and not current[0].startswith("-"):
                name, _, value = current.pop(0).partition("=")
                env[name] = value
            out.append((env, current))
        current = []
    return out


def run_worker(app, env: dict[str, str], options: list[str]) -> None:
    """In the forked child: its environment, then gunicorn's or Celery's own command."""
    os.environ.update(env)
    status = 1
    try:
        if options[:1] == ["gunicorn"]:
            from gunicorn.app.wsgiapp import WSGIApplication

            sys.argv = options
            WSGIApplication("%(prog)s [OPTIONS] [APP_MODULE]").run()
        else:
            app.worker_main(["worker", *options])
        status = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os._exit(status)  # never return into the parent's code


def main(argv: list[str] | None = None) -> int:
    wanted = groups(sys.argv[1:] if argv is None else argv)
    if not wanted:
        sys.exit("usage: python -m bms.worker_group WORKER-OPTIONS [-- WORKER-OPTIONS ...]")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bms.settings")
    import django

    django.setup()
    from django.db import connections

    from bms.celery import app

    app.loader.import_default_modules()
    if any(options[:1] == ["gunicorn"] for _, options in wanted):
        import bms.wsgi  # noqa: F401  (the URL conf, views, DRF: gunicorn's master preloads it)
    connections.close_all()  # none may be shared by the forked workers
    gc.freeze()  # the loaded objects' pages stay shared: no child's collector writes them

    children: dict[int, list[str]] = {}
    asked: list[int] = []  # a stop signal that came while the workers were being forked

    def forward(signum, _frame) -> None:
        asked.append(signum)
        for pid in children:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                continue  # already gone: os.wait below collects it

    # Before forking: a SIGTERM at any moment from now on reaches every worker started.
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for env, options in wanted:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the worker installs its own
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            run_worker(app, env, options)
        children[pid] = options
        if asked:
            os.kill(pid, asked[0])

    pid, status = os.wait()
    first = os.waitstatus_to_exitcode(status)  # negative: killed by that signal
    first = first if first >= 0 else 128 - first
    children.pop(pid, None)
    for other in children:
        try:
            os.kill(other, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + STOP_GRACE_S
    while children and time.monotonic() < deadline:
        done, _ = os.waitpid(-1, os.WNOHANG)
        if done:
            children.pop(done, None)
        else:
            time.sleep(0.2)
    for other in children:
        os.kill(other, signal.SIGKILL)
        os.waitpid(other, 0)
    return first


if __name__ == "__main__":
    sys.exit(main())
