"""``sessiontape run`` and ``sessiontape chat``: prompts through an agent, recorded.

``run`` answers one prompt; ``chat`` is a prompt loop (readline, with its
history in the skillet state directory). Both continue ``--session-name`` if
it has turns (replayed on stdout first; the model sees the history from the
item store) or start a new conversation, whose name goes to stderr.

Ctrl-C during an answer cancels that run (recorded as stopped); ``run``
then leaves (130), ``chat`` returns to the prompt, where Ctrl-C leaves (130). A
second Ctrl-C before the run has stopped leaves at once. Neither waits for a
synchronous tool the cancelled run left blocked in its thread
(:func:`~sessiontape.cli.conversation.leave`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from sessiontape.storage.names import DEFAULT_USER_ID, default_session_name

from . import VERBS
from .console import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Style,
    eprint,
    plural,
    printable,
    store_option,
    use_color,
    warnings_in_one_line,
)

HISTORY_FILE = ".sessiontape_chat_history"
HISTORY_LENGTH = 1000
CHAT_HELP = """\
/help      this help
/compact   compact the stored history now (older items become a summary) and say what it did
/exit      leave (so do /quit and Ctrl-D)
Ctrl-C     cancels a running answer (recorded as stopped); at the prompt it leaves"""


def history_path() -> Path:
    """The chat's readline history: ``<skillet state>/.sessiontape_chat_history``."""
    from sessiontape.storage.paths import SkilletPaths
    return SkilletPaths.resolve().state / HISTORY_FILE


def _open(args: argparse.Namespace, verb: str, stream: bool, prefix: str = "") -> Any:
    """The Conversation of ``args``, or an exit code after a usage error (printed)."""
    if args.model and not os.environ.get("OPENAI_API_KEY"):
        eprint(f"sessiontape {verb}: --model {args.model} needs OPENAI_API_KEY "
               "(leave --model out to run the agent as it is)")
        return EXIT_USAGE
    if args.user_email == "":  # an unset variable: no one to file the conversation under
        eprint(f"sessiontape {verb}: --user-email is empty")
        return EXIT_USAGE
    from .finding import store_refuses_run

    if store_refuses_run(f"sessiontape {verb}", args.store):  # before the SDK is loaded
        return EXIT_FAILURE
    from .agent_loader import AgentLoadError, load_agent
    from .conversation import AgentSource, Conversation, Output

    out = Output()
    warnings_in_one_line(fresh_line=out.fresh_line)

    agent = None
    if args.agent is not None:
        try:
            agent = load_agent(args.agent)
        except AgentLoadError as exc:
            eprint(printable(f"sessiontape {verb}: --agent {args.agent}: {exc}"))
            return EXIT_USAGE
    if args.session_name == "":  # an unset variable, not a request for a new session
        eprint(f"sessiontape {verb}: --session-name is empty (leave it out for a new session)")
        return EXIT_USAGE
    source = AgentSource(agent, model=args.model)
    session_name = args.session_name or default_session_name()
    try:
        conversation = Conversation(source, user_id=args.user_email, session_name=session_name,
                                    stream=stream, out=out, color=use_color(), prefix=prefix,
                                    store=args.store)
    except ValueError as exc:  # a name the Recorder refuses: not text (undecodable bytes)
        eprint(printable(f"sessiontape {verb}: {exc}"))
        return EXIT_USAGE
    name, user, described = (printable(text, one_line=True) for text in
                             (session_name, args.user_email, source.describe()))
    if conversation.earlier:
        eprint(f"sessiontape: continuing {name} of {user} "
               f"({plural(len(conversation.earlier), 'earlier turn')}; {described})")
    else:
        eprint(f"sessiontape: new conversation {name} of {user} "
               f"({described}); continue it with --session-name {name}")
    return conversation


def _failure(verb: str, error: BaseException) -> None:
    eprint(printable(f"sessiontape {verb}: the run failed: {type(error).__name__}: {error} "
                     "(recorded as failed)"))


