"""``main``: parse, run the command, turn every failure into one line and an exit status."""
from __future__ import annotations

import os
import sys
import warnings
from typing import Sequence

from .commands import COMMANDS
from .parsing import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, UsageError, build_parser, misspelled_option


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = list(sys.argv[1:] if argv is None else argv)
    misspelled = misspelled_option(args, parser)
    if misspelled:
        parser.print_usage(sys.stderr)
        print(f"cudnn-algos: error: {misspelled}", file=sys.stderr)
        return EXIT_USAGE
    a = parser.parse_args(args)  # --help, --version and usage errors end here, before torch is imported
    from ..errors import (CudaError, CudaUnavailableError, CudnnError, ExtensionUnavailableError, ResultFileError,
                          TuningDBError, TuningDBForeign)

    shown = warnings.showwarning
    warnings.showwarning = _one_line_warning
    try:
        return COMMANDS[a.command](a)
    except UsageError as e:
        if e.show_usage:  # the command's own usage line, not the top-level one
            a._commands.get(a.command, parser).print_usage(sys.stderr)
        print(f"cudnn-algos: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except TuningDBForeign as e:  # a --db that names another file: a bad input file, left as it was
        print(f"cudnn-algos: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (CudaUnavailableError, CudnnError, CudaError, ExtensionUnavailableError, TuningDBError,
            ResultFileError) as e:
        print(f"cudnn-algos: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("cudnn-algos: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as other Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
    except Exception as e:  # torch.OutOfMemoryError and anything unexpected: one line, no traceback
        if type(e).__name__ == "OutOfMemoryError":
            print(f"cudnn-algos: out of GPU memory: {(str(e).splitlines() or [''])[0]}", file=sys.stderr)
            return EXIT_FAILED
        if a.debug:
            raise
        print(f"cudnn-algos: unexpected {type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]} (run again "
              "with --debug before the command for the traceback)", file=sys.stderr)
        return EXIT_FAILED
    finally:
        warnings.showwarning = shown


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning during a command (a database moved aside and salvaged, a lock waited for) as one line of the
    CLI's, not Python's file:line form."""
    print(f"cudnn-algos: warning: {message}", file=sys.stderr if file is None else file)


if __name__ == "__main__":
    sys.exit(main())
