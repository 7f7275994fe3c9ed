"""The ``dnnplan`` command line: a thin Typer app.

Each command group lives in its own module in this package (``profile``, ``plan``, ...) and only
parses arguments, calls the library and prints with Rich. Heavy libraries (TensorFlow, onnx)
are imported inside command bodies so ``dnnplan --help`` stays fast.

Errors: any :class:`optimizer.errors.DnnplanError` becomes one line on stderr and exit code 2;
``--debug`` re-raises it with the traceback. Outputs: the output options register their paths
with one :class:`optimizer.fileio.OutputTransaction` per command, so the outputs appear together
when the command succeeds and not at all when it fails. Ctrl-C and SIGTERM end a command with
one ``interrupted`` line and exit code 130.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import typer  # noqa: E402
import typer.core  # noqa: E402

from .. import __version__  # noqa: E402
from ..errors import DnnplanError  # noqa: E402
from ..fileio import DISK_ERRNOS, OutputTransaction, write_error  # noqa: E402
from .common import STATE, console_err  # noqa: E402

class _CommandInterrupted(BaseException):
    """Carries a command's KeyboardInterrupt past Typer, which would turn it into a plain
    ``Exit(130)`` (losing its message and committing the command's outputs)."""

    def __init__(self, interrupt: KeyboardInterrupt) -> None:
        super().__init__(str(interrupt))
        self.interrupt = interrupt


class _Group(typer.core.TyperGroup):
    def invoke(self, ctx: typer.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _CommandInterrupted(exc) from exc


app = typer.Typer(
    cls=_Group,
    name="dnnplan",
    help="Plan DNN deployments on phones: profile, quantize, cost, map, split, simulate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# command modules register themselves on `app` when imported; order = order in --help
COMMAND_MODULES: tuple[str, ...] = ("profile", "quantize", "cost", "measure", "map", "plan", "split", "batch", "deploy", "export_sweep", "thermal", "policies", "report", "simulate", "calibrate")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dnnplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars or summaries on stderr."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    search_spaces: Optional[str] = typer.Option(
        None, "--search-spaces", metavar="DIR",
        help="A folder laid out like search_spaces/ (devices/, networks/, jobs/...) whose files overlay the "
             "shipped ones (same name: yours wins); adds to $DNNPLAN_SEARCH_SPACES."),
) -> None:
    STATE.debug = debug
    STATE.quiet = quiet
    if search_spaces is not None:
        from ..shipped import add_user_root

        add_user_root(search_spaces)


for _name in COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")


def _warning_line(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
    """Warnings as one ``warning: ...`` line on stderr (silenced by ``--quiet``)."""
    if not STATE.quiet:
        console_err.print(f"[yellow]warning:[/] {message}", highlight=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: run the app, turning project errors into exit code 2."""
    STATE.debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        with warnings.catch_warnings(), _sigterm_interrupts(), OutputTransaction():
            warnings.showwarning = _warning_line
            rc = app(args=argv, standalone_mode=False)  # click returns the code of typer.Exit here
    except DnnplanError as exc:
        if STATE.debug:
            raise
        console_err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except (KeyboardInterrupt, _CommandInterrupted) as exc:
        done = str(exc)  # optimizer.errors.Interrupted carries what was finished
        console_err.print(f"interrupted: {done}" if done else "interrupted", highlight=False, soft_wrap=True)
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except OSError as exc:  # a working file (temporary model, calibration batch) the disk refused
        if STATE.debug or exc.errno not in DISK_ERRNOS:
            raise
        import tempfile  # a write of an open file carries no name: working files live in the temporary folder

        err = write_error(exc.filename or tempfile.gettempdir(), "working file", exc)
        console_err.print(f"[bold red]error:[/] {err}", highlight=False, soft_wrap=True)
        return err.exit_code
    except typer.Abort:
        console_err.print("aborted")
        return 1
    except Exception as exc:  # usage errors of (Typer's copy of) click carry their own exit code
        if callable(getattr(exc, "show", None)) and isinstance(getattr(exc, "exit_code", None), int):
            if callable(getattr(exc, "format_message", None)):  # a usage error: one line, as ours
                ctx = getattr(exc, "ctx", None)
                command = " ".join(["dnnplan", *([_command_of(ctx)] if ctx is not None else [])]).strip()
                message = " ".join(exc.format_message().split()).rstrip(".")
                console_err.print(f"[bold red]error:[/] {message}; see '{command} --help'",
                                  highlight=False, soft_wrap=True)
            else:
                exc.show()
            return exc.exit_code
        raise
    return rc if isinstance(rc, int) else 0


def _command_of(ctx: typer.Context) -> str:
    """``split`` or ``batch run``: the command words of a click context (program name left out)."""
    words = []
    while ctx.parent is not None:
        words.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(words)).strip()


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler's stop) ends a command as Ctrl-C does: cleanly, exit 130."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def entry() -> None:
    sys.exit(main())