def cmd_run(args: argparse.Namespace) -> int:
    """Run one prompt through the agent, recorded; the answer on stdout."""
    prompt = " ".join(args.prompt).strip()
    if not prompt:
        eprint("sessiontape run: the prompt is empty")
        return EXIT_USAGE
    conversation = _open(args, "run", args.stream)
    if isinstance(conversation, int):
        return conversation
    if conversation.replay():
        # the transcript goes on: this turn in the same form as the replayed ones
        conversation.out.line(f"user> {prompt}")
        conversation.prefix = "agent> "
    from .conversation import (
        RunInterrupted,
        exit_now,
        leave,
        leave_on_ctrl_c,
        run_interruptible,
    )

    leave_on_ctrl_c()  # but during the run, whose first Ctrl-C cancels it
    loop = asyncio.new_event_loop()
    try:
        outcome = run_interruptible(loop, conversation.ask(prompt))
    except RunInterrupted:
        outcome = None
        eprint("sessiontape run: cancelled (recorded as stopped)")
    except KeyboardInterrupt:  # a second Ctrl-C before the run had stopped
        eprint()
        exit_now(EXIT_INTERRUPTED)
    finally:
        _shutdown(loop, conversation)
    if outcome is None:
        return leave(EXIT_INTERRUPTED, cancelled=True)
    if not outcome.ok:
        _failure("run", outcome.error)
        return EXIT_FAILURE
    if conversation.recorder.errors:
        eprint(f"sessiontape run: {conversation.recorder.errors} recording error(s); "
               "see the warning above")
        return EXIT_FAILURE
    return EXIT_OK


class _History:
    """readline with its history file, when stdin is a terminal."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.readline: Any = None
        if not sys.stdin.isatty():
            return
        try:
            import readline
        except ImportError:  # pragma: no cover - Python built without readline
            return
        self.readline = readline
        readline.set_history_length(HISTORY_LENGTH)
        try:
            if path.exists():
                readline.read_history_file(path)
        except OSError as exc:
            eprint(f"sessiontape chat: cannot read the history {path}: {exc}")

    def save(self) -> None:
        if self.readline is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.readline.write_history_file(self.path)
        except OSError as exc:
            eprint(f"sessiontape chat: cannot write the history {self.path}: {exc}")
            self.readline = None  # say it once

    def prompt(self, style: Style) -> str:
        if not sys.stdin.isatty():
            return ""  # reading prompts from a pipe: answers only
        if self.readline is None or not style.bold:
            return f"{style.bold}user>{style.reset} "
        # readline must know which characters take no room on the line
        return f"\001{style.bold}\002user>\001{style.reset}\002 "


def cmd_chat(args: argparse.Namespace) -> int:
    """A prompt loop over one recorded conversation."""
    from .conversation import (
        RunInterrupted,
        describe_compaction,
        exit_now,
        leave,
        leave_on_ctrl_c,
        run_interruptible,
    )

    color = use_color()
    style = Style(color)
    conversation = _open(args, "chat", args.stream, prefix=f"{style.cyan}agent>{style.reset} ")
    if isinstance(conversation, int):
        return conversation
    out = conversation.out
    if conversation.replay():
        out.line(f"{style.dim}-- earlier turns above --{style.reset}")
    if sys.stdin.isatty():
        eprint("sessiontape chat: /help for commands; Ctrl-D or /exit to leave")
    history = _History(history_path())
    prompt = history.prompt(style)
    loop = asyncio.new_event_loop()
    code = EXIT_OK
    cancelled = False  # a run (or compaction) was cancelled: it may have left threads behind
    try:
        while True:
            try:
                line = input(prompt).strip()
            except EOFError:
                out.line()
                break
            except KeyboardInterrupt:
                out.line()
                code = EXIT_INTERRUPTED
                break
            history.save()
            if not line:
                continue
            if line.startswith("/"):
                command = line.split()[0].lower()
                if command in ("/exit", "/quit"):
                    break
                if command == "/help":
                    out.line(CHAT_HELP)
                elif command == "/compact":
                    try:
                        info = run_interruptible(loop, conversation.compact())
                        stored = run_interruptible(loop, conversation.stored_items())
                    except RunInterrupted:
                        cancelled = True
                        eprint("sessiontape chat: compaction cancelled")
                        continue
                    except Exception as exc:
                        eprint(printable("sessiontape chat: compaction failed: "
                                         f"{type(exc).__name__}: {exc}"))
                        continue
                    out.line(describe_compaction(info, stored))
                else:
                    eprint(printable(f"sessiontape chat: unknown command {command} "
                                     "(/help lists them)"))
                continue
            try:
                outcome = run_interruptible(loop, conversation.ask(line))
            except RunInterrupted:
                cancelled = True
                eprint("sessiontape chat: cancelled (recorded as stopped)")
                continue
            if not outcome.ok:
                _failure("chat", outcome.error)
    except KeyboardInterrupt:  # a second Ctrl-C before the answer had stopped
        out.line()
        history.save()
        exit_now(EXIT_INTERRUPTED)
    finally:
        leave_on_ctrl_c()
        history.save()
        _shutdown(loop, conversation)
    if conversation.recorder.errors:
        eprint(f"sessiontape chat: {conversation.recorder.errors} recording error(s); "
               "see the warning above")
    return leave(code, cancelled=cancelled)


def _shutdown(loop: asyncio.AbstractEventLoop, conversation: Any) -> None:
    """Cancel what is left of a run, write the recording, close the store and the loop.

    The loop's default executor is not waited for: a synchronous tool of a cancelled run
    may still block one of its threads. Called with ``leave_on_ctrl_c`` in force: a Ctrl-C
    meanwhile (a task of the run that ignores its cancellation) leaves at once.
    """
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(conversation.close())
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


def _common(parser: argparse.ArgumentParser, *, stream: bool) -> None:
    parser.add_argument("--user-email", default=DEFAULT_USER_ID,
                        help="user id (default: %(default)s)")
    parser.add_argument("--session-name", default=None,
                        help="conversation to continue; its earlier turns are replayed first "
                             "(default: a new session_<time>_<hex>, printed on stderr)")
    parser.add_argument("--agent", default=None, metavar="MODULE:ATTR",
                        help="your agent: an Agent, or a function returning one, as "
                             "module:attr or path/to/file.py:attr (default: the bundled demo "
                             "agent, offline)")
    parser.add_argument("--model", default=None,
                        help="run the agent on this OpenAI model, e.g. gpt-4.1-mini "
                             "(needs OPENAI_API_KEY)")
    parser.add_argument("--stream", action=argparse.BooleanOptionalAction, default=stream,
                        help="print the answer as it arrives (default: %(default)s)")
    store_option(parser, "record into (and continue from)")


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run`` and ``chat``."""
    run = verbs.add_parser(
        "run", help=VERBS["run"].help,
        description="Run PROMPT through an agent (yours with --agent, else the bundled demo "
                    "agent, offline) and record it. The answer goes to stdout; if --session-name "
                    "has earlier turns, they are replayed first and this turn follows as "
                    "user>/agent> lines. Exit codes: 0 ok, "
                    "1 the run failed (still recorded), or was not recorded whole (a warning "
                    "says where), or the item store is damaged (nothing is run), 2 usage, "
                    "130 Ctrl-C.")
    _common(run, stream=False)
    run.add_argument("prompt", nargs="+", metavar="PROMPT", help="the prompt (words are joined)")
    run.set_defaults(handler=cmd_run)

    chat = verbs.add_parser(
        "chat", help=VERBS["chat"].help,
        description="A prompt loop over one recorded conversation (see `run`). Commands: "
                    "/help, /compact, /exit. Ctrl-D leaves; Ctrl-C cancels a running answer "
                    "and returns to the prompt, and at the prompt leaves (130). Readline "
                    f"history: <skillet state>/{HISTORY_FILE}.")
    _common(chat, stream=True)
    chat.set_defaults(handler=cmd_chat)
